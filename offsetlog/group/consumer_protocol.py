"""The bytes a consumer puts in JoinGroup (its subscription) and gets from SyncGroup (its
assignment), for ``protocol_type="consumer"``.

The coordinator treats both as opaque, as Kafka's does, with two exceptions: offset retention
(KIP-211) needs the topics a Stable group subscribes to, so it decodes subscriptions with
:func:`subscribed_topics`; and a static member's restart must not strand partitions held back
for the old process to revoke (:func:`held_back_for`). Kafka uses its ConsumerProtocol schema
here; offsetlog uses msgpack maps, versioned like records (a reader takes the fields it knows
and ignores the rest, so fields can be added without a version bump)::

    subscription: {"version": 0, "topics": [str], "user_data": bytes | None,
                   "owned_partitions": [[topic, partition]], "generation_id": int}
    assignment:   {"version": 0, "partitions": [[topic, partition]], "user_data": bytes | None}
"""

from __future__ import annotations

from collections.abc import Iterable

import msgpack

from offsetlog.types import TopicPartition

PROTOCOL_TYPE = "consumer"


def _pairs(partitions: Iterable) -> list[list]:
    return [[str(t), int(p)] for t, p in partitions]


def encode_subscription(topics: Iterable[str], *, user_data: bytes | None = None,
                        owned_partitions: Iterable = (), generation_id: int = -1) -> bytes:
    """A member's JoinGroup protocol metadata.

    >>> sorted(decode_subscription(encode_subscription(["b", "a"]))["topics"])
    ['a', 'b']
    """
    return msgpack.packb({"version": 0, "topics": sorted(set(topics)), "user_data": user_data,
                          "owned_partitions": _pairs(owned_partitions),
                          "generation_id": generation_id}, use_bin_type=True)


def decode_subscription(data: bytes) -> dict:
    """The fields of a subscription; raises ``ValueError`` if ``data`` is not one."""
    try:
        value = msgpack.unpackb(data, raw=False)
    except Exception as e:  # msgpack raises several unrelated types for garbage
        raise ValueError(f"not a consumer subscription: {e}") from None
    if not isinstance(value, dict) or not isinstance(value.get("topics"), list):
        raise ValueError("not a consumer subscription: no topic list")
    owned = [TopicPartition(t, p) for t, p in value.get("owned_partitions", [])]
    return {"topics": value["topics"], "user_data": value.get("user_data"),
            "owned_partitions": owned, "generation_id": value.get("generation_id", -1)}


def subscribed_topics(data: bytes) -> frozenset[str] | None:
    """The topics of a subscription, or ``None`` when ``data`` is not a consumer subscription
    (then the group's subscriptions are unknown, and retention keeps its offsets, as Kafka does
    when it cannot parse one)."""
    try:
        topics = decode_subscription(data)["topics"]
    except ValueError:
        return None
    if not all(isinstance(t, str) for t in topics):
        return None
    return frozenset(topics)


def encode_assignment(partitions: Iterable, *, user_data: bytes | None = None) -> bytes:
    """What a leader hands the coordinator for one member in SyncGroup."""
    return msgpack.packb({"version": 0, "partitions": _pairs(sorted(partitions)),
                          "user_data": user_data}, use_bin_type=True)


def decode_assignment(data: bytes) -> list[TopicPartition]:
    """The partitions of an assignment; ``b""`` (what the coordinator sends a member the leader
    left out) is no partitions."""
    if not data:
        return []
    value = msgpack.unpackb(data, raw=False)
    return [TopicPartition(t, p) for t, p in value["partitions"]]


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
    except Exception:  # not consumer protocol data (msgpack raises several unrelated types)
        return []
    return sorted(claimed)
