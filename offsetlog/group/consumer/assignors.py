"""The server-side assignors of the consumer group protocol: ``uniform`` and ``range``.

An assignor takes the members (their subscriptions and, for ``range``, instance ids), the
partition counts of the topics that exist, and the current *target* assignment (for
stickiness), and returns each member's new target: a frozenset of ``(topic, partition)``.
Every partition of a topic some member subscribes to goes to exactly one member subscribed to
it; topics that do not exist are left out.

``range`` is Kafka's (``org.apache.kafka.coordinator.group.assignor.RangeAssignor``): per
topic, the members subscribed to it in order (members with an instance id first, by instance
id, then the others by member id) take consecutive ranges of ``partitions // members``
partitions, the first ``partitions % members`` of them one more. It is not sticky, and it is
deterministic, so it gives Kafka's assignment for the same members.

``uniform`` spreads all subscribed partitions evenly over the members and keeps each member's
current partitions where it can. When every member subscribes to the same topics (a
homogeneous group) it follows Kafka's homogeneous builder: members, in an order, keep their
current partitions up to their quota (``total // members``, the first ``total % members``
members one more), and the partitions left over go, topic by topic in name order and
partition by partition, to members short of their quota. Kafka walks members (and topics) in
its hash maps' order, so which members get the one partition more is an accident of their ids'
hash codes there; any order gives an equally balanced assignment. Ours, without ``due``, is
member id order. With ``due`` (when each member's next heartbeat is expected, which the
coordinator knows: it told each member its interval) the order is chosen for speed:

* first the members that already hold more than the quota, the latest due first: they keep
  their one partition more, so no partition moves that need not, and where some must give one
  up it is those that heartbeat soonest, which learn it soonest;
* then the others, the soonest due first: the partitions more (a member that left, a topic
  that grew) go to the members that will hear of them first.

So counts are Kafka's (balanced within one), no order of Kafka's builder leaves more partitions
where they are (members holding one more keep it whenever the quota allows), and which member
gets a partition when several are equally good may differ.
Heterogeneous groups: current partitions are kept, the rest go to the eligible member with the
fewest partitions, then partitions move from a member to an eligible one with at least two
fewer until no such move is left.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass

TopicPartitions = frozenset  # of (topic, partition)


@dataclass(frozen=True)
class AssignorMember:
    """What an assignor sees of a member."""

    member_id: str
    topics: frozenset[str]
    instance_id: str | None = None
    rack_id: str | None = None


def _order(members: Mapping[str, AssignorMember]) -> list[str]:
    static = sorted((m.instance_id, m.member_id) for m in members.values()
                    if m.instance_id is not None)
    dynamic = sorted(m.member_id for m in members.values() if m.instance_id is None)
    return [mid for _, mid in static] + dynamic


def range_assign(members: Mapping[str, AssignorMember], topics: Mapping[str, int],
                 current: Mapping[str, TopicPartitions],
                 due: Mapping[str, float] | None = None) -> dict[str, TopicPartitions]:
    # Kafka's server-side range assignor is not sticky, and its order is fixed: neither the
    # current assignment nor when members heartbeat changes it
    del current, due
    order = _order(members)
    out: dict[str, set] = {mid: set() for mid in order}
    for topic in sorted({t for m in members.values() for t in m.topics if t in topics}):
        subscribers = [mid for mid in order if topic in members[mid].topics]
        count = topics[topic]
        quota, extra = divmod(count, len(subscribers))
        start = 0
        for mid in subscribers:
            n = quota + (1 if extra > 0 else 0)
            extra -= 1
            out[mid].update((topic, p) for p in range(start, min(start + n, count)))
            start += n
    return {mid: frozenset(ps) for mid, ps in out.items()}


def _subscribed(members: Mapping[str, AssignorMember], topics: Mapping[str, int]) -> list:
    """Every partition of a subscribed, existing topic: topics by name, partitions ascending."""
    names = sorted({t for m in members.values() for t in m.topics if t in topics})
    return [(t, p) for t in names for p in range(topics[t])]


def _kept(member: AssignorMember, topics: Mapping[str, int], owned) -> list:
    return sorted((t, p) for t, p in owned if t in member.topics and t in topics
                  and p < topics[t])


def uniform_assign(members: Mapping[str, AssignorMember], topics: Mapping[str, int],
                   current: Mapping[str, TopicPartitions],
                   due: Mapping[str, float] | None = None) -> dict[str, TopicPartitions]:
    """``due``: member id -> when its next heartbeat is expected (any unit, smaller is sooner);
    members left out are expected last. Only a homogeneous group's order reads it."""
    if not members:
        return {}
    subscriptions = {frozenset(m.topics & topics.keys()) for m in members.values()}
    if len(subscriptions) == 1:
        return _uniform_homogeneous(members, topics, current, due)
    return _uniform_heterogeneous(members, topics, current)


def _homogeneous_order(members, topics, current, quota: int, due) -> list[str]:
    """The members' order for the homogeneous builder (module docstring)."""
    if due is None:
        return sorted(members)
    later = float("inf")
    holders = {mid for mid in members
               if len(_kept(members[mid], topics, current.get(mid, ()))) > quota}
    others = [mid for mid in members if mid not in holders]
    return (sorted(holders, key=lambda m: (-due.get(m, later), m))
            + sorted(others, key=lambda m: (due.get(m, later), m)))


def _uniform_homogeneous(members, topics, current, due=None) -> dict[str, TopicPartitions]:
    every = _subscribed(members, topics)
    quota, extra = divmod(len(every), len(members))
    order = _homogeneous_order(members, topics, current, quota, due)
    taken: set = set()
    out: dict[str, list] = {}
    short: list[tuple[str, int]] = []
    for mid in order:
        want = quota + (1 if extra > 0 else 0)
        extra -= 1
        keep = [tp for tp in _kept(members[mid], topics, current.get(mid, ()))
                if tp not in taken][:want]
        taken.update(keep)
        out[mid] = keep
        if len(keep) < want:
            short.append((mid, want - len(keep)))
    free = iter(tp for tp in every if tp not in taken)
    for mid, n in short:
        for _ in range(n):
            tp = next(free, None)
            if tp is None:
                break
            out[mid].append(tp)
    return {mid: frozenset(ps) for mid, ps in out.items()}


def _uniform_heterogeneous(members, topics, current) -> dict[str, TopicPartitions]:
    order = sorted(members)
    owned: dict[str, set] = {mid: set() for mid in order}
    taken: set = set()
    for mid in order:
        for tp in _kept(members[mid], topics, current.get(mid, ())):
            if tp not in taken:
                taken.add(tp)
                owned[mid].add(tp)
    subscribers = {t: [mid for mid in order if t in members[mid].topics]
                   for t in {t for m in members.values() for t in m.topics if t in topics}}
    free = sorted((tp for tp in _subscribed(members, topics) if tp not in taken),
                  key=lambda tp: (len(subscribers[tp[0]]), tp))
    for tp in free:
        mid = min(subscribers[tp[0]], key=lambda m: (len(owned[m]), m))
        owned[mid].add(tp)
    # balance: move a partition to an eligible member with at least two fewer, fewest first
    moved = True
    while moved:
        moved = False
        for donor in sorted(order, key=lambda m: (-len(owned[m]), m)):
            for tp in sorted(owned[donor], reverse=True):
                to = min(subscribers[tp[0]], key=lambda m: (len(owned[m]), m))
                if len(owned[donor]) - len(owned[to]) > 1:
                    owned[donor].discard(tp)
                    owned[to].add(tp)
                    moved = True
                    break
            if moved:
                break
    return {mid: frozenset(ps) for mid, ps in owned.items()}


ASSIGNORS = {"uniform": uniform_assign, "range": range_assign}
#: group.consumer.assignors: the first is the default
DEFAULT_ASSIGNORS = ("uniform", "range")
