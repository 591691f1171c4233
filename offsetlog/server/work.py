"""What a protocol handler returns: a response, or the work whose outcome makes one.

Handlers are plain functions (h11's shape): a decoded request and ``now_ms`` in, a
:class:`Reply` out. They never block; the connection's thread
(``offsetlog.server.connection``) does the waiting, in this order:

* ``delay_ms``: a pause first (Fetch's ``max_wait_ms``: there are never messages);
* ``futures``: the store's ``concurrent.futures.Future``s (a parked JoinGroup, a
  SyncGroup waiting for its fsync);
* ``blocking``: a store call that waits for an fsync (commits, deleting groups,
  transactions, topic creation).

``finish`` gets the outcomes, in order (futures, then the blocking call's), each an
:class:`Outcome`, and returns the response, or another ``Reply`` to chain more work. Keeping
the waiting out of the handlers keeps them testable without sockets or threads.
"""

from __future__ import annotations

from concurrent.futures import Future
from dataclasses import dataclass, field
from typing import Any, Callable


@dataclass(frozen=True)
class Outcome:
    value: Any = None
    error: BaseException | None = None

    def get(self) -> Any:
        if self.error is not None:
            raise self.error
        return self.value


@dataclass
class Reply:
    finish: Callable[[list[Outcome]], Any]
    futures: list[Future] = field(default_factory=list)
    blocking: Callable[[], Any] | None = None
    delay_ms: int = 0


def run_blocking(fn: Callable[[], Any], finish: Callable[[Outcome], Any]) -> Reply:
    """A reply made from one blocking call's outcome."""
    return Reply(lambda outcomes: finish(outcomes[0]), blocking=fn)


def after(futures: list[Future], finish: Callable[[list[Outcome]], Any]) -> Reply:
    return Reply(finish, futures=list(futures))
