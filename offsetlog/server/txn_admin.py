"""ListTransactions, DescribeTransactions, DescribeProducers: what Kafka's admin tools
(``kafka-transactions.sh``, kafka-python's ``list_transactions``, ``describe_transactions``
and ``find_hanging_transactions``) read of the transaction coordinator, answered from the
store's durable TRANSACTION_STATE (``store.transaction_states``).

A transaction here writes only offsets, to the log partitions of its groups: Kafka's
coordinator lists those as partitions of ``__consumer_offsets`` (AddOffsetsToTxn adds the
group's one), and so do we. A prepared transaction (KIP-939) is Ongoing to Kafka's
coordinator, which knows no prepared state, and is listed so; the store never times it out,
so the hanging-transaction tools find it once it is old enough, as they would with Kafka.
"""

from __future__ import annotations

import datetime
import re

from offsetlog.server import authz
from offsetlog.server import errors as E
from offsetlog.server.context import Call, Context
from offsetlog.txn.state import ONGOING, PREPARED, STATES, TxnMetadata

#: the state names Kafka's coordinator knows (TransactionState): ours but KIP-939's
#: Prepared, and two it passes through that this store never records; a filter naming
#: another is answered in ``unknown_state_filters``
KAFKA_STATES = frozenset(STATES) - {PREPARED} | {"Dead", "PrepareEpochFence"}
#: the partitions of a transaction's offsets, as Kafka names them
OFFSETS_TOPIC = "__consumer_offsets"


def kafka_state(meta: TxnMetadata) -> str:
    return ONGOING if meta.state == PREPARED else meta.state


def list_transactions(ctx: Context, call: Call, now_ms: int):
    b = call.body
    states = set(b.state_filters)
    unknown = sorted(states - KAFKA_STATES)
    producer_ids = {int(p) for p in b.producer_id_filters}
    duration = int(getattr(b, "duration_filter", -1))
    pattern = getattr(b, "transactional_id_pattern", None)
    if pattern:
        try:
            pattern = re.compile(pattern)
        except re.error:
            return call.respond(error_code=E.INVALID_REGULAR_EXPRESSION,
                                unknown_state_filters=unknown, transaction_states=())
    listed = []
    for meta in ctx.store.transaction_states():
        if states and kafka_state(meta) not in states:
            continue
        if producer_ids and meta.producer_id not in producer_ids:
            continue
        # "running longer than": only an open transaction has a start time to measure from
        if duration >= 0 and not (meta.start_timestamp >= 0
                                  and now_ms - meta.start_timestamp > duration):
            continue
        if pattern and not pattern.fullmatch(meta.transactional_id):
            continue
        if not authz.allowed(ctx, call, authz.DESCRIBE, authz.TRANSACTIONAL_ID,
                             meta.transactional_id):
            continue  # Kafka lists only the ids the caller may describe
        listed.append(dict(transactional_id=meta.transactional_id,
                           producer_id=meta.producer_id, transaction_state=kafka_state(meta)))
    return call.respond(error_code=E.NONE, unknown_state_filters=unknown,
                        transaction_states=listed)


def describe_transactions(ctx: Context, call: Call, now_ms: int):
    out = []
    for tid in call.body.transactional_ids:
        if not authz.allowed(ctx, call, authz.DESCRIBE, authz.TRANSACTIONAL_ID, tid):
            out.append(dict(error_code=E.TRANSACTIONAL_ID_AUTHORIZATION_FAILED,
                            transactional_id=tid, transaction_state="", transaction_timeout=0,
                            transaction_start_time=_time(-1), producer_id=-1,
                            producer_epoch=-1, topics=()))
            continue
        meta = ctx.store.transaction_state(tid)
        if meta is None:
            out.append(dict(error_code=E.TRANSACTIONAL_ID_NOT_FOUND, transactional_id=tid,
                            transaction_state="", transaction_timeout=0,
                            transaction_start_time=_time(-1), producer_id=-1,
                            producer_epoch=-1, topics=()))
            continue
        topics = ([dict(topic=OFFSETS_TOPIC, partitions=list(meta.partitions))]
                  if meta.partitions else [])
        out.append(dict(error_code=E.NONE, transactional_id=tid,
                        transaction_state=kafka_state(meta),
                        transaction_timeout=meta.timeout_ms,
                        transaction_start_time=_time(meta.start_timestamp),
                        producer_id=meta.producer_id, producer_epoch=meta.producer_epoch,
                        topics=topics))
    return call.respond(transaction_states=out)


def describe_producers(ctx: Context, call: Call, now_ms: int):
    """The active producers of topic partitions: a registered topic's have none (no
    producer writes messages here); an unknown partition is UNKNOWN_TOPIC_OR_PARTITION."""
    topics = []
    readable = authz.allowed_names(ctx, call, authz.READ, authz.TOPIC,
                                   (t.name for t in call.body.topics))
    for t in call.body.topics:
        parts = []
        for p in t.partition_indexes:
            if t.name not in readable:
                parts.append(dict(partition_index=p, error_code=E.TOPIC_AUTHORIZATION_FAILED,
                                  error_message="Topic authorization failed.",
                                  active_producers=()))
                continue
            known = ctx.topics.has_partition(t.name, int(p))
            parts.append(dict(partition_index=p,
                              error_code=E.NONE if known else E.UNKNOWN_TOPIC_OR_PARTITION,
                              error_message=None, active_producers=()))
        topics.append(dict(name=t.name, partitions=parts))
    return call.respond(topics=topics)


def _time(ms: int) -> datetime.datetime:
    """kio's timestamp type: a timezone-aware datetime (-1, "none", included)."""
    return datetime.datetime.fromtimestamp(ms / 1000, datetime.timezone.utc)
