"""The sticky assignor (Kafka's ``StickyAssignor``, protocol name ``sticky``).

Goals, in order: (1) balance: partition counts differ by at most one when all members subscribe
to the same topics, and no partition could move to a subscriber with two or more fewer otherwise;
(2) stickiness: within that, as many partitions as possible stay with the member that owns them.

The previous assignment comes from each member's ``owned_partitions`` and ``generation_id``
(see :mod:`.ownership` for how conflicting claims are settled). When all members subscribe to the
same topics the linear :mod:`.sticky_constrained` algorithm runs, otherwise the general one in
:mod:`.sticky_general`. It runs under the eager protocol: members give everything up before the
rebalance and take back what they are assigned; :mod:`.cooperative` adapts it for cooperative
rebalancing.
"""

from __future__ import annotations

from collections.abc import Iterable

from offsetlog.assignors.base import PartitionAssignor, Subscription
from offsetlog.assignors.ordering import sorted_java
from offsetlog.assignors.ownership import Ownership, settle_ownership
from offsetlog.assignors.sticky_constrained import constrained_assign
from offsetlog.assignors.sticky_general import general_assign
from offsetlog.types import TopicPartition


def sticky_assign(partitions_per_topic: dict[str, int], subscriptions: dict[str, Subscription]
                  ) -> tuple[dict[str, Iterable[TopicPartition]], Ownership]:
    """The sticky assignment and the settled previous ownership it started from.

    Takes what :meth:`PartitionAssignor.assign` hands :meth:`~PartitionAssignor.assign_partitions`:
    only subscribed topics, each with at least one partition.
    """
    members = sorted_java(subscriptions)
    ownership = settle_ownership(partitions_per_topic, subscriptions, members)
    if not members:
        return {}, ownership
    # Kafka compares the subscribed topic lists as given, topics unknown to the cluster included.
    first = frozenset(subscriptions[members[0]].topics)
    if all(frozenset(subscriptions[m].topics) == first for m in members):
        return constrained_assign(partitions_per_topic, members, ownership.owned), ownership
    return general_assign(partitions_per_topic, subscriptions, members, ownership), ownership


class StickyAssignor(PartitionAssignor):
    """Balanced first, then as sticky as possible; eager rebalancing."""

    name = "sticky"

    def assign_partitions(self, partitions_per_topic: dict[str, int],
                          subscriptions: dict[str, Subscription]) -> dict[str, Iterable[TopicPartition]]:
        assignment, _ = sticky_assign(partitions_per_topic, subscriptions)
        return assignment
