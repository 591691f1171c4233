"""``Transaction``: the handle ``OffsetStore.init_transactions`` returns.

Kafka's transactional producer, for offsets only (KIP-98's ``sendOffsetsToTransaction``)::

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
``init_transactions`` raises ``ProducerFencedError`` from every call; one whose transaction
the store timed out raises ``TransactionTimeoutError`` until ``abort()`` acknowledges it.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import TYPE_CHECKING

from offsetlog.errors import (InvalidTxnStateError, OffsetlogError, ProducerFencedError,
                              TransactionTimeoutError)
from offsetlog.log.format import Attribute
from offsetlog.txn.state import ONGOING, PREPARED, TxnMetadata
from offsetlog.types import OffsetAndMetadata, TopicPartition, committed_view

if TYPE_CHECKING:  # pragma: no cover
    from offsetlog.store import OffsetStore

READY = "ready"
IN_TRANSACTION = "in_transaction"
PREPARED_LOCAL = "prepared"
TIMED_OUT = "timed_out"  # the store aborted the open transaction; abort() acknowledges it
FENCED = "fenced"


class Transaction:
    """A transactional producer for offsets. Thread-safe; calls of one transactional id are
    serialised by the store."""

    def __init__(self, store: "OffsetStore", meta: TxnMetadata) -> None:
        self._store = store
        self.transactional_id = meta.transactional_id
        self.producer_id = meta.producer_id
        self.producer_epoch = meta.producer_epoch
        self.transaction_timeout_ms = meta.timeout_ms
        prepared = meta.state == PREPARED
        # Ongoing: a handle made again for a producer that carries on (the wire server after
        # a restart, as Kafka's coordinator after a failover); init_transactions never is.
        ongoing = meta.state == ONGOING
        self._state = PREPARED_LOCAL if prepared else IN_TRANSACTION if ongoing else READY
        #: start timestamp of our durable Ongoing transaction (None: nothing written yet)
        self._started: int | None = meta.start_timestamp if prepared or ongoing else None

    def __repr__(self) -> str:
        return (f"<Transaction {self.transactional_id!r} producer_id={self.producer_id} "
                f"epoch={self.producer_epoch} {self._state}>")

    @property
    def state(self) -> str:
        """``ready``, ``in_transaction``, ``prepared``, ``timed_out`` or ``fenced``."""
        return self._state

    @property
    def prepared(self) -> bool:
        """Whether the handle is in a prepared transaction (after ``prepare()``, or from
        ``init_transactions(keep_prepared=True)`` after a crash)."""
        return self._state == PREPARED_LOCAL

    # -- the calls -------------------------------------------------------------------------

    def begin(self) -> "Transaction":
        """Begin a transaction (local: nothing is written until the first offsets)."""
        with self._store._txn_lock(self.transactional_id):
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
        store = self._store
        with store._txn_lock(self.transactional_id):
            meta = self._current()
            if self._state != IN_TRANSACTION:
                raise InvalidTxnStateError(f"commit_offsets() in state {self._state}")
            part, item, precheck = store._prepare_commit(group_id, offsets, generation_id,
                                                         member_id, group_instance_id,
                                                         transactional=True)
            if item is None:  # no offsets: only the fencing check
                with part.lock:
                    precheck()
                return
            if meta.state != ONGOING or part.index not in meta.partitions:
                # AddOffsetsToTxn: the partition is in the durable state before any offset
                # lands there, so a crash can never leave pending offsets no marker reaches.
                meta = meta.add_partition(part.index, now_ms=store._clock())
                store._txn_write_state(meta)
                self._started = meta.start_timestamp
            item.attributes = Attribute.TRANSACTIONAL
            item.producer_id = self.producer_id
            item.producer_epoch = self.producer_epoch
            store._writer.submit_sync(part, item, None, precheck)

    def prepare(self) -> None:
        """Make the transaction's offsets durable with its outcome undecided (KIP-939): it
        survives a crash as prepared, is never timed out, and waits for ``commit()`` or
        ``abort()``, from this handle or from ``init_transactions(keep_prepared=True)``."""
        store = self._store
        with store._txn_lock(self.transactional_id):
            meta = self._current()
            if self._state != IN_TRANSACTION:
                raise InvalidTxnStateError(f"prepare() in state {self._state}")
            if self._started is not None:
                store._txn_sync_partitions(meta.partitions)
                meta = meta.to(PREPARED, now_ms=store._clock())
                store._txn_write_state(meta, force_sync=True)
            self._state = PREPARED_LOCAL

    def commit(self) -> None:
        """Commit: the offsets become visible to ``fetch``, each one unless a plain commit of
        its key was written after it (Kafka's rule)."""
        self._finish(True)

    def abort(self) -> None:
        """Abort: the transaction's offsets are dropped. Also acknowledges a timeout."""
        self._finish(False)

    def _finish(self, commit: bool) -> None:
        store = self._store
        with store._txn_lock(self.transactional_id):
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
                store._txn_complete(meta, commit)
            self._state, self._started = READY, None

    def pending_offsets(self) -> dict[str, dict[TopicPartition, OffsetAndMetadata]]:
        """group -> the offsets this handle's open (or prepared) transaction holds, as
        written (a plain commit written later may still win at commit time)."""
        store = self._store
        with store._txn_lock(self.transactional_id):
            meta = self._current()
            out: dict[str, dict] = {}
            if self._started is None:
                return out
            for p in meta.partitions:
                part = store._parts[p]
                with part.lock:
                    held = part.table.txn.offsets_of(self.producer_id)
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
        store = self._store
        store._check_open()
        if self._state == FENCED:
            raise self._fenced(None)
        meta = store._txn_meta(self.transactional_id)
        if (meta is None or meta.producer_id != self.producer_id
                or meta.producer_epoch != self.producer_epoch):
            self._state = FENCED
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
        return ProducerFencedError(
            f"transactional id {self.transactional_id!r}: producer epoch "
            f"{self.producer_epoch} was fenced by a newer init_transactions (epoch {current})",
            transactional_id=self.transactional_id, producer_epoch=self.producer_epoch,
            current_epoch=current)
