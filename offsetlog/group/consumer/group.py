"""One consumer-protocol group's state (Kafka's ``ConsumerGroup``), and the records that carry it.

A group has a **group epoch** (bumped whenever a member joins or leaves, a subscription changes
or a subscribed topic's partition count changes), an **assignment epoch** (the group epoch its
target assignment was computed at), each member's **target** assignment, and each member's
current assignment and epoch (``offsetlog.group.consumer.member``).

Records are ``(kind, key, value)``, modelled on Kafka's record types of the same names; a value
of None deletes the key. ``apply`` folds one into the group, so replaying a coordinator's
records in order rebuilds its groups exactly.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field, replace

from offsetlog.group.consumer import regex
from offsetlog.group.consumer.member import (
    NOTHING,
    STABLE,
    ClassicMetadata,
    ConsumerMember,
    epochs_from_value,
    partitions_from_value,
    partitions_value,
)
from offsetlog.log.records import CONSUMER_GROUP_KINDS, CONSUMER_GROUP_TYPES

#: key (group,) -> {"epoch", "subscription_metadata": {topic: partitions}}
GROUP_METADATA = "ConsumerGroupMetadata"
#: key (group, member) -> the member's subscription and settings
MEMBER_METADATA = "ConsumerGroupMemberMetadata"
#: key (group,) -> {"assignment_epoch"}
TARGET_METADATA = "ConsumerGroupTargetAssignmentMetadata"
#: key (group, member) -> {"partitions"}
TARGET_MEMBER = "ConsumerGroupTargetAssignmentMember"
#: key (group, member) -> epochs, state, assigned and pending revocation
CURRENT_ASSIGNMENT = "ConsumerGroupCurrentMemberAssignment"
KINDS = (GROUP_METADATA, MEMBER_METADATA, TARGET_METADATA, TARGET_MEMBER, CURRENT_ASSIGNMENT)
#: key (group,) -> a classic group's GROUP_METADATA value (None: tombstone): written beside
#: the records above when a group changes protocol (``offsetlog.group.migration``); the
#: classic coordinator, not ``ConsumerGroup.apply``, reads it
CLASSIC_GROUP_METADATA = "GroupMetadata"

# Kafka's group states, as ListGroups and ConsumerGroupDescribe name them
EMPTY = "Empty"
ASSIGNING = "Assigning"
RECONCILING = "Reconciling"
STABLE_GROUP = "Stable"


@dataclass
class ConsumerGroup:
    group_id: str
    group_epoch: int = 0
    assignment_epoch: int = 0
    #: partition counts of the subscribed topics that exist, as of the last group epoch
    subscription_metadata: dict[str, int] = field(default_factory=dict)
    members: dict[str, ConsumerMember] = field(default_factory=dict)
    targets: dict[str, frozenset] = field(default_factory=dict)
    #: (topic, partition) -> the member that owns it (assigned or pending revocation)
    owners: dict[tuple, str] = field(default_factory=dict)
    #: instance id -> member id of the static members
    static: dict[str, str] = field(default_factory=dict)

    # -- views ---------------------------------------------------------------------------

    def state(self) -> str:
        if not self.members:
            return EMPTY
        if self.assignment_epoch != self.group_epoch:
            return ASSIGNING
        for m in self.members.values():
            if m.state != STABLE or m.member_epoch != self.assignment_epoch:
                return RECONCILING
        return STABLE_GROUP

    def owner_epoch(self, tp: tuple) -> int:
        """The epoch of the member that owns ``tp`` now; -1 if none does."""
        owner = self.owners.get(tp)
        return -1 if owner is None else self.members[owner].member_epoch

    def regexes(self) -> set[str]:
        return {m.subscribed_topic_regex for m in self.members.values()
                if m.subscribed_topic_regex}

    def subscribed_topics(self, topics: Iterable[str] | None = None) -> set[str]:
        """The topics some member subscribes to, by name or by regex. A regex is resolved
        against ``topics`` (the topics that exist), or, when not given, against the topics of
        the subscription metadata (those that existed, and were subscribed, at the last group
        epoch): a regex's resolution is not kept apart, it follows from these."""
        out = {t for m in self.members.values() for t in m.subscribed_topics}
        regexes = self.regexes()
        if regexes:
            names = list(self.subscription_metadata if topics is None else topics)
            for r in regexes:
                out |= regex.resolve(r, names)
        return out

    def member_topics(self, member: ConsumerMember) -> frozenset[str]:
        """A member's topics as of the subscription metadata: its names and its regex's
        matches."""
        out = frozenset(member.subscribed_topics)
        if member.subscribed_topic_regex:
            out |= regex.resolve(member.subscribed_topic_regex, self.subscription_metadata)
        return out

    # -- changes -------------------------------------------------------------------------

    def put_member(self, member: ConsumerMember) -> None:
        old = self.members.get(member.member_id)
        if old is not None:
            for tp in old.owned():
                if self.owners.get(tp) == old.member_id:
                    del self.owners[tp]
            if old.instance_id is not None and self.static.get(old.instance_id) == old.member_id:
                del self.static[old.instance_id]
        self.members[member.member_id] = member
        for tp in member.owned():
            self.owners[tp] = member.member_id
        if member.instance_id is not None:
            self.static[member.instance_id] = member.member_id

    def drop_member(self, member_id: str) -> None:
        old = self.members.pop(member_id, None)
        self.targets.pop(member_id, None)
        if old is None:
            return
        for tp in old.owned():
            if self.owners.get(tp) == member_id:
                del self.owners[tp]
        if old.instance_id is not None and self.static.get(old.instance_id) == member_id:
            del self.static[old.instance_id]

    def apply(self, kind: str, key: tuple, value: dict | None) -> None:
        """Fold one record into the group."""
        if kind == GROUP_METADATA:
            if value is not None:
                self.group_epoch = value["epoch"]
                self.subscription_metadata = dict(value["subscription_metadata"])
        elif kind == TARGET_METADATA:
            if value is not None:
                self.assignment_epoch = value["assignment_epoch"]
        elif kind == MEMBER_METADATA:
            member_id = key[1]
            if value is None:
                self.drop_member(member_id)
                return
            old = self.members.get(member_id, ConsumerMember(member_id))
            self.put_member(replace(
                old, instance_id=value["instance_id"], rack_id=value["rack_id"],
                client_id=value["client_id"], client_host=value["client_host"],
                subscribed_topics=tuple(value["subscribed_topic_names"]),
                subscribed_topic_regex=value.get("subscribed_topic_regex"),
                server_assignor=value["server_assignor"],
                rebalance_timeout_ms=value["rebalance_timeout_ms"],
                classic=ClassicMetadata.from_value(value.get("classic_member_metadata"))))
        elif kind == TARGET_MEMBER:
            if value is None:
                self.targets.pop(key[1], None)
            else:
                self.targets[key[1]] = partitions_from_value(value["partitions"])
        elif kind == CURRENT_ASSIGNMENT:
            member_id = key[1]
            old = self.members.get(member_id, ConsumerMember(member_id))
            if value is None:
                if member_id in self.members:
                    self.put_member(replace(old, state=STABLE, member_epoch=0,
                                            previous_member_epoch=0, assigned=NOTHING,
                                            pending_revocation=NOTHING, assignment_epochs=()))
                return
            self.put_member(replace(
                old, member_epoch=value["member_epoch"],
                previous_member_epoch=value["previous_member_epoch"], state=value["state"],
                assigned=partitions_from_value(value["assigned"]),
                pending_revocation=partitions_from_value(value["pending_revocation"]),
                assignment_epochs=epochs_from_value(value.get("assignment_epochs", ()))))
        else:
            raise ValueError(f"not a consumer group record: {kind!r}")


def new_group(group_id: str) -> ConsumerGroup:
    """A group a member's first heartbeat makes: at group epoch 1 with an empty target at
    assignment epoch 1, so the first assignment is epoch 2's, as in Kafka 4.3+
    (KAFKA-20268, for its assignment off the request path: a joining member must get an
    epoch above 0 before its first target exists). Its records say so before the join's."""
    return ConsumerGroup(group_id, group_epoch=1, assignment_epoch=1)


def new_group_records(group: ConsumerGroup) -> list[tuple]:
    """A new group's first records (``new_group``'s epochs), before its first member's."""
    return [group_record(group), target_metadata_record(group)]


def group_record(group: ConsumerGroup) -> tuple:
    return (GROUP_METADATA, (group.group_id,),
            {"epoch": group.group_epoch,
             "subscription_metadata": dict(sorted(group.subscription_metadata.items()))})


def target_metadata_record(group: ConsumerGroup) -> tuple:
    return (TARGET_METADATA, (group.group_id,), {"assignment_epoch": group.assignment_epoch})


def member_record(group_id: str, member: ConsumerMember) -> tuple:
    return (MEMBER_METADATA, (group_id, member.member_id), member.metadata())


def target_record(group_id: str, member_id: str, target: frozenset) -> tuple:
    return (TARGET_MEMBER, (group_id, member_id), {"partitions": partitions_value(target)})


def current_record(group_id: str, member: ConsumerMember) -> tuple:
    return (CURRENT_ASSIGNMENT, (group_id, member.member_id), member.current_assignment())


def removal_records(group_id: str, member_id: str) -> list[tuple]:
    """A member's tombstones, in Kafka's order: current assignment, target, metadata."""
    return [(CURRENT_ASSIGNMENT, (group_id, member_id), None),
            (TARGET_MEMBER, (group_id, member_id), None),
            (MEMBER_METADATA, (group_id, member_id), None)]


def group_tombstones(group: ConsumerGroup) -> list[tuple]:
    """Every record of ``group`` deleted, in Kafka's order (its members', then the target
    assignment metadata, then the group's): the group is gone from the log."""
    out = []
    for mid in sorted(group.members):
        out.extend(removal_records(group.group_id, mid))
    out.append((TARGET_METADATA, (group.group_id,), None))
    out.append((GROUP_METADATA, (group.group_id,), None))
    return out


def group_records(group: ConsumerGroup) -> list[tuple]:
    """The records that rebuild ``group`` from nothing (a compacted log's view of it)."""
    out = [group_record(group)]
    for mid, m in sorted(group.members.items()):
        out.append(member_record(group.group_id, m))
    for mid, target in sorted(group.targets.items()):
        out.append(target_record(group.group_id, mid, target))
    out.append(target_metadata_record(group))
    for mid, m in sorted(group.members.items()):
        out.append(current_record(group.group_id, m))
    return out


_KIND_OF = {t: k for k, t in CONSUMER_GROUP_KINDS.items()}
_ORDER = {t: i for i, t in enumerate(CONSUMER_GROUP_TYPES)}


def state_records(state: Mapping[tuple, dict]) -> list[tuple]:
    """The records that rebuild the groups of a log partition's consumer-group state, in the
    order of ``group_records``.

    :param state: ``(record type, group, member or None) -> value``, the latest value of each
        CONSUMER_GROUP_* key (a table's ``consumer_groups``; the cleaner's ``record_key``)
    """
    out = []
    for (rtype, group, member), value in sorted(
            state.items(), key=lambda kv: (kv[0][1], _ORDER[kv[0][0]], kv[0][2] or "")):
        key = (group,) if member is None else (group, member)
        out.append((_KIND_OF[rtype], key, value))
    return out


def apply_records(groups: dict[str, ConsumerGroup], records: Iterable[tuple]) -> None:
    """Fold ``(kind, key, value)`` records, in log order, into ``groups`` (group id -> group),
    making a group on its first record: the one fold of recovery and of every offline view."""
    for kind, key, value in records:
        group = groups.get(key[0])
        if group is None:
            group = groups[key[0]] = ConsumerGroup(key[0])
        group.apply(kind, tuple(key), value)


def rebuild_groups(state: Mapping[tuple, dict]) -> dict[str, ConsumerGroup]:
    """group id -> the group, as ``state`` (see ``state_records``) describes it."""
    groups: dict[str, ConsumerGroup] = {}
    apply_records(groups, state_records(state))
    return groups
