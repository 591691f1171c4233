"""Offset retention for groups the coordinator manages (KIP-211), as pure functions.

What a group's offsets need to be judged is a :class:`RetentionView` of the group (its state,
protocol type, state timestamp and subscribed topics), taken from a live group
(:meth:`RetentionView.of_group`) or from its GROUP_METADATA value as the log partition's table
holds it (:meth:`RetentionView.of_value`), or :data:`STANDALONE` for a group without one.

Rules (Kafka's ``GroupMetadata.removeExpiredOffsets``; an offset committed with an explicit
expire timestamp, the pre-KIP-211 API, expires at that timestamp instead of by its base, in every
case where the group's offsets may expire at all):

* **standalone** (no group metadata, or no protocol type): an offset expires ``retention_ms``
  after its last commit;
* **Empty**: every offset expires ``retention_ms`` after the group became Empty (its
  ``current_state_timestamp``), or after its last commit if that is later. Kafka counts from the
  state timestamp alone, so an offset committed (with generation -1) to a long-Empty group can
  expire at the next pass; offsetlog keeps it ``retention_ms`` from that commit, the rule
  the store applied before, so expiry never removes a just-acknowledged commit.
  Without a state timestamp (an old record), the last commit counts;
* **Stable consumer group** (``protocol_type == "consumer"``, subscriptions known): offsets of
  topics no member subscribes to expire ``retention_ms`` after their last commit; offsets of
  subscribed topics never expire while the group is Stable;
* anything else (rebalancing, a non-consumer protocol, subscriptions that do not parse): nothing
  expires.

A group that is Empty and has no offsets left is deleted (:func:`should_delete_group`): the
coordinator drops it and writes a GROUP_METADATA tombstone.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass

from offsetlog.group.consumer_protocol import PROTOCOL_TYPE as CONSUMER
from offsetlog.group.group import Group
from offsetlog.group.schema import load_group
from offsetlog.group.state import EMPTY, STABLE, GroupState
from offsetlog.table.offset_table import COMMIT_TIMESTAMP, EXPIRE_TIMESTAMP

#: (topic, partition)
TopicPartitionKey = tuple[str, int]


@dataclass(frozen=True)
class RetentionView:
    """What retention needs to know about a group.

    :ivar state: the group's state; None for a group without group metadata
    :ivar protocol_type: e.g. ``"consumer"``; None for a standalone group
    :ivar state_timestamp: epoch ms the group entered ``state`` (None if unknown)
    :ivar subscribed_topics: topics its members subscribe to; None if unknown
    """

    state: GroupState | None
    protocol_type: str | None
    state_timestamp: int | None
    subscribed_topics: frozenset[str] | None

    @classmethod
    def of_group(cls, group: Group) -> "RetentionView":
        return cls(group.state, group.protocol_type, group.state_timestamp,
                   group.subscribed_topics())

    @classmethod
    def of_consumer_group(cls, subscribed_topics: Iterable[str]) -> "RetentionView":
        """A consumer-protocol (KIP-848) group, in any state: Kafka's rule for those is a
        Stable classic consumer group's, offsets of topics no member subscribes to expiring
        ``retention_ms`` after their last commit (an Empty group subscribes to none)."""
        return cls(STABLE, CONSUMER, None, frozenset(subscribed_topics))

    @classmethod
    def of_value(cls, value: dict | None) -> "RetentionView":
        """The view of a group as its GROUP_METADATA value (None: no metadata) describes it."""
        if value is None:
            return STANDALONE
        return cls.of_group(load_group("", value))


STANDALONE = RetentionView(None, None, None, None)


def expired_offsets(view: RetentionView,
                    entries: Mapping[TopicPartitionKey, tuple] | Iterable[tuple],
                    now_ms: int, retention_ms: int) -> list[TopicPartitionKey]:
    """The ``(topic, partition)`` keys of the group's offsets that have expired at ``now_ms``.

    :param view: the group (see :class:`RetentionView`)
    :param entries: ``(topic, partition) -> table entry`` (``offsetlog.table`` layout:
        ``(offset, metadata, leader_epoch, commit_timestamp, expire_timestamp)``), or its items
    :return: the expired keys, sorted
    """
    items = entries.items() if isinstance(entries, Mapping) else entries
    state = view.state
    keep_topics: frozenset[str] = frozenset()
    base: int | None = None  # None: each offset's own commit timestamp
    if state is None or view.protocol_type is None:
        pass
    elif state is EMPTY:
        base = view.state_timestamp
    elif state is STABLE and view.protocol_type == CONSUMER and view.subscribed_topics is not None:
        keep_topics = view.subscribed_topics
    else:
        return []
    out = []
    for tp, entry in items:
        if tp[0] in keep_topics:
            continue
        expire_at = entry[EXPIRE_TIMESTAMP]
        if expire_at is None:
            committed = entry[COMMIT_TIMESTAMP]
            expire_at = (committed if base is None else max(base, committed)) + retention_ms
        if now_ms >= expire_at:
            out.append(tuple(tp))
    out.sort()
    return out


def should_delete_group(view: RetentionView, remaining_offsets: int) -> bool:
    """Whether the group should be deleted (and its metadata tombstoned): it is Empty and has no
    committed offsets left."""
    return view.state is EMPTY and remaining_offsets == 0
