"""InitProducerId, AddOffsetsToTxn, TxnOffsetCommit, EndTxn: a transactional producer's
offsets (KIP-98 ``sendOffsetsToTransaction``, KIP-447) through the store's ``Transaction``
handles (offsetlog/transactions.py, docs/TRANSACTIONS.md), one per transactional id.

Each step waits for fsyncs, so each runs on a worker thread; the store serialises the calls
of one transactional id. The transaction is begun by AddOffsetsToTxn, its offsets are
written pending by TxnOffsetCommit, and EndTxn commits or aborts it.

The handles live in the server process, the state they stand for in the store's log: after
a restart a producer is known by its durable TRANSACTION_STATE (``_resume``), as Kafka's
coordinator knows it from ``__transaction_state`` after a failover, so it goes on without
InitProducerId.

A transaction the store aborts for its timeout fences its producer's epoch, as Kafka's
coordinator bumps the epoch when it aborts one (the store is opened with
``fence_on_transaction_timeout``, so the bump is in the abort's own record and survives a
restart): every later request with that epoch gets PRODUCER_FENCED, and the producer starts
again with InitProducerId. Only an epoch too high to bump leaves the handle timed out
instead, fenced here by ``ensure_current``.
"""

from __future__ import annotations

from typing import NamedTuple

from offsetlog.errors import InvalidTxnStateError, ProducerFencedError, TransactionTimeoutError
from offsetlog.log import _native
from offsetlog.server import errors as E
from offsetlog.server.context import Call, Context
from offsetlog.server.offsets import (
    answer_order,
    checked_offsets,
    group_error,
    partition_answers,
    topic_fields,
)
from offsetlog.server.work import run_blocking
from offsetlog.store.transactions import Transaction
from offsetlog.txn.state import COMPLETE_ABORT, COMPLETE_COMMIT

#: the ``fenced_since`` of an answer that is INVALID_PRODUCER_EPOCH at every version
NEVER = 1 << 15


def _fenced_code(version: int, min_version: int) -> int:
    """PRODUCER_FENCED, or INVALID_PRODUCER_EPOCH for versions that predate it (Kafka's
    mapping for older clients)."""
    return E.PRODUCER_FENCED if version >= min_version else E.INVALID_PRODUCER_EPOCH


def _code(version: int, error: BaseException | None, fenced_since: int) -> int:
    if isinstance(error, _Answer):
        return error.code
    if isinstance(error, ProducerFencedError):
        return _fenced_code(version, fenced_since)
    return E.code_of(error)


def init_producer_id(ctx: Context, call: Call, now_ms: int):
    b = call.body
    tid = b.transactional_id
    store = ctx.store
    timeout = int(b.transaction_timeout.total_seconds() * 1000)

    if tid is None:  # an idempotent producer: an id of its own, no transaction
        def allocate():
            return store.allocate_producer_id(), 0
    else:
        if not 0 < timeout <= ctx.config.transaction_max_timeout_ms:
            return call.respond(error_code=E.INVALID_TRANSACTION_TIMEOUT, producer_id=-1,
                                producer_epoch=-1)

        # v3+: a producer that has an id and epoch sends them to bump its own epoch
        # (KIP-360); a zombie's stale ones are PRODUCER_FENCED
        pid = getattr(b, "producer_id", -1)
        expected = None if pid == -1 else (int(pid), int(b.producer_epoch))

        def allocate():
            txn = store.init_transactions(tid, transaction_timeout_ms=timeout,
                                          expected_producer=expected)
            ctx.producers[tid] = txn
            return txn.producer_id, txn.producer_epoch

    def finish(outcome):
        if outcome.error is not None:
            return call.respond(error_code=_code(call.version, outcome.error, 4), producer_id=-1,
                                producer_epoch=-1)
        pid, epoch = outcome.value
        return call.respond(error_code=E.NONE, producer_id=pid, producer_epoch=epoch)
    return run_blocking(allocate, finish)


def _handle(ctx: Context, tid: str, producer_id: int, producer_epoch: int) -> Transaction:
    """The live handle of ``tid``; raises what Kafka answers for a stale or unknown one."""
    txn = ctx.producers.get(tid)
    if txn is None:
        txn = _resume(ctx, tid, producer_id)
    if txn.producer_id != producer_id:
        raise _Answer(E.INVALID_PRODUCER_ID_MAPPING)
    if txn.producer_epoch != producer_epoch:
        raise ProducerFencedError(f"transactional id {tid!r}: epoch {producer_epoch} is "
                                  f"stale", transactional_id=tid,
                                  producer_epoch=producer_epoch,
                                  current_epoch=txn.producer_epoch)
    try:
        txn.ensure_current()
    except TransactionTimeoutError as e:
        raise ProducerFencedError(f"transactional id {tid!r}: epoch {producer_epoch} was "
                                  f"fenced when its transaction timed out ({e})",
                                  transactional_id=tid, producer_epoch=producer_epoch,
                                  current_epoch=None) from None
    return txn


def _resume(ctx: Context, tid: str, producer_id: int) -> Transaction:
    """A handle for a producer this server process has not seen (it restarted): its
    durable TRANSACTION_STATE says who it is, as ``__transaction_state`` does for Kafka's
    coordinator after a failover. A producer whose id and epoch match carries on without
    InitProducerId, in its Ongoing transaction if it had one; the store aborts that one
    only if it times out first."""
    meta = ctx.store.transaction_state(tid)
    if meta is None or meta.producer_id != producer_id:
        raise _Answer(E.INVALID_PRODUCER_ID_MAPPING)
    txn = ctx.store.resume_transaction(tid)
    if txn is None or txn.producer_id != producer_id:
        raise _Answer(E.INVALID_PRODUCER_ID_MAPPING)
    return ctx.producers.setdefault(tid, txn)


class _Answer(Exception):
    def __init__(self, code: int) -> None:
        super().__init__(code)
        self.code = code


def _outcome_code(call: Call, outcome, fenced_since: int) -> int:
    return _code(call.version, outcome.error, fenced_since)


def add_offsets_to_txn(ctx: Context, call: Call, now_ms: int):
    b = call.body

    def add():
        txn = _handle(ctx, b.transactional_id, b.producer_id, b.producer_epoch)
        if txn.state == "ready":
            txn.begin()
        elif txn.state != "in_transaction":
            raise InvalidTxnStateError(f"AddOffsetsToTxn in state {txn.state}")
        if b.group_id:  # recorded now, as Kafka records it: Ongoing. ("": a group the store
            txn.add_group(b.group_id)  # refuses; Kafka accepts it, and so does this answer)

    return run_blocking(add, lambda o: call.respond(error_code=_outcome_code(call, o, 2)))


class TxnOffsetCommitFields(NamedTuple):
    """A TxnOffsetCommit request as the native codec decodes it (a ``Call``'s body)."""

    transactional_id: str
    group_id: str
    producer_id: int
    producer_epoch: int
    generation_id: int
    member_id: str
    group_instance_id: str | None
    #: ``offsets.topic_fields``' shape
    topics: list


def txn_commit_answer(call: Call, codes: dict, code: int):
    """The TxnOffsetCommit response: each partition's code of ``codes``, ``code`` for the
    rest, in Kafka's order (``offsets.answer_order``)."""
    b = call.body
    if b.__class__ is TxnOffsetCommitFields:
        return _native.encode_txn_offset_commit_response(
            call.header.correlation_id, call.version, answer_order(b.topics, codes, code))
    return call.respond(topics=partition_answers(b.topics, codes, code))


def txn_offset_commit(ctx: Context, call: Call, now_ms: int):
    b = call.body
    code = group_error(ctx, b.group_id)
    if code:
        return txn_commit_answer(call, {}, code)
    topics = b.topics if b.__class__ is TxnOffsetCommitFields else topic_fields(b.topics)
    good, bad = checked_offsets(ctx, topics, call)

    def commit():
        txn = _handle(ctx, b.transactional_id, b.producer_id, b.producer_epoch)
        if good:
            txn.commit_offsets(b.group_id, good,
                               generation_id=int(getattr(b, "generation_id", -1)),
                               member_id=getattr(b, "member_id", ""),
                               group_instance_id=getattr(b, "group_instance_id", None))

    return run_blocking(commit, lambda o: txn_commit_answer(call, bad, txn_commit_code(
        call.version, o.error)))


def txn_commit_code(version: int, error: BaseException | None) -> int:
    """A TxnOffsetCommit's code for the ``error`` its commit raised (None: NONE), as the
    Python handler and the native request loop (``Connection.txn_commit_error``) answer it."""
    # a stale epoch: INVALID_PRODUCER_EPOCH at every version, as Kafka answers (the epoch is
    # checked where the offsets are written, not by the transaction coordinator)
    code = _code(version, error, NEVER)
    if code == E.STALE_MEMBER_EPOCH:
        # a consumer-protocol member's epoch that is not its own: TxnOffsetCommit has no
        # STALE_MEMBER_EPOCH for its clients, and Kafka answers ILLEGAL_GENERATION
        code = E.ILLEGAL_GENERATION
    if code == E.INVALID_TXN_STATE and version >= 4:
        # v4 says the producer can abort and go on (KIP-890): Kafka tells it so
        code = E.TRANSACTION_ABORTABLE
    return code


def end_txn(ctx: Context, call: Call, now_ms: int):
    b = call.body

    def end():
        tid = b.transactional_id
        txn = _handle(ctx, tid, b.producer_id, b.producer_epoch)
        if txn.state == "ready":
            # No transaction open: Kafka's answer follows the durable state. The outcome it
            # recorded is a retry whose answer was lost (a restart, say): success; the other
            # outcome, or Empty (nothing was ever added), is INVALID_TXN_STATE.
            meta = ctx.store.transaction_state(tid)
            ended = {COMPLETE_COMMIT: True, COMPLETE_ABORT: False}.get(
                None if meta is None else meta.state)
            if ended != bool(b.committed):
                what = ("no transaction" if ended is None else "a transaction already "
                        + ("committed" if ended else "aborted"))
                raise InvalidTxnStateError(
                    f"EndTxn({'commit' if b.committed else 'abort'}) of {what}")
            return
        if b.committed:
            txn.commit()
        else:
            txn.abort()

    return run_blocking(end, lambda o: call.respond(error_code=_outcome_code(call, o, 2)))
