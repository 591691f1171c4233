"""A commit call alone in its log partition: its own thread writes and applies it in one
pass, without the group-commit protocol's machinery.

This is ``offsetlog.store.group_commit``'s most common case: a ``commit_sync`` that finds its
partition idle (nothing queued, no leader, the async writer not scheduled, no one waiting for
exclusive use) would lead a round of one. Here it takes the leadership in the same lock hold
that ran its fencing check and skips what a round of many needs (a queue item in the queue,
a ``Round``, the records built from its fields, wake-ups, futures): its offsets are framed
straight from the fields the router checked (``framing.frame_fields``, native) and, once durable,
applied from them (``OffsetTable.apply_commit_calls``). On the disks measured that took the
Python around one commit's ``pwritev(RWF_DSYNC)`` from about 25 us to about 15 (bench/RESULTS.md).

The guarantees are the protocol's, for the same reasons:

* the committer holds the partition's leadership (``leader_active``) from the lock hold that
  found it idle until its offsets are applied: no other round is written or applied meanwhile,
  and whatever queues behind it is handed on when it ends (``GroupCommitter.hand_on``), as a
  round's end hands it on;
* the table changes only after the write (and, under ``fsync="always"``, its sync) returned,
  under the partition lock, as a round's apply does;
* a failed write or apply poisons the store and fails the call: nothing later is written.
"""

from __future__ import annotations

from typing import Any

from offsetlog.errors import StoreFailedError
from offsetlog.log.framing import frame_fields
from offsetlog.store.commit_queue import PartitionWriter


def commit_lone(writer: Any, part: PartitionWriter, fields: tuple, timestamp: int) -> None:
    """Write a commit call's ``fields`` (``CommitRouter.check``'s, stamped ``timestamp``),
    durable under ``fsync="always"``, and apply them, for ``writer`` (the store's
    ``GroupCommitter``), with ``part``'s leadership taken by the caller (``part.leader_active``
    set in the lock hold that found the partition idle and ran the call's fencing check);
    gives the leadership up.

    :raises StoreFailedError: the write or the apply failed (the store is poisoned)
    """
    log = part.log
    base = log.next_offset
    after = base + len(fields) // 3
    error: BaseException | None = None
    what = "write to"
    try:
        data = frame_fields(base, timestamp, (fields,))
        if writer.fsync_always:
            log.append_durable(data, after)  # one pwritev(RWF_DSYNC) where it can
        else:
            log.append(data, after)
    except BaseException as e:  # OSError: what is on disk is unknown; or an interrupt
        error = e
    with part.lock:
        try:
            if error is None:
                try:
                    part.table.apply_commit_calls(base, (fields,))
                except Exception as e:  # durable, but the table no longer follows the log
                    error, what = e, "applying a round of"
            if error is not None:
                # the next commit would be given offsets the log may already hold
                writer.poison(error)
        finally:
            part.leader_active = False
            if part.queue or part.idle_waiters:  # (hand_on has nothing to do otherwise)
                writer.hand_on(part)
    if error is not None:
        if not isinstance(error, Exception):
            raise error  # KeyboardInterrupt and the like: the store is poisoned all the same
        raise StoreFailedError(f"{what} log partition {part.index} failed: {error!r}",
                               cause=error)
