"""The store's transactions part: ``init_transactions``, the writes behind a ``Transaction``
handle, roll-forward on open and the timeout timer.

Every durable step is a record through the ordinary write path (``GroupCommitter``):
TRANSACTION_STATE records on the transactional id's log partition, transactional
OFFSET_COMMIT batches on each group's partition, and one marker (a control batch) per touched
partition. The order of those writes is what makes a crash at any point recoverable; see
docs/TRANSACTIONS.md, "Writes and crashes".

All calls for one transactional id run under that id's lock (taken before any partition lock),
so a fenced handle cannot slip a write in after the epoch bump that fenced it.

``Transaction``, the handle users hold, is ``offsetlog.store.txn_handle`` (imported here, so
``offsetlog.store.transactions.Transaction`` names it as before).
"""

from __future__ import annotations

import logging
import threading
from typing import Callable, Iterable

from offsetlog.errors import InvalidTxnStateError
from offsetlog.log import records as rec
from offsetlog.log.format import Attribute
from offsetlog.partitioner import partition_for
from offsetlog.store import background
from offsetlog.store.commit_queue import PartitionWriter, QueueItem
from offsetlog.store.part import StoreCore, StorePart
from offsetlog.store.txn_handle import Transaction
from offsetlog.txn.state import (
    COMPLETE_ABORT,
    COMPLETE_COMMIT,
    EMPTY,
    MAX_EPOCH,
    ONGOING,
    PREPARE_ABORT,
    PREPARE_COMMIT,
    PREPARED,
    TxnMetadata,
    is_retry_of_last_bump,
    next_epoch,
)
from offsetlog.validation import check_encodable, check_time_ms

#: the store's commit check: (group, offsets, generation, member, instance, transactional=)
#: -> (its PartitionWriter, its queue item or None, the fencing check to run under its lock)
PrepareCommit = Callable[..., tuple]

log = logging.getLogger("offsetlog.transactions")

MARKER_ATTRIBUTES = Attribute.TRANSACTIONAL | Attribute.CONTROL


def completion_marker(meta: TxnMetadata) -> rec.Record:
    """The marker that finishes ``meta``'s decided transaction (PrepareCommit / PrepareAbort)
    in each log partition it touched, in a batch of ``MARKER_ATTRIBUTES``."""
    result = rec.COMMIT if meta.state == PREPARE_COMMIT else rec.ABORT
    return rec.transaction_marker(0, meta.producer_id, meta.producer_epoch, result)


class Transactions(StorePart):
    """The store's part for transactions (KIP-98, KIP-447 fencing, KIP-939 prepare). It owns
    the per-id locks, the Complete records it owes and the producer id counter; it writes
    only through the store's ``GroupCommitter``, and ``Transaction`` handles talk to it through
    its public methods. ``start()`` rolls forward and starts the timer; ``stop()`` on close.
    """

    #: tests set this to a callable(step, meta) to crash between the writes of a completion
    #: ("decided", "marker", "completed")
    fault_hook = None

    def __init__(self, core: StoreCore, prepare_commit: PrepareCommit, board) -> None:
        """:param board: the store's ``_native.TxnBoard``: the open transactions whose plain
            offsets the wire's request loop writes without a Python call. A handle publishes
            its producer there once a log partition is durably in its Ongoing transaction
            (``Transaction._join``); ``write_state`` clears the id before anything of it
            changes, so the board only ever holds what this part stated since."""
        super().__init__(core)
        #: the store's checks (closed store) and commit preparation, for the handles
        self.check_open = core.check_open
        self.prepare_commit = prepare_commit
        self.board = board
        self._txn_locks: dict[str, threading.RLock] = {}
        self._txn_locks_lock = threading.Lock()
        #: transactional id -> its CompleteCommit / CompleteAbort not yet written: it goes in
        #: the same batch as the id's next state record (or at the next timer pass, or close),
        #: which saves a synchronous write per transaction. Losing it in a crash is harmless:
        #: the log then says PrepareCommit / PrepareAbort and reopen writes the markers again
        #: (they find nothing pending) and the Complete record.
        self._txn_owed: dict[str, TxnMetadata] = {}
        # Producer ids are never reused: every id ever handed out is in a TRANSACTION_STATE
        # record or a batch header, and the tables remember the highest.
        self._next_pid = max((p.table.txn.max_producer_id for p in self._parts), default=-1) + 1
        self._txn_timer_stop = threading.Event()
        self.timer: threading.Thread | None = None

    def start(self) -> None:
        """Roll forward what a crash left decided, then start the timeout timer."""
        self._roll_forward()
        if self.config.transaction_check_interval_ms:
            self.timer = background.start("offsetlog-txn-timer", lambda: background.every(
                self._txn_timer_stop, self.config.transaction_check_interval_ms / 1000.0,
                self.poll, f"{self.path}: transaction timeout pass", log))

    def stop(self) -> None:
        """On close, before the final drain: stop the timer, write owed Complete records."""
        self._txn_timer_stop.set()
        if self.timer is not None and self.timer is not threading.current_thread():
            self.timer.join()
        try:
            self._flush_owed()
        except Exception as e:  # a failed store: reopen completes them (roll-forward)
            log.warning("%s: could not write completed transaction states: %r", self.path, e)

    def _flush_owed(self) -> None:
        for tid in list(self._txn_owed):
            with self.lock(tid):
                meta = self._txn_owed.get(tid)
                if meta is not None:
                    self.write_state(meta)

    # -- public ----------------------------------------------------------------------------

    def init_transactions(self, transactional_id: str, *, keep_prepared: bool = False,
                          transaction_timeout_ms: int | None = None,
                          expected_producer: tuple[int, int] | None = None) -> Transaction:
        """``OffsetStore.init_transactions``: bump the id's epoch (fencing older handles),
        abort what an older handle left open (or keep a prepared one), write the new state."""
        self.check_open()
        if expected_producer is not None:
            expected_producer = _producer_id_and_epoch(expected_producer)
        if not isinstance(transactional_id, str) or not transactional_id:
            raise InvalidTxnStateError(
                f"transactional_id must be a non-empty str, not {transactional_id!r}")
        check_encodable("transactional_id", transactional_id, InvalidTxnStateError)
        timeout = (self.config.transaction_timeout_ms if transaction_timeout_ms is None
                   else transaction_timeout_ms)
        if not isinstance(timeout, int) or isinstance(timeout, bool) or timeout < 1:
            raise InvalidTxnStateError(f"transaction_timeout_ms must be an int >= 1, "
                                       f"not {timeout!r}")
        with self.lock(transactional_id):
            meta = self.meta(transactional_id)
            now = self._clock()
            if meta is not None and meta.decided:
                meta = self.complete(meta, meta.state == PREPARE_COMMIT)
            if expected_producer is not None and is_retry_of_last_bump(meta,
                                                                       *expected_producer):
                return Transaction(self, meta)  # the answer to that bump was lost: again
            bumped = False
            if meta is not None and (meta.state == ONGOING
                                     or (meta.state == PREPARED and not keep_prepared)):
                # Kafka's fencing abort: the abort is written with the bumped epoch, so the
                # old epoch is dead from the decision on; the new handle keeps that epoch.
                bumped = meta.producer_epoch < MAX_EPOCH
                meta = self.complete(meta, False, producer_epoch=meta.producer_epoch + bumped,
                                     last_producer_epoch=-1)
            if meta is not None and meta.state == PREPARED:
                if meta.producer_epoch >= MAX_EPOCH:
                    raise InvalidTxnStateError(
                        f"transactional id {transactional_id!r}: epoch exhausted while a "
                        "transaction is prepared; finish it with keep_prepared=False")
                meta = meta.to(PREPARED, now_ms=now, producer_epoch=meta.producer_epoch + 1,
                               timeout_ms=timeout)
                self.write_state(meta, force_sync=True)
            else:
                last_epoch, last_pid = -1, (-1 if meta is None else meta.last_producer_id)
                if bumped:
                    pid, epoch = meta.producer_id, meta.producer_epoch
                else:
                    pid, epoch = next_epoch(meta, self.allocate_producer_id)
                    if meta is not None:
                        if expected_producer is not None:  # KIP-360: a retry may come
                            last_epoch = meta.producer_epoch
                        if pid != meta.producer_id:
                            last_pid = meta.producer_id
                meta = TxnMetadata(transactional_id, pid, epoch, EMPTY, timeout, now,
                                   last_producer_epoch=last_epoch, last_producer_id=last_pid)
                self.write_state(meta)
            return Transaction(self, meta)

    def poll(self, now_ms: int | None = None) -> int:
        """Abort every open transaction older than its timeout (prepared ones are never timed
        out: their outcome belongs to whoever prepared them, KIP-939). The timer thread runs
        this every ``transaction_check_interval_ms``; tests call it with a manual clock.

        :return: how many transactions were aborted
        """
        self.check_open()
        now = self._clock() if now_ms is None else check_time_ms(now_ms)
        due = []
        for part in self._parts:
            with part.lock:
                states = list(part.table.txn.states.items())
            for tid, value in states:
                if TxnMetadata.from_value(tid, value).timed_out(now):
                    due.append(tid)
        aborted = 0
        for tid in due:
            lock = self.lock(tid)
            if not lock.acquire(blocking=False):
                continue  # its handle is busy with it; the next pass looks again
            try:
                meta = self.meta(tid)
                if meta is not None and meta.timed_out(now):
                    log.warning("%s: aborting transaction of %r: open for more than %d ms",
                                self.path, tid, meta.timeout_ms)
                    fence = (self.config.fence_on_transaction_timeout
                             and meta.producer_epoch < MAX_EPOCH)
                    # Kafka's coordinator writes this abort with the epoch bumped: the fence
                    # is then as durable as the abort
                    self.complete(meta, False, **(
                        {"producer_epoch": meta.producer_epoch + 1, "last_producer_epoch": -1}
                        if fence else {}))
                    aborted += 1
            finally:
                lock.release()
        self._flush_owed()
        return aborted

    def resume(self, transactional_id: str) -> Transaction | None:
        """A handle for the producer ``transactional_id``'s durable state names, as it stands
        (no epoch bump, unlike ``init_transactions``; in its Ongoing transaction if it has
        one), or None for an unknown id: how the wire server takes its producers up after a
        restart, as Kafka's coordinator does after a failover."""
        self.check_open()
        meta = self.meta(transactional_id)
        return None if meta is None else Transaction(self, meta)

    def states(self) -> list[TxnMetadata]:
        """Every known id's metadata, sorted by id (as ``state`` gives each)."""
        self.check_open()
        values: dict[str, dict] = {}
        for part in self._parts:
            with part.lock:
                values.update(part.table.txn.states)
        metas = {tid: TxnMetadata.from_value(tid, v) for tid, v in values.items()}
        metas.update(self._txn_owed)  # newer than the table's (decided) states
        return [metas[tid] for tid in sorted(metas)]

    def state(self, transactional_id: str) -> TxnMetadata | None:
        """The durable metadata of ``transactional_id`` (state, producer id and epoch, the
        log partitions its open transaction touched), or None for an unknown id."""
        self.check_open()
        return self.meta(transactional_id)

    # -- the steps, for this part and its handles (called with the id's lock held) -------

    def lock(self, transactional_id: str) -> threading.RLock:
        with self._txn_locks_lock:
            lock = self._txn_locks.get(transactional_id)
            if lock is None:
                lock = self._txn_locks[transactional_id] = threading.RLock()
            return lock

    def allocate_producer_id(self) -> int:
        with self._txn_locks_lock:
            pid = self._next_pid
            self._next_pid += 1
            return pid

    def part_of(self, name: str) -> PartitionWriter:
        """The log partition of a transactional id or a group (the same placement)."""
        return self._parts[partition_for(name, len(self._parts))]

    def meta(self, transactional_id: str) -> TxnMetadata | None:
        owed = self._txn_owed.get(transactional_id)
        if owed is not None:
            return owed  # newer than the table's (decided) state
        part = self.part_of(transactional_id)
        with part.lock:
            value = part.table.txn.states.get(transactional_id)
        return None if value is None else TxnMetadata.from_value(transactional_id, value)

    def write_state(self, meta: TxnMetadata, *, force_sync: bool = False) -> None:
        """Write ``meta`` (after the id's owed Complete record, in the same batch)."""
        tid = meta.transactional_id
        # (before the record is queued: a commit the board passes is then placed in the log
        # before any marker of this change; the handle publishes again once Ongoing is durable)
        self.board.clear(tid)
        values = [meta.to_value()]
        owed = self._txn_owed.get(tid)
        if owed is not None and owed is not meta:
            values.insert(0, owed.to_value())
        records = tuple(rec.transaction_state(i, tid, v) for i, v in enumerate(values))
        self._writer.submit_sync(self.part_of(tid),
                                 QueueItem(records, meta.update_timestamp,
                                         force_sync=force_sync), None)
        self._txn_owed.pop(tid, None)

    def sync_partitions(self, partitions) -> None:
        """Make everything written to ``partitions`` durable, whatever the fsync policy."""
        if self.config.fsync == "always":
            return  # every write was synced before it was acknowledged
        now = self._clock()
        for p in partitions:
            self._writer.submit_sync(self._parts[p], QueueItem(None, now, force_sync=True), None)

    def complete(self, meta: TxnMetadata, commit: bool, **changes) -> TxnMetadata:
        """Finish ``meta``'s transaction: the decision (PrepareCommit / PrepareAbort), one
        marker per touched partition, then CompleteCommit / CompleteAbort. From a decided
        state (a crash between markers) it only writes what is missing; a marker written twice
        finds nothing pending the second time."""
        hook = self.fault_hook
        now = self._clock()
        if not meta.decided:
            meta = meta.to(PREPARE_COMMIT if commit else PREPARE_ABORT, now_ms=now, **changes)
            self.write_state(meta)
        if hook is not None:
            hook("decided", meta)
        marker = completion_marker(meta)
        for p in meta.partitions:
            self._writer.submit_sync(
                self._parts[p], QueueItem((marker,), now, attributes=MARKER_ATTRIBUTES,
                                        producer_id=meta.producer_id,
                                        producer_epoch=meta.producer_epoch), None)
            if hook is not None:
                hook("marker", meta)
        meta = meta.to(COMPLETE_COMMIT if meta.state == PREPARE_COMMIT else COMPLETE_ABORT,
                       now_ms=now)
        self._txn_owed[meta.transactional_id] = meta  # written with the next state record
        if hook is not None:
            hook("completed", meta)
        return meta

    def _roll_forward(self) -> None:
        """On open: finish every transaction whose outcome was decided but whose markers may
        not all have been written (Kafka's coordinator does the same when it loads)."""
        for part in self._parts:
            for tid, value in sorted(part.table.txn.states.items()):
                meta = TxnMetadata.from_value(tid, value)
                if meta.decided:
                    log.info("%s: completing %s of transactional id %r", self.path,
                             meta.state, tid)
                    self.complete(meta, meta.state == PREPARE_COMMIT)

    # -- for the handles ---------------------------------------------------------------------

    def now(self) -> int:
        return self._clock()

    def write(self, part: PartitionWriter, item: QueueItem, precheck: Callable[[], None]) -> None:
        """Write a transaction's offsets (``item``, marked transactional) to ``part``."""
        self._writer.submit_sync(part, item, None, precheck)

    def held_offsets(self, producer_id: int, partitions: Iterable[int]) -> list[dict]:
        """Per log partition in ``partitions``: group -> the entries ``producer_id`` holds
        pending there."""
        out = []
        for p in partitions:
            part = self._parts[p]
            with part.lock:
                out.append(part.table.txn.offsets_of(producer_id))
        return out


def _producer_id_and_epoch(value) -> tuple[int, int]:
    try:
        producer_id, producer_epoch = value
    except (TypeError, ValueError):
        producer_id = producer_epoch = None
    if not all(isinstance(v, int) and not isinstance(v, bool)
               for v in (producer_id, producer_epoch)) or producer_id < 0 or not (
                0 <= producer_epoch <= MAX_EPOCH):
        raise InvalidTxnStateError(f"expected_producer must be (producer_id >= 0, epoch in "
                                   f"0..{MAX_EPOCH}), not {value!r}")
    return producer_id, producer_epoch
