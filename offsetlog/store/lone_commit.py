"""A commit call alone in its log partition: its own thread writes and applies it in one
pass, without the group-commit protocol's machinery.

This is ``offsetlog.store.group_commit``'s most common case: a ``commit_sync`` that finds its
partition idle (nothing queued, no leader, the async writer not scheduled, no one waiting for
exclusive use) would lead a round of one. Instead it takes the leadership in the same lock hold
that ran its fencing check and skips what a round of many needs (a queue item in the queue,
a ``Round``, the records built from its fields, wake-ups, futures): its offsets are framed
straight from the fields the router checked and, once durable, applied from them
(``OffsetTable.apply_commit_calls``).

``commit_lone`` (native/src/lone.rs) takes every ``commit_sync`` call with offsets to write
(the usual call from the router's native entry, ``CommitRouter.commit_sync``; any other from
``OffsetStore._commit_sync_other``): the decision (lone, or queued and awaited through
``GroupCommitter``), the
framing, the write (``_native.append_durable``: one ``pwritev2(RWF_DSYNC)`` with the GIL
released) and the apply, on the same Python objects the protocol keeps (the partition's lock
and flags, its log and table): about 8% fewer instructions per commit than the same steps in
Python (docs/DESIGN.md, "Python and Rust"). What is here is its failure path, ``failed``, and
the hook it frames with (``frame_fields``, which tests replace to inject a failure).

The guarantees are the protocol's, for the same reasons:

* the committer holds the partition's leadership (``leader_active``) from the lock hold that
  found it idle until its offsets are applied: no other round is written or applied meanwhile,
  and whatever queues behind it is handed on when it ends (``GroupCommitter.hand_on``), as a
  round's end hands it on;
* the table changes only after the write (and, under ``fsync="always"``, its sync) returned,
  under the partition lock, as a round's apply does;
* a failed write or apply poisons the store and fails the call: nothing later is written.

A ``commit_sync`` (without a timeout, not a transaction's) that finds a lone commit
writing, with nothing queued, *follows* it: it writes its batch right behind the lone
commit's, at the same time, and takes the leadership over once that commit is applied
(native/src/follow.rs has why and how the guarantees hold).
"""

from __future__ import annotations

from typing import Any, NoReturn

from offsetlog.errors import StoreFailedError
from offsetlog.log._native import commit_lone
from offsetlog.log.framing import frame_fields
from offsetlog.store.commit_queue import PartitionWriter

__all__ = ["commit_lone", "failed", "frame_fields"]


def failed(writer: Any, part: PartitionWriter, error: BaseException, what: str,
           handed: bool = False) -> NoReturn:
    """A lone commit's frame, write or apply raised ``error``: poison the store (the next
    commit would be given offsets the log may already hold), give ``part``'s leadership up
    unless it is ``handed`` to a follower (which the caller then tells of the failure: see
    native/src/follow.rs), hand on what queued meanwhile, and raise (``StoreFailedError``, or
    ``error`` itself for a ``KeyboardInterrupt`` and the like, or for the ``StoreFailedError``
    of a follower whose predecessor failed: the store is poisoned all the same)."""
    with part.lock:
        try:
            writer.poison(error)
        finally:
            if not handed:
                part.leader_active = False
                if part.queue or part.idle_waiters:  # (hand_on has nothing to do otherwise)
                    writer.hand_on(part)
    if not isinstance(error, Exception) or isinstance(error, StoreFailedError):
        raise error
    raise StoreFailedError(f"{what} log partition {part.index} failed: {error!r}",
                           cause=error)
