"""The store's side of transactional offset commits: ``init_transactions``, the writes behind
a ``Transaction`` handle, roll-forward on open and the timeout timer.

Every durable step is a record through the ordinary write path (``GroupCommitter``):
TRANSACTION_STATE records on the transactional id's log partition, transactional
OFFSET_COMMIT batches on each group's partition, and one marker (a control batch) per touched
partition. The order of those writes is what makes a crash at any point recoverable; see
docs/TRANSACTIONS.md, "Writes and crashes".

All calls for one transactional id run under that id's lock (taken before any partition lock),
so a fenced handle cannot slip a write in after the epoch bump that fenced it.
"""

from __future__ import annotations

import logging
import threading
from typing import TYPE_CHECKING, Callable

from offsetlog.store import background

from offsetlog.log import records as rec
from offsetlog.errors import InvalidTxnStateError
from offsetlog.validation import check_encodable, check_time_ms
from offsetlog.log.format import Attribute
from offsetlog.partitioner import partition_for
from offsetlog.txn.state import (COMPLETE_ABORT, COMPLETE_COMMIT, EMPTY, MAX_EPOCH, ONGOING,
                                 PREPARE_ABORT, PREPARE_COMMIT, PREPARED, TxnMetadata, next_epoch)
from offsetlog.store.transaction import Transaction

if TYPE_CHECKING:  # pragma: no cover
    from offsetlog.store.group_commit import GroupCommitter, PartitionWriter

log = logging.getLogger("offsetlog.store.transaction")

MARKER_ATTRIBUTES = Attribute.TRANSACTIONAL | Attribute.CONTROL


class TransactionRequests:
    """Mixin for ``OffsetStore``: transactions (KIP-98, KIP-447 fencing, KIP-939 prepare)."""

    _writer: "GroupCommitter"
    _parts: list["PartitionWriter"]
    _clock: Callable[[], int]
    _partitions: int

    #: tests set this to a callable(step, meta) to crash between the writes of a completion
    #: ("decided", "marker", "completed")
    _txn_fault_hook = None

    def _init_transactions(self) -> None:
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
        self._roll_forward()
        self._txn_timer_stop = threading.Event()
        self._txn_timer = None
        if self.config.transaction_check_interval_ms:
            self._txn_timer = background.start("offsetlog-txn-timer", lambda: background.every(
                self._txn_timer_stop, self.config.transaction_check_interval_ms / 1000.0,
                self.poll_transactions, f"{self.path}: transaction timeout pass", log))

    def _stop_transactions(self) -> None:
        """On close, before the final drain: stop the timer, write owed Complete records."""
        self._txn_timer_stop.set()
        if self._txn_timer is not None and self._txn_timer is not threading.current_thread():
            self._txn_timer.join()
        try:
            self._txn_flush_owed()
        except Exception as e:  # a failed store: reopen completes them (roll-forward)
            log.warning("%s: could not write completed transaction states: %r", self.path, e)

    def _txn_flush_owed(self) -> None:
        for tid in list(self._txn_owed):
            with self._txn_lock(tid):
                meta = self._txn_owed.get(tid)
                if meta is not None:
                    self._txn_write_state(meta)

    # -- public ----------------------------------------------------------------------------

    def init_transactions(self, transactional_id: str, *, keep_prepared: bool = False,
                          transaction_timeout_ms: int | None = None) -> Transaction:
        """Start (or take over) the transactional producer ``transactional_id``.

        Each call bumps the id's epoch, which fences every older handle (their later calls
        raise ``ProducerFencedError``). A transaction an older handle left open is aborted;
        with ``keep_prepared=True`` a *prepared* one is kept instead and the returned handle
        is in it (``txn.prepared``), to be finished with ``commit()`` or ``abort()``.

        :param transaction_timeout_ms: how long a transaction may stay open (not prepared)
            before the store aborts it; default the store's ``transaction_timeout_ms``
        :return: the handle, with ``producer_id`` and ``producer_epoch``
        """
        self._check_open()
        if not isinstance(transactional_id, str) or not transactional_id:
            raise InvalidTxnStateError(
                f"transactional_id must be a non-empty str, not {transactional_id!r}")
        check_encodable("transactional_id", transactional_id, InvalidTxnStateError)
        timeout = (self.config.transaction_timeout_ms if transaction_timeout_ms is None
                   else transaction_timeout_ms)
        if not isinstance(timeout, int) or isinstance(timeout, bool) or timeout < 1:
            raise InvalidTxnStateError(f"transaction_timeout_ms must be an int >= 1, "
                                       f"not {timeout!r}")
        with self._txn_lock(transactional_id):
            meta = self._txn_meta(transactional_id)
            now = self._clock()
            if meta is not None and meta.decided:
                meta = self._txn_complete(meta, meta.state == PREPARE_COMMIT)
            bumped = False
            if meta is not None and (meta.state == ONGOING
                                     or (meta.state == PREPARED and not keep_prepared)):
                # Kafka's fencing abort: the abort is written with the bumped epoch, so the
                # old epoch is dead from the decision on; the new handle keeps that epoch.
                bumped = meta.producer_epoch < MAX_EPOCH
                meta = self._txn_complete(meta, False,
                                          producer_epoch=meta.producer_epoch + bumped)
            if meta is not None and meta.state == PREPARED:
                if meta.producer_epoch >= MAX_EPOCH:
                    raise InvalidTxnStateError(
                        f"transactional id {transactional_id!r}: epoch exhausted while a "
                        "transaction is prepared; finish it with keep_prepared=False")
                meta = meta.to(PREPARED, now_ms=now, producer_epoch=meta.producer_epoch + 1,
                               timeout_ms=timeout)
                self._txn_write_state(meta, force_sync=True)
            else:
                if bumped:
                    pid, epoch = meta.producer_id, meta.producer_epoch
                else:
                    pid, epoch = next_epoch(meta, self._allocate_producer_id)
                meta = TxnMetadata(transactional_id, pid, epoch, EMPTY, timeout, now)
                self._txn_write_state(meta)
            return Transaction(self, meta)

    def poll_transactions(self, now_ms: int | None = None) -> int:
        """Abort every open transaction older than its timeout (prepared ones are never timed
        out: their outcome belongs to whoever prepared them, KIP-939). The timer thread runs
        this every ``transaction_check_interval_ms``; tests call it with a manual clock.

        :return: how many transactions were aborted
        """
        self._check_open()
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
            lock = self._txn_lock(tid)
            if not lock.acquire(blocking=False):
                continue  # its handle is busy with it; the next pass looks again
            try:
                meta = self._txn_meta(tid)
                if meta is not None and meta.timed_out(now):
                    log.warning("%s: aborting transaction of %r: open for more than %d ms",
                                self.path, tid, meta.timeout_ms)
                    self._txn_complete(meta, False)
                    aborted += 1
            finally:
                lock.release()
        self._txn_flush_owed()
        return aborted

    def transaction_state(self, transactional_id: str) -> TxnMetadata | None:
        """The durable metadata of ``transactional_id`` (state, producer id and epoch, the
        log partitions its open transaction touched), or None for an unknown id."""
        self._check_open()
        return self._txn_meta(transactional_id)

    # -- the steps (called with the id's lock held) ----------------------------------------

    def _txn_lock(self, transactional_id: str) -> threading.RLock:
        with self._txn_locks_lock:
            lock = self._txn_locks.get(transactional_id)
            if lock is None:
                lock = self._txn_locks[transactional_id] = threading.RLock()
            return lock

    def _allocate_producer_id(self) -> int:
        with self._txn_locks_lock:
            pid = self._next_pid
            self._next_pid += 1
            return pid

    def _txn_part(self, transactional_id: str) -> "PartitionWriter":
        return self._parts[partition_for(transactional_id, self._partitions)]

    def _txn_meta(self, transactional_id: str) -> TxnMetadata | None:
        owed = self._txn_owed.get(transactional_id)
        if owed is not None:
            return owed  # newer than the table's (decided) state
        part = self._txn_part(transactional_id)
        with part.lock:
            value = part.table.txn.states.get(transactional_id)
        return None if value is None else TxnMetadata.from_value(transactional_id, value)

    def _txn_write_state(self, meta: TxnMetadata, *, force_sync: bool = False) -> None:
        """Write ``meta`` (after the id's owed Complete record, in the same batch)."""
        from offsetlog.store.commit_queue import Pending

        tid = meta.transactional_id
        values = [meta.to_value()]
        owed = self._txn_owed.get(tid)
        if owed is not None and owed is not meta:
            values.insert(0, owed.to_value())
        records = tuple(rec.transaction_state(i, tid, v) for i, v in enumerate(values))
        self._writer.submit_sync(self._txn_part(tid),
                                 Pending(records, meta.update_timestamp,
                                         force_sync=force_sync), None)
        self._txn_owed.pop(tid, None)

    def _txn_sync_partitions(self, partitions) -> None:
        """Make everything written to ``partitions`` durable, whatever the fsync policy."""
        from offsetlog.store.commit_queue import Pending

        if self.config.fsync == "always":
            return  # every write was synced before it was acknowledged
        now = self._clock()
        for p in partitions:
            self._writer.submit_sync(self._parts[p], Pending(None, now, force_sync=True), None)

    def _txn_complete(self, meta: TxnMetadata, commit: bool, **changes) -> TxnMetadata:
        """Finish ``meta``'s transaction: the decision (PrepareCommit / PrepareAbort), one
        marker per touched partition, then CompleteCommit / CompleteAbort. From a decided
        state (a crash between markers) it only writes what is missing; a marker written twice
        finds nothing pending the second time."""
        from offsetlog.store.commit_queue import Pending

        hook = self._txn_fault_hook
        now = self._clock()
        if not meta.decided:
            meta = meta.to(PREPARE_COMMIT if commit else PREPARE_ABORT, now_ms=now, **changes)
            self._txn_write_state(meta)
        if hook is not None:
            hook("decided", meta)
        result = rec.COMMIT if meta.state == PREPARE_COMMIT else rec.ABORT
        for p in meta.partitions:
            marker = rec.transaction_marker(0, meta.producer_id, meta.producer_epoch, result)
            self._writer.submit_sync(
                self._parts[p], Pending((marker,), now, attributes=MARKER_ATTRIBUTES,
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
                    self._txn_complete(meta, meta.state == PREPARE_COMMIT)

