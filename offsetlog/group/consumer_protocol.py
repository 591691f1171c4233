"""The bytes a consumer puts in JoinGroup (its subscription) and gets from SyncGroup (its
assignment), for ``protocol_type="consumer"``: Kafka's ConsumerProtocol, the layout every
Kafka client sends and expects (librdkafka, the Java client, kafka-python, aiokafka), so
that members embedded with ``offsetlog.member`` and members speaking the wire protocol
(``offsetlog serve``) can share one group.

Both are a big-endian int16 version followed by that version of Kafka's
``ConsumerProtocolSubscription`` / ``ConsumerProtocolAssignment`` message (non-flexible
encoding), encoded and decoded by ``kio`` from Kafka's own schemas:

* Subscription v0: topics, user_data; v1: + owned_partitions; v2: + generation_id;
  v3: + rack_id.
* Assignment v0-v3: assigned_partitions, user_data (the versions differ in nothing else).

A version newer than v3 is read as v3, as Kafka's ``ConsumerProtocol`` does (later versions
only append fields), and bytes after the known fields are ignored.

The coordinator treats both as opaque, as Kafka's does, with two exceptions: offset retention
(KIP-211) and OffsetDelete need the topics a group subscribes to (:func:`subscribed_topics`),
and a static member's restart must not strand partitions held back for the old process to
revoke (:func:`held_back_for`).
"""

from __future__ import annotations

import functools
import io
from collections.abc import Iterable
from itertools import groupby
from types import SimpleNamespace

from offsetlog.types import TopicPartition

PROTOCOL_TYPE = "consumer"

#: the versions this module writes (Kafka's Java client writes its newest, too)
SUBSCRIPTION_VERSION = 3
ASSIGNMENT_VERSION = 3


@functools.cache
def _kio() -> SimpleNamespace:
    """kio's schemas and serialisers, imported on first use: they take longer to import
    than the rest of ``offsetlog`` together (~0.18 s here), and a store that never meets a
    consumer group needs none of them."""
    from kio.schema.consumer_protocol_assignment.v0.data import (
        ConsumerProtocolAssignment as AssignmentV0,
    )
    from kio.schema.consumer_protocol_assignment.v1.data import (
        ConsumerProtocolAssignment as AssignmentV1,
    )
    from kio.schema.consumer_protocol_assignment.v2.data import (
        ConsumerProtocolAssignment as AssignmentV2,
    )
    from kio.schema.consumer_protocol_assignment.v3 import data as assignment_v3
    from kio.schema.consumer_protocol_subscription.v0.data import (
        ConsumerProtocolSubscription as SubscriptionV0,
    )
    from kio.schema.consumer_protocol_subscription.v1.data import (
        ConsumerProtocolSubscription as SubscriptionV1,
    )
    from kio.schema.consumer_protocol_subscription.v2.data import (
        ConsumerProtocolSubscription as SubscriptionV2,
    )
    from kio.schema.consumer_protocol_subscription.v3 import data as subscription_v3
    from kio.serial import entity_reader, entity_writer
    from kio.serial.readers import read_int16
    from kio.serial.writers import write_int16

    return SimpleNamespace(
        subscriptions={0: SubscriptionV0, 1: SubscriptionV1, 2: SubscriptionV2,
                       3: subscription_v3.ConsumerProtocolSubscription},
        assignments={0: AssignmentV0, 1: AssignmentV1, 2: AssignmentV2,
                     3: assignment_v3.ConsumerProtocolAssignment},
        subscription_v3=subscription_v3, assignment_v3=assignment_v3,
        entity_reader=entity_reader, entity_writer=entity_writer, read_int16=read_int16,
        write_int16=write_int16)


def _topic_partitions(partitions: Iterable) -> tuple:
    """kio's v3 ``TopicPartition`` entities of ``(topic, partition)`` pairs."""
    pairs = sorted({(str(t), int(p)) for t, p in partitions})
    return tuple(_kio().subscription_v3.TopicPartition(topic=t, partitions=tuple(p for _, p in g))
                 for t, g in groupby(pairs, key=lambda tp: tp[0]))


def _encode(version: int, schema, entity) -> bytes:
    k = _kio()
    buf = io.BytesIO()
    k.write_int16(buf, version)
    k.entity_writer(schema)(buf, entity)
    return buf.getvalue()


def _decode(data: bytes, what: str):
    """(version, entity) of ``data``; ``ValueError`` when it is not one."""
    if not isinstance(data, (bytes, bytearray, memoryview)):
        raise ValueError(f"not a consumer {what}: {type(data).__name__}, not bytes")
    try:
        k = _kio()
        schemas = k.subscriptions if what == "subscription" else k.assignments
        version, size = k.read_int16(data, 0)
        if version < 0:
            raise ValueError(f"negative version {version}")
        entity, _ = k.entity_reader(schemas[min(version, 3)])(data, size)
    except ValueError as e:
        raise ValueError(f"not a consumer {what}: {e}") from None
    except Exception as e:  # kio's readers raise several unrelated types for garbage
        raise ValueError(f"not a consumer {what}: {type(e).__name__}: {e}") from None
    return version, entity


def _flatten(topic_partitions) -> list[TopicPartition]:
    return sorted(TopicPartition(tp.topic, int(p)) for tp in topic_partitions
                  for p in tp.partitions)


def encode_subscription(topics: Iterable[str], *, user_data: bytes | None = None,
                        owned_partitions: Iterable = (), generation_id: int = -1,
                        rack_id: str | None = None) -> bytes:
    """A member's JoinGroup protocol metadata: ConsumerProtocol Subscription v3.

    >>> sorted(decode_subscription(encode_subscription(["b", "a"]))["topics"])
    ['a', 'b']
    """
    subscription_v3 = _kio().subscription_v3
    entity = subscription_v3.ConsumerProtocolSubscription(
        topics=tuple(sorted(set(topics))), user_data=user_data,
        owned_partitions=_topic_partitions(owned_partitions), generation_id=generation_id,
        rack_id=rack_id)
    return _encode(SUBSCRIPTION_VERSION, subscription_v3.ConsumerProtocolSubscription, entity)


def decode_subscription(data: bytes) -> dict:
    """The fields of a subscription (``topics``, ``user_data``, ``owned_partitions`` as
    sorted ``TopicPartition``s, ``generation_id``, ``rack_id``, ``version``); fields its
    version lacks take Kafka's defaults. Raises ``ValueError`` if ``data`` is not one."""
    version, s = _decode(data, "subscription")
    return {"version": version, "topics": list(s.topics), "user_data": s.user_data,
            "owned_partitions": _flatten(getattr(s, "owned_partitions", ())),
            "generation_id": int(getattr(s, "generation_id", -1)),
            "rack_id": getattr(s, "rack_id", None)}


def subscribed_topics(data: bytes) -> frozenset[str] | None:
    """The topics of a subscription, or ``None`` when ``data`` is not a consumer subscription
    (then the group's subscriptions are unknown, and retention keeps its offsets, as Kafka does
    when it cannot parse one)."""
    try:
        return frozenset(decode_subscription(data)["topics"])
    except ValueError:
        return None


def encode_assignment(partitions: Iterable, *, user_data: bytes | None = None,
                      version: int = ASSIGNMENT_VERSION) -> bytes:
    """What a leader hands the coordinator for one member in SyncGroup: Assignment v3, or
    ``version`` (0-3 share one layout; the coordinator answers a classic member of a consumer
    group in its subscription's version, as Kafka's does)."""
    assignment_v3 = _kio().assignment_v3
    entity = assignment_v3.ConsumerProtocolAssignment(
        assigned_partitions=tuple(assignment_v3.TopicPartition(topic=tp.topic,
                                                               partitions=tp.partitions)
                                  for tp in _topic_partitions(partitions)),
        user_data=user_data)
    return _encode(max(0, min(version, ASSIGNMENT_VERSION)),
                   assignment_v3.ConsumerProtocolAssignment, entity)


def decode_assignment_fields(data: bytes) -> dict:
    """``partitions`` (sorted ``TopicPartition``s), ``user_data`` and ``version`` of an
    assignment; ``b""`` (what the coordinator sends a member the leader left out) is no
    partitions. Raises ``ValueError`` if ``data`` is not one."""
    if not data:
        return {"version": ASSIGNMENT_VERSION, "partitions": [], "user_data": None}
    version, a = _decode(data, "assignment")
    return {"version": version, "partitions": _flatten(a.assigned_partitions),
            "user_data": a.user_data}


def decode_assignment(data: bytes) -> list[TopicPartition]:
    """The partitions of an assignment, sorted; ``b""`` is no partitions."""
    return decode_assignment_fields(data)["partitions"]


def held_back_for(subscription: bytes, assignment: bytes,
                  other_assignments: Iterable[bytes]) -> list[TopicPartition]:
    """The partitions a member's subscription claims that its assignment takes away and that no
    other member is assigned either, sorted: under cooperative rebalancing the leader holds
    such a partition back until this member has revoked it (the member then rejoins, and the
    follow-up rebalance assigns it). ``[]`` when any of the data is not consumer protocol data.

    An eager member claims nothing that another member is not given, or lists (for eager-only
    assignors) its previous assignment, whose partitions went to others; so for eager groups
    this is empty, except for partitions that no longer exist or nobody reads any more.

    >>> sub = encode_subscription(["t"], owned_partitions=[("t", 0), ("t", 1)], generation_id=3)
    >>> held_back_for(sub, encode_assignment([("t", 0)]), [encode_assignment([("t", 2)])])
    [TopicPartition(topic='t', partition=1)]
    >>> held_back_for(sub, encode_assignment([("t", 0)]), [encode_assignment([("t", 1)])])
    []
    """
    try:
        claimed = set(decode_subscription(subscription)["owned_partitions"])
        claimed.difference_update(decode_assignment(assignment))
        for other in other_assignments:
            if not claimed:
                break
            claimed.difference_update(decode_assignment(other))
    except ValueError:  # not consumer protocol data
        return []
    return sorted(claimed)
