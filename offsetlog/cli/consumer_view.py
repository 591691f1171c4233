"""What ``describe --members`` shows of consumer-protocol (KIP-848) groups.

A consumer-protocol group's state is its CONSUMER_GROUP_* records (docs/FORMAT.md); the
read-only commands fold a log partition's latest value of each key into the same
``ConsumerGroup`` the coordinator keeps (``ConsumerGroupCoordinator.replay``, the code a
reopened store runs), so what is shown is what a restart would load.

The columns are those of Kafka 4.x's ``kafka-consumer-groups --describe --members --verbose``
for a consumer group: CURRENT-EPOCH is the member's epoch, TARGET-EPOCH the group's target
assignment epoch, and an assignment is written as Kafka writes it, ``topic:0,1;other:2``.
Beyond Kafka's columns: the member's RACK and its reconciliation STATE (Kafka's member states
``STABLE``, ``UNREVOKED_PARTITIONS``, ``UNRELEASED_PARTITIONS``) and the group's epoch.
"""

from __future__ import annotations

from collections.abc import Iterable

from offsetlog.group.consumer import ConsumerGroup, ConsumerGroupCoordinator
from offsetlog.group.consumer.group import rebuild_groups
from offsetlog.table.offset_table import OffsetTable

COLUMNS = ("GROUP", "CONSUMER-ID", "GROUP-INSTANCE-ID", "CLIENT-ID", "HOST", "RACK", "STATE",
           "#PARTITIONS", "CURRENT-EPOCH", "CURRENT-ASSIGNMENT", "TARGET-EPOCH",
           "TARGET-ASSIGNMENT", "GROUP-EPOCH")
RIGHT = ("#PARTITIONS", "CURRENT-EPOCH", "TARGET-EPOCH", "GROUP-EPOCH")


def consumer_groups(table: OffsetTable) -> dict[str, ConsumerGroup]:
    """The consumer-protocol groups of one log partition's table, as a reopened store's
    coordinator loads them."""
    return rebuild_groups(table.consumer_groups)


def assignment_string(tps: Iterable[tuple[str, int]]) -> str | None:
    """``orders:0,1;events:2`` (Kafka's ``getAssignmentString``: topics and partitions in
    order); None when empty."""
    by_topic: dict[str, list[int]] = {}
    for t, p in sorted(tps):
        by_topic.setdefault(t, []).append(p)
    return ";".join(f"{t}:{','.join(map(str, ps))}" for t, ps in by_topic.items()) or None


def _pairs(tps: Iterable[tuple[str, int]]) -> list[list]:
    return [[t, p] for t, p in sorted(tps)]


def member_rows(group: ConsumerGroup) -> list[dict]:
    """One row per member, in member id order; the JSON fields are the columns' (lower case,
    ``num_partitions`` for ``#PARTITIONS``) plus the assignments as ``[topic, partition]``
    lists and the partitions still to be revoked."""
    rows = []
    for mid, m in sorted(group.members.items()):
        target = group.targets.get(mid, frozenset())
        rows.append({
            "group": group.group_id, "type": "consumer", "consumer_id": mid,
            "group_instance_id": m.instance_id, "client_id": m.client_id or None,
            "host": m.client_host or None, "rack": m.rack_id, "state": m.state.upper(),
            "num_partitions": len(m.assigned), "current_epoch": m.member_epoch,
            "current_assignment": assignment_string(m.assigned),
            "target_epoch": group.assignment_epoch,
            "target_assignment": assignment_string(target),
            "group_epoch": group.group_epoch,
            "assigned_partitions": _pairs(m.assigned),
            "pending_revocation": _pairs(m.pending_revocation),
            "target_partitions": _pairs(target),
            "subscribed_topic_names": list(m.subscribed_topics),
            "subscribed_topic_regex": m.subscribed_topic_regex,
            "server_assignor": m.server_assignor})
    return rows


def group_row(group: ConsumerGroup, assignor: str) -> dict:
    """The group as ``--members --json`` lists it under ``consumer_groups``."""
    return {"group": group.group_id, "type": "consumer", "state": group.state(),
            "group_epoch": group.group_epoch, "target_assignment_epoch": group.assignment_epoch,
            "assignor": assignor, "num_members": len(group.members)}


def preferred_assignor(group: ConsumerGroup) -> str:
    """The assignor the coordinator would use for ``group`` under the default
    ``group.consumer.assignors`` (the store's settings are not in the log)."""
    return ConsumerGroupCoordinator().preferred_assignor(group)
