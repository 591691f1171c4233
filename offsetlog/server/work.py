"""What a protocol handler returns: a response, or the work whose outcome makes one.

Handlers are plain functions (h11's shape): a decoded request and ``now_ms`` in, a
:class:`Reply` out. They never block and never await; the connection code
(``offsetlog.server.connection``) does the waiting:

* ``futures``: the store's ``concurrent.futures.Future``s (a parked JoinGroup, a
  SyncGroup waiting for its fsync); the loop carries on when they resolve;
* ``blocking``: a store call that waits for an fsync (commits, deleting groups,
  transactions, topic creation), run on a worker thread so the event loop never waits for
  a disk;
* ``delay_ms``: a pause first (Fetch's ``max_wait_ms``: there are never messages);
* ``inline``: the blocking call is one commit, which waits for nothing but its own fsync:
  when it is alone, the event loop may run it itself (connection.py says when);
* ``queued``: the blocking call's non-blocking form (``commit_async`` for a commit), used
  instead of a worker when it is not run inline: its future's outcome is the blocking
  call's.

``finish`` gets the outcomes, in order (futures, then the blocking call's), each an
:class:`Outcome`, and returns the response, or another ``Reply`` to chain more work. After a
blocking call it runs on that worker thread, and after a queued one on the thread that
resolved its future (which then sends the answer), so it must be a plain function of the
outcomes and of what the handler captured: no event-loop objects.
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
    inline: bool = False
    #: the blocking call's non-blocking form: queues the same work and returns a future of its
    #: outcome (commit_async for commit_sync); used instead of a worker when not inline
    queued: Callable[[], Future] | None = None


def run_blocking(fn: Callable[[], Any], finish: Callable[[Outcome], Any], *,
                 inline: bool = False, queued: Callable[[], Future] | None = None) -> Reply:
    """A reply made from one blocking call's outcome."""
    return Reply(lambda outcomes: finish(outcomes[0]), blocking=fn, inline=inline,
                 queued=queued)


def after(futures: list[Future], finish: Callable[[list[Outcome]], Any]) -> Reply:
    return Reply(finish, futures=list(futures))
