"""The range assignor (Kafka's ``RangeAssignor``, protocol name ``range``).

Topic by topic: lay the topic's partitions out in order and its subscribers out in member order
(static members by instance id first, then the rest by member id, see
:func:`~offsetlog.assignors.ordering.member_order`), and give each subscriber a contiguous range.
With ``n`` partitions and ``m`` subscribers every subscriber gets ``n // m`` and the first
``n % m`` get one more, so 7 partitions over 5 members give 2, 2, 1, 1, 1.

Because each topic starts again from the first member, the same members get the extra partition
of every topic: partition ``i`` of topics with equal partition counts and subscribers lands on the
same member (co-partitioning, which joins rely on), at the price of balance across topics.
Kafka's rack-aware variant is not reproduced: offsetlog has no racks.
"""

from __future__ import annotations

from offsetlog.assignors.base import PartitionAssignor, Subscription
from offsetlog.assignors.ordering import member_order
from offsetlog.types import TopicPartition


class RangeAssignor(PartitionAssignor):
    """Per-topic contiguous ranges; the first ``n % m`` members get one extra partition."""

    name = "range"

    def assign_partitions(self, partitions_per_topic: dict[str, int],
                          subscriptions: dict[str, Subscription]) -> dict[str, list[TopicPartition]]:
        assignment: dict[str, list[TopicPartition]] = {member_id: [] for member_id in subscriptions}
        readers: dict[str, list[str]] = {topic: [] for topic in partitions_per_topic}
        for member_id in member_order(subscriptions):  # so each readers list is in member order
            for topic in subscriptions[member_id].topics:
                if topic in readers:
                    readers[topic].append(member_id)
        for topic, members in readers.items():
            n = partitions_per_topic[topic]
            partitions = [TopicPartition(topic, p) for p in range(n)]
            quota, extra = divmod(n, len(members))
            start = 0
            for i, member_id in enumerate(members):
                length = quota + (1 if i < extra else 0)
                if not length:
                    break  # everyone after gets nothing either
                assignment[member_id] += partitions[start:start + length]
                start += length
        return assignment
