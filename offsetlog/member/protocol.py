"""The member's side of the consumer protocol, pure: what it puts in JoinGroup, and what the
leader computes for SyncGroup.

**Subscription metadata.** A member lists one ``(assignor name, subscription bytes)`` pair per
configured assignor. What a subscription says about the partitions the member holds depends on
the rebalance protocol the member runs:

* cooperative: the partitions it still owns (it keeps them during the rebalance) and the
  generation they were assigned in, as Kafka sends them;
* eager: the member revoked everything before rejoining, so Kafka sends no owned partitions and
  its eager ``sticky`` assignor remembers the previous assignment in ``user_data`` instead.
  offsetlog's assignors read stickiness from ``owned_partitions`` only, so an eager member lists
  its *previous* assignment there for assignors that only run eagerly (``sticky`` stays sticky).
  An assignor that can also run cooperatively (``cooperative-sticky``) would take those as
  partitions still held and leave them out of the assignment, so it gets none, as in Kafka.

**The leader's assignment.** The leader decodes every member's subscription from its JoinGroup
answer, runs the assignor the group voted for, and under the cooperative protocol checks that
no partition is given to one member while another still owns it (Kafka's
``validateCooperativeAssignment``), before encoding one assignment per member.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping

from offsetlog.assignors import (
    NO_GENERATION,
    PartitionAssignor,
    RebalanceProtocol,
    Subscription,
    validate_cooperative_assignment,
)
from offsetlog.group.consumer_protocol import (
    decode_subscription,
    encode_assignment,
    encode_subscription,
)
from offsetlog.group.responses import JoinGroupMember
from offsetlog.types import TopicPartition


def join_protocols(assignors: Iterable[PartitionAssignor], protocol: RebalanceProtocol,
                   topics: Iterable[str], *, owned: Iterable[TopicPartition],
                   owned_generation: int, previous: Iterable[TopicPartition],
                   previous_generation: int) -> list[tuple[str, bytes]]:
    """The JoinGroup protocol list: one subscription per assignor, most preferred first.

    :param protocol: the rebalance protocol this member runs
    :param owned: the partitions it holds now (cooperative)
    :param previous: its last assignment, even if revoked since (eager stickiness)
    """
    topics = sorted(set(topics))
    owned, previous = sorted(owned), sorted(previous)
    out = []
    for assignor in assignors:
        if protocol is RebalanceProtocol.COOPERATIVE:
            parts, generation = owned, owned_generation
        elif RebalanceProtocol.COOPERATIVE in assignor.supported_protocols:
            parts, generation = [], NO_GENERATION
        else:
            parts, generation = previous, previous_generation
        out.append((assignor.name, encode_subscription(
            topics, owned_partitions=parts, generation_id=generation if parts else NO_GENERATION)))
    return out


def subscriptions_of(members: Iterable[JoinGroupMember]) -> dict[str, Subscription]:
    """The members' subscriptions, as the leader's JoinGroup answer lists them.

    :raises ValueError: a member's metadata is not a consumer subscription
    """
    subs = {}
    for m in members:
        fields = decode_subscription(m.metadata)
        subs[m.member_id] = Subscription(
            fields["topics"], user_data=fields["user_data"],
            owned_partitions=fields["owned_partitions"], generation_id=fields["generation_id"],
            group_instance_id=m.group_instance_id)
    return subs


def leader_assignments(assignor: PartitionAssignor, protocol: RebalanceProtocol,
                       partitions_per_topic: Mapping[str, int],
                       members: Iterable[JoinGroupMember]) -> dict[str, bytes]:
    """What the leader sends in SyncGroup: member id -> encoded assignment, for every member.

    :raises InvalidAssignmentError: the assignor's result is invalid, or (cooperative) hands out
        a partition that another member still owns
    """
    subs = subscriptions_of(members)
    result = assignor.assign(partitions_per_topic, subs)
    if protocol is RebalanceProtocol.COOPERATIVE:
        validate_cooperative_assignment(subs, result)
    return {member_id: encode_assignment(result.get(member_id, [])) for member_id in subs}


def topic_snapshot(partitions_per_topic: Mapping[str, int],
                   members: Iterable[JoinGroupMember]) -> dict[str, int]:
    """Partition counts of every topic some member subscribes to (0: unknown), the leader's
    record of the metadata an assignment was computed from."""
    topics = set()
    for sub in subscriptions_of(members).values():
        topics.update(sub.topics)
    return {t: partitions_per_topic.get(t, 0) for t in sorted(topics)}
