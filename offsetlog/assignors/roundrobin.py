"""The round-robin assignor (Kafka's ``RoundRobinAssignor``, protocol name ``roundrobin``).

All subscribed partitions, sorted by topic then partition, are dealt one at a time to the members
in member order (static members by instance id first, then the rest by member id), cycling. A
member not subscribed to a partition's topic is skipped, and the cycle resumes after the member
that took the partition. With identical subscriptions the counts differ by at most one; with
different subscriptions the result can be lopsided, e.g. members C0 (t0), C1 (t0, t1) and
C2 (t0, t1, t2) over t0, t1, t2 with 1, 2, 3 partitions get [t0p0], [t1p0] and
[t1p1, t2p0, t2p1, t2p2].
"""

from __future__ import annotations

from bisect import bisect_left

from offsetlog.assignors.base import PartitionAssignor, Subscription
from offsetlog.assignors.ordering import java_order, member_order
from offsetlog.types import TopicPartition


class RoundRobinAssignor(PartitionAssignor):
    """Deal sorted partitions to members in a cycle, skipping members not subscribed."""

    name = "roundrobin"

    def assign_partitions(self, partitions_per_topic: dict[str, int],
                          subscriptions: dict[str, Subscription]) -> dict[str, list[TopicPartition]]:
        assignment: dict[str, list[TopicPartition]] = {member_id: [] for member_id in subscriptions}
        ordered = member_order(subscriptions)
        # Positions (in the cycle) of each topic's subscribers, ascending. Finding the next
        # subscriber at or after the cursor is then a binary search instead of Kafka's
        # step-by-step skip, which costs O(members) per partition when subscriptions differ.
        positions: dict[str, list[int]] = {topic: [] for topic in partitions_per_topic}
        for position, member_id in enumerate(ordered):
            for topic in frozenset(subscriptions[member_id].topics):
                if topic in positions:
                    positions[topic].append(position)
        cursor = 0
        for topic in sorted(partitions_per_topic, key=java_order):
            candidates = positions[topic]
            for partition in range(partitions_per_topic[topic]):
                i = bisect_left(candidates, cursor)
                position = candidates[i] if i < len(candidates) else candidates[0]  # wrap around
                assignment[ordered[position]].append(TopicPartition(topic, partition))
                cursor = (position + 1) % len(ordered)
        return assignment
