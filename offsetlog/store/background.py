"""The store's periodic background work: one way to start a thread, one loop around a pass.

Retention, the cleaner, snapshots, the group timer and the transaction timer each run a *pass*
every interval until their stop event is set. A pass that finds the store closed ends its
loop, as does one that finds it failed (logged once: nothing can be written until it is
reopened); any other exception is logged and the next interval tries again, so one bad pass
never silently stops the work for the rest of the store's life.
"""

from __future__ import annotations

import logging
import threading
from typing import Callable

from offsetlog.errors import StoreClosedError, StoreFailedError


def start(name: str, target: Callable[[], None]) -> threading.Thread:
    thread = threading.Thread(target=target, name=name, daemon=True)
    thread.start()
    return thread


def every(stop: threading.Event, interval_s: float, run_pass: Callable[[], None], what: str,
          logger: logging.Logger) -> None:
    """Call ``run_pass()`` every ``interval_s`` seconds until ``stop`` is set."""
    while not stop.wait(interval_s):
        try:
            run_pass()
        except StoreClosedError:
            return
        except StoreFailedError as e:
            logger.warning("%s: %s; stopping until the store is reopened", what, e)
            return
        except Exception:
            logger.exception("%s failed", what)
