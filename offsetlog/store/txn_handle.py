"""The ``Transaction`` handle ``OffsetStore.init_transactions`` returns (its writes are the
store's ``Transactions`` part, ``offsetlog.store.transactions``, which it calls through its
public methods).

It is Kafka's transactional producer, for offsets only (KIP-98's ``sendOffsetsToTransaction``)::

    txn = store.init_transactions("billing-service-1")
    with txn:                                   # begin(); commit() on success, abort() on error
        txn.commit_offsets("billing", {TopicPartition("orders", 0): 42})

Two-phase commit with an external coordinator (KIP-939)::

    txn.begin()
    txn.commit_offsets("billing", offsets)
    txn.prepare()        # durable, outcome undecided, even across a crash and reopen
    ...                  # the coordinator decides
    txn.commit()         # or txn.abort()

After a crash, ``store.init_transactions(tid, keep_prepared=True)`` returns a handle that is
still in the prepared transaction (``txn.prepared``), so the service can look at its own
records and call ``commit()`` or ``abort()``.

Local states of a handle: ``ready`` -> ``begin()`` -> ``in_transaction`` -> ``prepare()`` ->
``prepared``; ``commit()`` / ``abort()`` go back to ``ready``. A handle fenced by a newer
``init_transactions`` (or by a timeout, with ``fence_on_transaction_timeout``) raises
``ProducerFencedError`` from every call; one whose transaction the store timed out otherwise
raises ``TransactionTimeoutError`` until ``abort()`` acknowledges it.
"""

from __future__ import annotations

from collections.abc import Mapping

from offsetlog.errors import (
    InvalidTxnStateError,
    OffsetlogError,
    ProducerFencedError,
    TransactionTimeoutError,
)
from offsetlog.log.format import Attribute
from offsetlog.txn.state import COMPLETE_ABORT, ONGOING, PREPARE_ABORT, PREPARED, TxnMetadata
from offsetlog.types import OffsetAndMetadata, TopicPartition, committed_view
from offsetlog.validation import check_group_id

READY = "ready"
IN_TRANSACTION = "in_transaction"
PREPARED_LOCAL = "prepared"
TIMED_OUT = "timed_out"  # the store aborted the open transaction; abort() acknowledges it
FENCED = "fenced"


class Transaction:
    """A transactional producer for offsets. Thread-safe; calls of one transactional id are
    serialised by the store."""

    def __init__(self, transactions, meta: TxnMetadata) -> None:
        """:param transactions: the store's ``Transactions`` part"""
        self._txns = transactions
        self.transactional_id = meta.transactional_id
        self.producer_id = meta.producer_id
        self.producer_epoch = meta.producer_epoch
        self.transaction_timeout_ms = meta.timeout_ms
        prepared = meta.state == PREPARED
        # Ongoing: a handle made again for a producer that carries on (resume_transaction,
        # the wire server after a restart); init_transactions never makes one.
        ongoing = meta.state == ONGOING
        self._state = PREPARED_LOCAL if prepared else IN_TRANSACTION if ongoing else READY
        #: start timestamp of our durable Ongoing transaction (None: nothing written yet)
        self._started: int | None = meta.start_timestamp if prepared or ongoing else None
        #: the durable metadata that fenced this handle (for the error's message)
        self._fenced_by: TxnMetadata | None = None

    def __repr__(self) -> str:
        return (f"<Transaction {self.transactional_id!r} producer_id={self.producer_id} "
                f"epoch={self.producer_epoch} {self._state}>")

    @property
    def state(self) -> str:
        """``ready``, ``in_transaction``, ``prepared``, ``timed_out`` or ``fenced``."""
        return self._state

    def ensure_current(self) -> None:
        """Raise what the next call would: ``ProducerFencedError`` once a newer
        ``init_transactions`` took the id, ``TransactionTimeoutError`` once the store aborted
        the open transaction (a front end answering for this handle checks before it
        answers anything, as Kafka's coordinator checks the epoch first)."""
        with self._txns.lock(self.transactional_id):
            self._current()

    @property
    def prepared(self) -> bool:
        """Whether the handle is in a prepared transaction (after ``prepare()``, or from
        ``init_transactions(keep_prepared=True)`` after a crash)."""
        return self._state == PREPARED_LOCAL

    # -- the calls -------------------------------------------------------------------------

    def begin(self) -> "Transaction":
        """Begin a transaction (local: nothing is written until the first offsets)."""
        with self._txns.lock(self.transactional_id):
            self._current()
            if self._state != READY:
                raise InvalidTxnStateError(f"begin() in state {self._state}: a transaction "
                                           "is already open")
            self._state = IN_TRANSACTION
            self._started = None
        return self

    def commit_offsets(self, group_id: str,
                       offsets: Mapping[TopicPartition, OffsetAndMetadata | int], *,
                       generation_id: int = -1, member_id: str = "",
                       group_instance_id: str | None = None) -> None:
        """Add ``offsets`` of ``group_id`` to the transaction (Kafka's
        ``sendOffsetsToTransaction``). They are durable but pending: ``fetch`` shows them
        only once the transaction commits. For a managed group the generation, member id
        and instance id are checked as for ``commit_sync`` (KIP-447 fencing).

        :raises InvalidTxnStateError: no transaction begun, or it is prepared
        :raises ProducerFencedError: a newer ``init_transactions`` fenced this handle
        :raises TransactionTimeoutError: the store aborted the transaction (timeout)
        """
        txns = self._txns
        with txns.lock(self.transactional_id):
            meta = self._current()
            if self._state != IN_TRANSACTION:
                raise InvalidTxnStateError(f"commit_offsets() in state {self._state}")
            part, item, precheck = txns.prepare_commit(group_id, offsets, generation_id,
                                                       member_id, group_instance_id,
                                                       transactional=True)
            if item is None:  # no offsets: only the fencing check
                with part.lock:
                    precheck()
                return
            self._join(meta, part)
            item.attributes = Attribute.TRANSACTIONAL
            item.producer_id = self.producer_id
            item.producer_epoch = self.producer_epoch
            txns.write(part, item, precheck)

    def add_group(self, group_id: str) -> None:
        """Kafka's AddOffsetsToTxn on its own: ``group_id``'s log partition joins the open
        transaction durably (it is Ongoing from now on, as Kafka records it), before any of
        its offsets. ``commit_offsets`` does this itself; a front end answering
        AddOffsetsToTxn calls it so that the transaction is recorded when Kafka records it.

        :raises InvalidTxnStateError: no transaction begun, or it is prepared
        """
        check_group_id(group_id)
        with self._txns.lock(self.transactional_id):
            meta = self._current()
            if self._state != IN_TRANSACTION:
                raise InvalidTxnStateError(f"add_group() in state {self._state}")
            self._join(meta, self._txns.part_of(group_id))

    def _join(self, meta: TxnMetadata, part) -> None:
        """``part`` joins the durable state before any offset lands there, so a crash can
        never leave pending offsets that no marker reaches. Then the store's board of open
        transactions holds this producer with the transaction's partitions (the wire's
        TxnOffsetCommit of a joined group is written without a Python call)."""
        if meta.state != ONGOING or part.index not in meta.partitions:
            meta = meta.add_partition(part.index, now_ms=self._txns.now())
            self._txns.write_state(meta)
            self._started = meta.start_timestamp
        self._txns.board.publish(self.transactional_id, self.producer_id, self.producer_epoch,
                                 list(meta.partitions))

    def prepare(self) -> None:
        """Make the transaction's offsets durable with its outcome undecided (KIP-939): it
        survives a crash as prepared, is never timed out, and waits for ``commit()`` or
        ``abort()``, from this handle or from ``init_transactions(keep_prepared=True)``."""
        txns = self._txns
        with txns.lock(self.transactional_id):
            meta = self._current()
            if self._state != IN_TRANSACTION:
                raise InvalidTxnStateError(f"prepare() in state {self._state}")
            if self._started is not None:
                txns.sync_partitions(meta.partitions)
                meta = meta.to(PREPARED, now_ms=txns.now())
                txns.write_state(meta, force_sync=True)
            self._state = PREPARED_LOCAL

    def commit(self) -> None:
        """Commit: the offsets become visible to ``fetch``, each one unless a plain commit of
        its key was written after it (Kafka's rule)."""
        self._finish(True)

    def abort(self) -> None:
        """Abort: the transaction's offsets are dropped. Also acknowledges a timeout."""
        self._finish(False)

    def _finish(self, commit: bool) -> None:
        txns = self._txns
        with txns.lock(self.transactional_id):
            try:
                meta = self._current()
            except TransactionTimeoutError:
                if commit:
                    raise
                self._state, self._started = READY, None
                return
            if self._state not in (IN_TRANSACTION, PREPARED_LOCAL):
                raise InvalidTxnStateError(
                    f"{'commit' if commit else 'abort'}() in state {self._state}: no transaction")
            if self._started is not None:
                txns.complete(meta, commit)
            self._state, self._started = READY, None

    def pending_offsets(self) -> dict[str, dict[TopicPartition, OffsetAndMetadata]]:
        """group -> the offsets this handle's open (or prepared) transaction holds, as
        written (a plain commit written later may still win at commit time)."""
        txns = self._txns
        with txns.lock(self.transactional_id):
            meta = self._current()
            out: dict[str, dict] = {}
            if self._started is None:
                return out
            for held in txns.held_offsets(self.producer_id, meta.partitions):
                for group, entries in held.items():
                    out.setdefault(group, {}).update(committed_view(entries.items()))
            return out

    # -- context manager -------------------------------------------------------------------

    def __enter__(self) -> "Transaction":
        if self._state == READY:
            self.begin()
        return self

    def __exit__(self, exc_type, exc, tb) -> None:
        if exc_type is None:
            self.commit()
            return
        try:
            self.abort()
        except OffsetlogError:
            pass  # fenced or closed: the exception already propagating says more

    # -- checks ----------------------------------------------------------------------------

    def _current(self) -> TxnMetadata:
        """The durable metadata, after checking this handle is neither fenced nor timed
        out (called with the id's lock held)."""
        txns = self._txns
        txns.check_open()
        if self._state == FENCED:
            raise self._fenced(self._fenced_by)
        meta = txns.meta(self.transactional_id)
        if (meta is None or meta.producer_id != self.producer_id
                or meta.producer_epoch != self.producer_epoch):
            self._state, self._fenced_by = FENCED, meta
            raise self._fenced(meta)
        if self._state == TIMED_OUT or (
                self._started is not None and self._state == IN_TRANSACTION
                and (meta.state != ONGOING or meta.start_timestamp != self._started)):
            self._state = TIMED_OUT
            raise TransactionTimeoutError(
                f"transactional id {self.transactional_id!r}: the store aborted the "
                f"transaction after {self.transaction_timeout_ms} ms; abort() to go on",
                transactional_id=self.transactional_id, timeout_ms=self.transaction_timeout_ms)
        return meta

    def _fenced(self, meta: TxnMetadata | None) -> ProducerFencedError:
        current = None if meta is None else meta.producer_epoch
        why = ("the store aborted its transaction for its timeout"
               if meta is not None and meta.producer_id == self.producer_id
               and meta.producer_epoch == self.producer_epoch + 1
               and meta.state in (PREPARE_ABORT, COMPLETE_ABORT) else
               "a newer init_transactions took the id")
        return ProducerFencedError(
            f"transactional id {self.transactional_id!r}: producer epoch "
            f"{self.producer_epoch} was fenced (epoch {current}): {why}",
            transactional_id=self.transactional_id, producer_epoch=self.producer_epoch,
            current_epoch=current)
