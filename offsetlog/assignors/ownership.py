"""Who owned what before this rebalance, as the sticky assignors read it from the subscriptions.

Each member reports ``owned_partitions`` and the ``generation_id`` they were assigned in. Claims
can conflict (a member that missed a rebalance still reports what it held), and Kafka's
``AbstractStickyAssignor`` settles them so:

* a claim on a partition of a topic no longer subscribed to by anyone, or that no longer exists,
  is dropped;
* a claim no other member makes stands, whatever its generation (Kafka since 3.5, KAFKA-14639:
  the claimant may have been late for a rebalance and still hold the partition; the assignor is
  not told the group's generation, so it could not tell a stale claim from a late one anyway);
* when several members claim one partition, the claim of the highest generation wins;
* when the highest generation is shared by several claimants, none of them keeps it (it cannot
  be known who really holds it), and it is assigned afresh.

Kafka settles claims pairwise in hash-map order, so with three claimants its answer can depend on
that order; here the rule above is applied to all claimants at once, which gives Kafka's answer
whenever Kafka's does not depend on the order.

Claims of members whose generation is older than the newest one also form Kafka's "previous
assignment", which the general sticky algorithm uses to move a partition back to where it was
when that helps balance.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from offsetlog.assignors.base import Subscription
from offsetlog.types import TopicPartition

#: owner recorded for a partition claimed by several members of the same (highest) generation
CONTESTED = object()


@dataclass
class Ownership:
    """The settled previous assignment.

    :ivar owned: member id -> the partitions it keeps a valid claim on
    :ivar owner: partition -> its valid owner's member id, or :data:`CONTESTED`
    :ivar previous: partition -> (member id, generation) of the newest claim older than the
        newest generation in the group (Kafka's ``prevAssignment``)
    """

    owned: dict[str, list[TopicPartition]] = field(default_factory=dict)
    owner: dict[TopicPartition, object] = field(default_factory=dict)
    previous: dict[TopicPartition, tuple[str, int]] = field(default_factory=dict)


def settle_ownership(partitions_per_topic: dict[str, int], subscriptions: dict[str, Subscription],
                     members: list[str]) -> Ownership:
    """Settle the members' claims; ``members`` fixes the order ties are met in."""
    newest = max((sub.generation_id for sub in subscriptions.values()), default=-1)
    result = Ownership(owned={member_id: [] for member_id in members})
    owner, previous = result.owner, result.previous
    top: dict[TopicPartition, int] = {}  # partition -> highest generation claiming it so far
    for member_id in members:
        sub = subscriptions[member_id]
        generation = sub.generation_id
        for tp in dict.fromkeys(sub.owned_partitions):  # a partition listed twice is one claim
            # Partitions that do not exist (any more) are no one's: Kafka filters claims on topics
            # it has no metadata for; a partition number past the count is filtered the same way.
            if not 0 <= tp.partition < partitions_per_topic.get(tp.topic, 0):
                continue
            best = top.get(tp)
            if best is None or generation > best:
                top[tp] = generation
                owner[tp] = member_id
            elif generation == best:
                owner[tp] = CONTESTED  # until a claim of a higher generation comes along
            if generation < newest:
                earlier = previous.get(tp)
                if earlier is None or generation > earlier[1]:
                    previous[tp] = (member_id, generation)
    owned = result.owned
    for tp, member_id in owner.items():
        if member_id is not CONTESTED:
            owned[member_id].append(tp)
    return result
