"""What a log partition's group-commit queue holds, and how a round of it becomes batches
(``offsetlog.store.group_commit`` runs the protocol).

``QueueItem`` is one queued batch or deferred operation and its outcome; ``Commit`` is one
``commit_sync`` call and ``AsyncRun`` a run of back-to-back ``commit_async`` calls, both queued
as their offsets, which the leader builds into records (``frame_round``); ``PartitionWriter``
is a log partition's queue, lock, table and log; and committers sleep on the wake-up locks
made here.
"""

from __future__ import annotations

import logging
import threading
from concurrent.futures import Future, InvalidStateError
from typing import Any, Callable

from offsetlog.log import _native
from offsetlog.log.framing import encode_payload, frame_fields, frame_payload
from offsetlog.log.partition_log import PartitionLog, write_durable
from offsetlog.log.records import records_from_fields
from offsetlog.store.futures import running_future
from offsetlog.table import OffsetTable

#: the group committer's logger: a round's end is part of its protocol
log = logging.getLogger("offsetlog.store.group_commit")

_new_waiter_lock = threading.Lock
_thread_waiters = threading.local()


def chained_waiter():
    """The calling thread's wake-up lock for chained waits, kept locked between uses: a
    chained sleep ends only by its one release, after which the lock is held again."""
    try:
        return _thread_waiters.lock
    except AttributeError:
        lock = _thread_waiters.lock = new_waiter()
        return lock


def new_waiter():
    lock = _new_waiter_lock()
    lock.acquire()
    return lock


#: producer(table) -> records to append (may be empty), computed by the leader
Deferred = Callable[[OffsetTable], tuple]


class QueueItem:
    """One queued batch (or deferred operation) and its outcome.

    Fields most items never change are class-level defaults: a commit sets three fields on
    creation, not seventeen (it is made once per commit call, on the hot path).
    """

    #: batch header fields: transactional offsets and markers (docs/TRANSACTIONS.md)
    attributes = 0
    producer_id = -1
    producer_epoch = -1
    #: computes the records at the head of the queue (see ``offsetlog.store.group_commit``)
    deferred: Deferred | None = None
    force_sync = False
    future: Future | None = None
    #: ``(callback, arg)`` pairs to run with the outcome, on the callback thread
    callbacks: list | None = None
    #: a commit call's offsets as flat triples (``records.offset_commit_fields``), built
    #: into records by the leader (``Commit``, ``AsyncRun``); None: ``records`` says
    fields = None
    #: the records to write (None for commit calls until the leader builds them, or for a
    #: deferred item until it is computed)
    records: tuple | None = None
    done = False
    error: BaseException | None = None
    base_offset = -1
    result: Any = None
    #: called with the item once it is durable or failed, by the thread that led it
    on_done: Callable[["QueueItem"], None] | None = None
    #: a synchronous committer's wake-up: a lock held until its batch is done
    waiter: Any = None
    #: the committer's waiter is woken by the one before it in its round (see complete)
    chained = False
    #: the waiter this committer wakes as soon as it is woken itself
    chain: Any = None

    def __init__(self, records: tuple | None, timestamp: int, *, deferred: Deferred | None = None,
                 force_sync: bool = False, attributes: int = 0, producer_id: int = -1,
                 producer_epoch: int = -1) -> None:
        self.records = records
        self.payload = payload = encode_payload(records) if records else b""
        self.nbytes = len(payload)
        self.timestamp = timestamp
        if deferred is not None:
            self.deferred = deferred
        if force_sync:
            self.force_sync = True
        if attributes:
            self.attributes = attributes
        if producer_id != -1 or producer_epoch != -1:
            self.producer_id = producer_id
            self.producer_epoch = producer_epoch


class Commit(QueueItem):
    """One ``commit_sync`` call (or a transaction's offsets), queued as its offsets: the
    leader builds their records, and frames back-to-back calls as one batch
    (``frame_round``): building and encoding records in each committer's thread, while the
    others wait for the GIL, bounds the rate more than the leader doing it once per round."""

    def __init__(self, fields, nbytes: int, timestamp: int) -> None:
        self.fields = fields
        self.nbytes = nbytes  # an upper bound of the encoded records
        self.timestamp = timestamp


class AsyncRun(_native.RunState, QueueItem):
    """Back-to-back ``commit_async`` calls, coalesced into one queue item with one future,
    framed in one batch (with the other commit calls of their round: ``Commit``).

    Kafka's coordinator runtime appends the records of many writes to its current batch until
    it is full or another kind of write comes; so does this. Every call lands whole in one
    batch (still all-or-nothing), and the calls of a run are durable, or fail, together, which
    is what their shared future reports. A batch per call would cost a header, two CRCs and
    a queue item per offset, more than the commit itself.

    ``fields``, ``nbytes``, ``timestamp`` and ``future`` live in the native base
    (``_native.RunState``), where ``commit_async``'s call joins the run without the
    interpreter.
    """

    def __init__(self) -> None:
        #: the calls' offsets as flat triples (records.offset_commit_fields), made records
        #: only when the leader frames the round: until then nothing in it is a container the
        #: cyclic collector walks or counts
        self.fields = []
        self.nbytes = 0  # an upper bound of the payload, for max_group_commit_bytes
        self.timestamp = 0  # each call that joins sets its own: the batch carries the latest
        self.future = running_future()

    def add_callback(self, callback, arg) -> None:
        if self.callbacks is None:
            self.callbacks = [(callback, arg)]
        else:
            self.callbacks.append((callback, arg))


class PartitionWriter(_native.PartitionState):
    """The queue, table and log of one log partition.

    ``lock`` (a ``PartLock``: ``threading.Lock``'s interface), ``queue`` (a deque of
    ``QueueItem``), ``log``, ``table`` and the protocol's flags live in the native base
    class (``_native.PartitionState``), where the lone commit (``lone_commit``) reads and
    sets them in its lock hold without the interpreter; they are plain attributes here:
    ``leader_active`` (a leader is writing or applying: no one else may),
    ``async_scheduled`` (handed to the async thread and not yet found empty by it: no need
    to wake it again), ``exclusive_waiting`` (callers waiting in ``exclusive``: no new round
    starts while there are any, or a steady stream of commits would pass leadership from
    round to round forever) and ``idle_waiters`` (threads in ``cond.wait()``, drain and
    exclusive: a round end notifies only if any), ``open_run`` (the ``AsyncRun`` that
    ``commit_async`` calls join while it is the last queued item; see
    ``async_commit.submit_async``) and ``async_calls`` (``commit_async`` calls ever queued
    here: when to step aside). All are read and set under ``lock``.
    """

    __slots__ = ("index", "cond", "coordinator", "consumer_coordinator")

    def __init__(self, index: int, log: PartitionLog, table: OffsetTable) -> None:
        self.index = index
        self.log = log
        self.table = table
        self.cond = threading.Condition(self.lock)
        #: the partition's group coordinator; the store sets it, and calls it under ``lock``
        self.coordinator = None
        #: its consumer-protocol (KIP-848) coordinator, likewise (store/consumer_groups.py)
        self.consumer_coordinator = None

    def nothing_pending(self) -> bool:
        """(``lock`` held) Nothing queued, no round being written or applied, the async writer
        not scheduled: a call that returns no records is answered at once
        (``GroupCommitter.submit_computed``)."""
        return not (self.queue or self.leader_active or self.async_scheduled)

    def wait_idle(self, timeout: float | None = None) -> None:
        """``cond.wait(timeout)``, counted (``lock`` held)."""
        self.idle_waiters += 1
        try:
            self.cond.wait(timeout)
        finally:
            self.idle_waiters -= 1


def complete(group: list[QueueItem], callback_runner) -> None:
    """Wake the committers, resolve the futures and queue the callbacks (on
    ``callback_runner``, the store's ``CallbackRunner``) of a finished round, outside any
    lock, in the thread that led it. Committers first: a future's done-callback may block, and
    must not hold up a committer it could be waiting for."""
    first = last = None
    for item in group:
        waiter = item.waiter
        if waiter is not None:
            item.waiter = None
            if item.chained:
                if last is None:
                    first = waiter
                else:
                    last.chain = waiter
                last = item
            else:
                waiter.release()
    if first is not None:
        # Wake the round's chained committers one after another, each by the one before
        # it, rather than all at once: woken together they fight for the GIL, and most go
        # back to sleep on it at once, costing context switches per commit. Links are all
        # made before the first wake; a chained committer sleeps with no deadline, outside
        # the main thread (no signal can interrupt it), so it always wakes and passes it on.
        first.release()
    callbacks = []
    for item in group:
        if item.on_done is not None:
            item.on_done(item)
        fut = item.future
        if fut is not None:  # a run's (each run has its own)
            try:
                if item.error is None:
                    fut.set_result(item.result)
                else:
                    fut.set_exception(item.error)
            except InvalidStateError:
                # Someone else's code resolved it (set_result on a future it was given);
                # the rest of the round must still be answered.
                log.warning("a commit future was resolved by someone else: %r", fut)
        if item.callbacks is not None:
            error = item.error
            callbacks += [(callback, arg, error) for callback, arg in item.callbacks]
    if callbacks:
        callback_runner.run(callbacks)


# -- a round as batches ----------------------------------------------------------------------

class Round:
    """One round of a partition, from ``GroupCommitter.take_round`` to ``end_round``.

    Fields a round rarely changes are class-level defaults (as ``QueueItem``'s): one is made
    per round, and a round is one commit when committers are alone in their partitions."""

    done = False  #: nothing to write: the items already have their outcome
    sync = False  #: the write must be durable before the round ends
    base = -1  #: the log's next offset after the round
    batches: list | tuple = ()  #: what the table applies once written (set by round_bytes)
    error: BaseException | None = None

    def __init__(self, group: list[QueueItem]) -> None:
        self.group = group


def round_bytes(rnd: Round):
    """The round's bytes (framed outside the partition lock), or None if framing failed
    (kept as the round's error: nothing is written)."""
    try:
        frames, rnd.batches = frame_round(rnd.group)
        return b"".join(frames) if len(frames) > 1 else frames[0] if frames else b""
    except Exception as e:  # a bug while framing
        rnd.error = e
        return None


def write_round(part: PartitionWriter, rnd: Round, data) -> None:
    """Write a framed round, and sync it if the round needs that (outside the lock; by its
    leader, or a write-pool thread for it). A failure is kept as the round's error."""
    if data is None:
        return
    try:
        if rnd.sync:
            write_durable(part.log, data, rnd.base)  # one pwritev(RWF_DSYNC) if it can
        elif data:
            part.log.append(data, rnd.base)
    except Exception as e:  # OSError: the log's state is unknown
        rnd.error = e


def frame_round(group: list[QueueItem]) -> tuple[list[bytes], list[tuple]]:
    """The batches of a round (offsets given): their bytes, and what the table applies
    once they are durable.

    Back-to-back commit calls (``commit_sync`` calls and ``commit_async`` runs, not
    transactional) share one batch: every call still lands whole in one batch, all or
    nothing, and a round of them costs one header and two CRCs, not one per call. Their
    records are built here, by the leader, from the offsets each call queued.
    """
    frames: list[bytes] = []
    batches: list[tuple] = []
    plain = None  # the fields of the commit calls since the last batch of another kind
    for item in group:
        fields = item.fields
        if fields is not None:
            item.fields = None
            if not item.attributes:
                if plain is None:
                    plain, base, timestamp = [fields], item.base_offset, item.timestamp
                else:
                    plain.append(fields)
                    if item.timestamp > timestamp:
                        timestamp = item.timestamp
                continue
            records = records_from_fields(fields)  # a transaction's offsets: alone
            payload = encode_payload(records)
        else:
            records = item.records
            payload = item.payload
        if plain is not None:
            _frame_commits(plain, base, timestamp, frames, batches)
            plain = None
        if records:
            attributes, producer_id, producer_epoch = (item.attributes, item.producer_id,
                                                       item.producer_epoch)
            frames.append(frame_payload(item.base_offset, payload, len(records),
                                        records[-1][0], item.timestamp, attributes,
                                        producer_id, producer_epoch))
            batches.append((item.base_offset, records, attributes, producer_id,
                            producer_epoch))
    if plain is not None:
        _frame_commits(plain, base, timestamp, frames, batches)
    return frames, batches


def _frame_commits(plain: list, base: int, timestamp: int, frames: list, batches: list) -> None:
    """One batch of the offsets of consecutive commit calls (``frame_round``), framed and
    later applied straight from their fields (``OffsetTable.apply_commit_calls``)."""
    frames.append(frame_fields(base, timestamp, plain))
    batches.append((base, plain))
