"""Futures the store hands out.

Every one is returned already *running*: ``cancel()`` answers False. Once queued, a commit or a
group request will be written whatever its caller does next, so a future that could be
cancelled would lie about it (and a cancelled future refuses the outcome the writer later sets
on it). asyncio's ``wrap_future`` relies on this too: cancelling the awaiting task cancels the
asyncio side only.
"""

from __future__ import annotations

import threading
from concurrent.futures import Future
from concurrent.futures._base import FINISHED as _FINISHED
from concurrent.futures._base import RUNNING as _RUNNING
from typing import Any, Callable

#: thread ident of a store's async writer -> its helper(future, timeout) -> the timeout left:
#: see StoreFuture
writer_helpers: dict[int, Callable[[Future, float | None], float | None]] = {}
_get_ident = threading.get_ident


class StoreFuture(Future):
    """A ``Future`` that a store's async writer thread can wait for.

    Done-callbacks run in the thread that resolves the future, often the async writer thread.
    One that waits there for another store future (``commit_async(...).result()``, a
    ``GroupMember.commit_sync``) would wait for that thread, that is for itself: it leads the
    queued rounds instead until the future is done (see ``GroupCommitter.help_until``).
    """

    def result(self, timeout: float | None = None) -> Any:
        if self._state == _FINISHED and self._exception is None:
            # Resolved for good (a finished future never changes again): skip the condition
            # lock that Future.result takes. Callers waiting on many futures that share one
            # (back-to-back commit_async calls) mostly land here.
            return self._result
        helper = writer_helpers.get(_get_ident())
        if helper is not None and not self.done():
            timeout = helper(self, timeout)
        return Future.result(self, timeout)

    def exception(self, timeout: float | None = None) -> BaseException | None:
        helper = writer_helpers.get(_get_ident())
        if helper is not None and not self.done():
            timeout = helper(self, timeout)
        return Future.exception(self, timeout)


def running_future() -> Future:
    fut: Future = StoreFuture()
    # What set_running_or_notify_cancel() does to a new future, without its condition lock
    # and notify: no other thread can hold this future yet (4 % of the wire server's loop
    # at 32 connections went to that lock, a future per queued commit)
    fut._state = _RUNNING
    return fut


def resolved_future(result: Any = None) -> Future:
    fut = running_future()
    fut.set_result(result)
    return fut


def failed_future(error: BaseException) -> Future:
    fut = running_future()
    fut.set_exception(error)
    return fut
