"""Sticky assignment when every member subscribes to the same topics (Kafka's
``ConstrainedAssignmentBuilder``): the fast path, linear in partitions plus a sort.

With ``P`` partitions and ``M`` members every member ends with ``floor(P/M)`` (min quota) or
``ceil(P/M)`` (max quota) partitions, and exactly ``P % M`` members reach the max quota.

1. Members, in member-id order, keep what they own up to their quota: all of it if that is below
   the min quota; the max quota while fewer than ``P % M`` members have claimed one; otherwise the
   min quota. A member keeps its lowest-numbered partitions first (partition, then topic), and
   gives up the rest.
2. The partitions nobody kept, sorted by topic then partition, are dealt round-robin to the
   members still below the min quota (sorted by id); once those are full, one each to the
   members at the min quota that may still go to the max quota, first come first served.

Kafka visits members in hash-map order in step 1; member-id order is used here so the result
does not depend on how a dict happened to be built. The rack-aware passes are left out.
"""

from __future__ import annotations

from collections import deque

from offsetlog.assignors.ordering import java_order
from offsetlog.types import TopicPartition


def constrained_assign(partitions_per_topic: dict[str, int], members: list[str],
                       owned: dict[str, list[TopicPartition]]) -> dict[str, list[TopicPartition]]:
    """Assign when all members share one subscription.

    :param members: member ids in Java order
    :param owned: member id -> settled owned partitions (see :mod:`.ownership`)
    """
    total = sum(partitions_per_topic.values())
    min_quota, members_over_min = divmod(total, len(members))
    max_quota = min_quota + (1 if members_over_min else 0)
    over_min = 0  # members given the max quota so far (only counts when min < max)

    assignment: dict[str, list[TopicPartition]] = {}
    under_min: list[str] = []  # members that still need partitions to reach the min quota
    at_min: deque[str] = deque()  # members at the min quota that may still take one more
    kept: set[TopicPartition] = set()

    topic_order = {topic: java_order(topic) for topic in partitions_per_topic}

    def keep_order(tp: TopicPartition) -> tuple[int, bytes]:  # partition first, then topic
        return (tp.partition, topic_order[tp.topic])

    for member_id in members:
        mine = sorted(owned.get(member_id, ()), key=keep_order)
        if len(mine) < min_quota:
            keep = mine
            under_min.append(member_id)
        elif len(mine) >= max_quota and over_min < members_over_min:
            keep = mine[:max_quota]
            over_min += 1
            if over_min == members_over_min:
                at_min.clear()  # every max-quota slot is taken
        else:
            keep = mine[:min_quota]
            if over_min < members_over_min:
                at_min.append(member_id)
        assignment[member_id] = keep
        kept.update(keep)

    # A TopicPartition equals and hashes as the plain (topic, partition) tuple, so kept
    # partitions are skipped without building them again.
    make = tuple.__new__  # TopicPartition(topic, p) without the NamedTuple constructor's overhead
    unassigned = [make(TopicPartition, (topic, p))
                  for topic in sorted(partitions_per_topic, key=java_order)
                  for p in range(partitions_per_topic[topic]) if (topic, p) not in kept]

    # under_min and at_min are already in member order: members were visited in that order.
    # The cursor walks under_min cyclically, as Kafka's iterator over a shrinking linked list does.
    cursor = 0
    for tp in unassigned:
        if cursor < len(under_min):
            member_id = under_min[cursor]
            cursor += 1
            from_under_min = True
        elif under_min:
            member_id = under_min[0]
            cursor = 1
            from_under_min = True
        elif at_min:
            member_id = at_min.popleft()
            from_under_min = False
        else:
            raise RuntimeError(f"sticky assignor bug: no member has room for {tp}")
        mine = assignment[member_id]
        mine.append(tp)
        if from_under_min and len(mine) == min_quota:
            cursor -= 1
            del under_min[cursor]
            at_min.append(member_id)
        elif len(mine) == max_quota:
            over_min += 1

    for member_id in under_min:
        if len(assignment[member_id]) != min_quota or over_min != members_over_min:
            raise RuntimeError(f"sticky assignor bug: {member_id!r} ends below the min quota")
    return assignment
