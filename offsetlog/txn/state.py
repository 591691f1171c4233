"""The durable state of one transactional id, and which transitions it may take.

Kafka's ``TransactionState`` (``__transaction_state``), plus KIP-939's PREPARED:

==============  =========================================================================
state           meaning
==============  =========================================================================
Empty           no open transaction (a fresh epoch from ``init_transactions``)
Ongoing         a transaction has written offsets to ``partitions``; they are pending
Prepared        ``prepare()`` made them durable; the outcome waits for commit() / abort()
                from a handle (KIP-939: never timed out, the external coordinator decides)
PrepareCommit   the commit is decided; markers are being written (roll-forward on open)
PrepareAbort    the abort is decided; markers are being written (roll-forward on open)
CompleteCommit  every marker of the last transaction is written: like Empty
CompleteAbort   likewise, after an abort
==============  =========================================================================

Transitions are data (:data:`TRANSITIONS`); an illegal one raises ``InvalidTxnStateError``
and changes nothing. Everything here is pure: times come in as ``now_ms``.
"""

from __future__ import annotations

from dataclasses import dataclass, replace

from offsetlog.errors import InvalidTxnStateError, ProducerFencedError

EMPTY = "Empty"
ONGOING = "Ongoing"
PREPARED = "Prepared"
PREPARE_COMMIT = "PrepareCommit"
PREPARE_ABORT = "PrepareAbort"
COMPLETE_COMMIT = "CompleteCommit"
COMPLETE_ABORT = "CompleteAbort"
STATES = (EMPTY, ONGOING, PREPARED, PREPARE_COMMIT, PREPARE_ABORT, COMPLETE_COMMIT,
          COMPLETE_ABORT)

#: states with no open transaction: a new one may begin
IDLE = frozenset({EMPTY, COMPLETE_COMMIT, COMPLETE_ABORT})
#: states whose markers are decided but maybe not all written: reopen completes them
DECIDED = frozenset({PREPARE_COMMIT, PREPARE_ABORT})

#: state -> states it may move to
TRANSITIONS: dict[str, frozenset[str]] = {
    EMPTY: frozenset({EMPTY, ONGOING}),
    COMPLETE_COMMIT: frozenset({EMPTY, ONGOING}),
    COMPLETE_ABORT: frozenset({EMPTY, ONGOING}),
    # Ongoing -> Ongoing adds a partition; -> PrepareAbort is also the fencing abort
    ONGOING: frozenset({ONGOING, PREPARED, PREPARE_COMMIT, PREPARE_ABORT}),
    # Prepared -> Prepared: init_transactions(keep_prepared=True) bumps the epoch
    PREPARED: frozenset({PREPARED, PREPARE_COMMIT, PREPARE_ABORT}),
    PREPARE_COMMIT: frozenset({COMPLETE_COMMIT}),
    PREPARE_ABORT: frozenset({COMPLETE_ABORT}),
}

#: Kafka's producer epoch is an int16; at the top a new producer id is allocated
MAX_EPOCH = 32767


@dataclass(frozen=True)
class TxnMetadata:
    """What a TRANSACTION_STATE record says about one transactional id."""

    transactional_id: str
    producer_id: int
    producer_epoch: int
    state: str
    timeout_ms: int
    update_timestamp: int
    partitions: tuple[int, ...] = ()
    start_timestamp: int = -1  # when the open transaction first wrote; -1 if none is open
    #: the epoch a producer had before the bump it asked for with its own id and epoch
    #: (KIP-360): a retry of that request gets the current epoch again; -1 otherwise
    last_producer_epoch: int = -1
    #: the producer id before the last rotation to a new one (the epoch was exhausted); -1
    #: if none
    last_producer_id: int = -1

    # -- records -------------------------------------------------------------------------

    def to_value(self) -> dict:
        return {"producer_id": self.producer_id, "producer_epoch": self.producer_epoch,
                "state": self.state, "partitions": list(self.partitions),
                "timeout_ms": self.timeout_ms, "start_timestamp": self.start_timestamp,
                "update_timestamp": self.update_timestamp,
                "last_producer_epoch": self.last_producer_epoch,
                "last_producer_id": self.last_producer_id}

    @classmethod
    def from_value(cls, transactional_id: str, value: dict) -> "TxnMetadata":
        state = value["state"]
        if state not in STATES:
            raise InvalidTxnStateError(f"transactional id {transactional_id!r}: unknown state "
                                       f"{state!r} in its TRANSACTION_STATE record")
        return cls(transactional_id, value["producer_id"], value["producer_epoch"], state,
                   value["timeout_ms"], value["update_timestamp"],
                   tuple(value.get("partitions", ())), value.get("start_timestamp", -1),
                   value.get("last_producer_epoch", -1), value.get("last_producer_id", -1))

    # -- transitions -----------------------------------------------------------------------

    def to(self, state: str, *, now_ms: int, **changes) -> "TxnMetadata":
        """This metadata moved to ``state`` at ``now_ms`` (plus ``changes``), or
        ``InvalidTxnStateError`` when the state machine does not allow it."""
        if state not in TRANSITIONS[self.state]:
            raise InvalidTxnStateError(
                f"transactional id {self.transactional_id!r} cannot go from {self.state} to "
                f"{state}")
        if state in IDLE:
            changes.setdefault("partitions", ())
            changes.setdefault("start_timestamp", -1)
        return replace(self, state=state, update_timestamp=now_ms, **changes)

    def add_partition(self, partition: int, *, now_ms: int) -> "TxnMetadata":
        """Ongoing with ``partition`` among those its markers must reach (AddOffsetsToTxn)."""
        start = self.start_timestamp if self.state == ONGOING else now_ms
        parts = tuple(sorted(set(self.partitions) | {partition}))
        return self.to(ONGOING, now_ms=now_ms, partitions=parts, start_timestamp=start)

    def timed_out(self, now_ms: int) -> bool:
        """An Ongoing transaction older than its timeout (Prepared ones never time out)."""
        return self.state == ONGOING and now_ms >= self.start_timestamp + self.timeout_ms

    @property
    def idle(self) -> bool:
        return self.state in IDLE

    @property
    def decided(self) -> bool:
        return self.state in DECIDED


def is_retry_of_last_bump(meta: TxnMetadata | None, producer_id: int,
                          producer_epoch: int) -> bool:
    """Kafka's check of the producer id and epoch a producer sends with InitProducerId
    (KIP-360: a producer that has them asks to bump its own epoch rather than start over).

    :return: False: they are the id's current ones (bump as usual; also for an unknown id);
        True: they are the ones before the last bump or rotation (a retry whose answer was
        lost: answer the current epoch, bump nothing)
    :raises ProducerFencedError: anything else (a zombie: a newer producer took the id)
    """
    if meta is None:
        return False
    if producer_id == meta.producer_id and producer_epoch == meta.producer_epoch:
        return False
    if meta.idle and producer_epoch == meta.last_producer_epoch >= 0 and (
            producer_id == meta.producer_id
            or (producer_id == meta.last_producer_id and producer_epoch >= MAX_EPOCH)):
        return True
    raise ProducerFencedError(
        f"transactional id {meta.transactional_id!r}: producer id {producer_id} epoch "
        f"{producer_epoch} is not the current one (id {meta.producer_id}, epoch "
        f"{meta.producer_epoch})", transactional_id=meta.transactional_id,
        producer_epoch=producer_epoch, current_epoch=meta.producer_epoch)


def next_epoch(meta: TxnMetadata | None, allocate_producer_id) -> tuple[int, int]:
    """(producer id, epoch) for the next ``init_transactions`` of ``meta``'s id: the epoch
    bumped, or a fresh producer id (from ``allocate_producer_id()``) at epoch 0 for a new id
    or one whose epoch is exhausted."""
    if meta is None or meta.producer_epoch >= MAX_EPOCH:
        return allocate_producer_id(), 0
    return meta.producer_id, meta.producer_epoch + 1


__all__ = ["COMPLETE_ABORT", "COMPLETE_COMMIT", "DECIDED", "EMPTY", "IDLE", "MAX_EPOCH",
           "ONGOING", "PREPARED", "PREPARE_ABORT", "PREPARE_COMMIT", "STATES", "TRANSITIONS",
           "TxnMetadata", "is_retry_of_last_bump", "next_epoch"]
