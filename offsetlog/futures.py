"""Futures the store hands out.

Every one is returned already *running*: ``cancel()`` answers False. Once queued, a commit or a
group request will be written whatever its caller does next, so a future that could be
cancelled would lie about it (and a cancelled future refuses the outcome the writer later sets
on it). asyncio's ``wrap_future`` relies on this too: cancelling the awaiting task cancels the
asyncio side only.
"""

from __future__ import annotations

from concurrent.futures import Future
from typing import Any


def running_future() -> Future:
    fut: Future = Future()
    fut.set_running_or_notify_cancel()
    return fut


def resolved_future(result: Any = None) -> Future:
    fut = running_future()
    fut.set_result(result)
    return fut


def failed_future(error: BaseException) -> Future:
    fut = running_future()
    fut.set_exception(error)
    return fut
