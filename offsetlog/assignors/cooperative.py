"""The cooperative sticky assignor (Kafka's ``CooperativeStickyAssignor``, protocol name
``cooperative-sticky``), and the check every cooperative assignment must pass.

Under cooperative rebalancing members keep consuming what they own while the group rebalances,
so a partition must never be handed to one member while another still owns it. The assignor
computes the sticky assignment and then leaves out every partition that would change hands: its
owner sees it missing from its new assignment and revokes it, which triggers a follow-up
rebalance in which the partition is free and is assigned. Two rebalances instead of one, but no
one stops consuming what does not move.

"Owns" means the settled claim of :mod:`.ownership`: a claim beaten by one of a newer generation
is stale and does not hold a partition back; a partition claimed by several members of the same
newest generation is held back from everyone until they have all let go of it. Kafka computes the
partitions to hold back exactly this way when all subscriptions are equal; when they differ it
compares the raw claims instead, which for conflicting claims can hand a partition to one claimant
while an equally new one still holds it. Here both cases use the settled claims.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping

from offsetlog.assignors.base import PartitionAssignor, RebalanceProtocol, Subscription
from offsetlog.assignors.errors import InvalidAssignmentError
from offsetlog.assignors.sticky import sticky_assign
from offsetlog.types import TopicPartition


class CooperativeStickyAssignor(PartitionAssignor):
    """The sticky assignment minus the partitions that still have another owner."""

    name = "cooperative-sticky"
    supported_protocols = (RebalanceProtocol.COOPERATIVE, RebalanceProtocol.EAGER)

    def assign_partitions(self, partitions_per_topic: dict[str, int],
                          subscriptions: dict[str, Subscription]) -> dict[str, list[TopicPartition]]:
        assignment, ownership = sticky_assign(partitions_per_topic, subscriptions)
        owner = ownership.owner
        return {member_id: [tp for tp in partitions if owner.get(tp, member_id) == member_id]
                for member_id, partitions in assignment.items()}


def validate_cooperative_assignment(subscriptions: Mapping[str, Subscription],
                                    assignment: Mapping[str, Iterable[TopicPartition]]) -> None:
    """Raise unless ``assignment`` is safe under the cooperative protocol (Kafka's
    ``ConsumerCoordinator.validateCooperativeAssignment``, which the group leader runs on the
    output of custom cooperative assignors).

    A partition is "added" to a member that gets it without listing it in ``owned_partitions``
    and "revoked" from a member that lists it without getting it. A partition both added and
    revoked would be consumed by two members at once.

    :raises InvalidAssignmentError: naming the partitions that are added and revoked at once
    """
    added: set[TopicPartition] = set()
    revoked: set[TopicPartition] = set()
    for member_id, sub in subscriptions.items():
        owned = set(sub.owned_partitions)
        assigned = set(assignment.get(member_id, ()))
        added |= assigned - owned
        revoked |= owned - assigned
    both = sorted(added & revoked)
    if both:
        raise InvalidAssignmentError(
            "under the cooperative protocol a partition must be revoked before it is reassigned; "
            f"these are still owned by other members: {', '.join(map(str, both))}")
