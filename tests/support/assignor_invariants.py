"""The invariants every assignment must satisfy, checked after every ``assign`` call in the
assignor tests.

:func:`check_assignment` is the one checker. The autouse fixture :func:`check_every_assignment`
(import it into a test module to switch it on) wraps ``PartitionAssignor.assign`` for the duration
of each test, so every assignment any test computes is checked, whether or not the test
remembers to. A failure names the test (whose id carries the seed for randomized tests) and the
broken invariant.

It is written independently of the code under test: it re-derives the settled ownership, the
quotas and the balance conditions from the inputs rather than calling into offsetlog.assignors.

Invariants, for every assignor:

* every member id of ``subscriptions`` is a key, and no other key is;
* each member's list is sorted, without repeats, of existing partitions of topics it subscribes to;
* no partition goes to two members;
* every partition of a subscribed topic is assigned, except that cooperative-sticky may leave out
  a partition some member still lists as owned (it is revoked first, assigned next round).

Balance, per assignor:

* range: within each topic, its subscribers' counts differ by at most one, the extra ones going
  to the first members in member order;
* roundrobin: when all subscriptions are the same, counts differ by at most one;
* sticky, and cooperative-sticky when it held nothing back: the counts are as even as the
  subscriptions allow: no member could hand a partition to a member with two or more fewer,
  directly or along a chain of members each handing the next a partition of a topic it
  subscribes to (with identical subscriptions this is max - min <= 1).

Stickiness, for sticky and cooperative-sticky:

* with identical subscriptions, the number of partitions kept by their settled owner is the
  largest any balanced assignment could keep;
* never do two members swap partitions of one topic (one moves a -> b while another moves b -> a).

Cooperative safety, for cooperative-sticky: no partition goes to a member that does not own it
while another member lists it as owned.
"""

from __future__ import annotations

from collections import Counter, defaultdict

import pytest

from offsetlog.assignors import PartitionAssignor
from offsetlog.types import TopicPartition

STICKY_NAMES = {"sticky", "cooperative-sticky"}


def _java(s: str) -> bytes:
    return s.encode("utf-16-be", "surrogatepass")


def _member_order(subscriptions) -> list[str]:
    def key(m):
        iid = subscriptions[m].group_instance_id
        return (0, _java(iid), _java(m)) if iid is not None else (1, _java(m), b"")
    return sorted(subscriptions, key=key)


def settled_owners(partitions_per_topic, subscriptions) -> dict[TopicPartition, str | None]:
    """partition -> its valid previous owner (highest generation claim); None if the highest
    generation is claimed by several members. Partitions nobody claims are absent."""
    claims: dict[TopicPartition, list[tuple[int, str]]] = defaultdict(list)
    for member_id, sub in subscriptions.items():
        for tp in set(sub.owned_partitions):
            if 0 <= tp.partition < partitions_per_topic.get(tp.topic, 0):
                claims[tp].append((sub.generation_id, member_id))
    owners: dict[TopicPartition, str | None] = {}
    for tp, cl in claims.items():
        top = max(g for g, _ in cl)
        winners = [m for g, m in cl if g == top]
        owners[tp] = winners[0] if len(winners) == 1 else None
    return owners


def check_assignment(assignor_name: str, partitions_per_topic, subscriptions, assignment,
                     *, context: str = "") -> None:
    """Assert every invariant above; ``context`` is prefixed to failure messages."""
    where = f"[{context}] {assignor_name}: " if context else f"{assignor_name}: "

    def fail(message: str) -> None:
        pytest.fail(f"{where}{message}\n  partitions_per_topic={dict(partitions_per_topic)}"
                    f"\n  subscriptions={dict(subscriptions)}\n  assignment={assignment}", pytrace=False)

    if set(assignment) != set(subscriptions):
        fail(f"members {sorted(set(subscriptions) - set(assignment))} missing, "
             f"unknown {sorted(set(assignment) - set(subscriptions))}")

    subscribed_topics = {t for s in subscriptions.values() for t in s.topics
                         if partitions_per_topic.get(t, 0) > 0}
    everything = {TopicPartition(t, p) for t in subscribed_topics for p in range(partitions_per_topic[t])}
    holder: dict[TopicPartition, str] = {}
    for member_id, partitions in assignment.items():
        if not isinstance(partitions, list) or not all(isinstance(tp, TopicPartition) for tp in partitions):
            fail(f"{member_id!r} is not given a list of TopicPartition")
        if partitions != sorted(set(partitions)):
            fail(f"{member_id!r}'s list is unsorted or has repeats: {partitions}")
        topics = set(subscriptions[member_id].topics)
        for tp in partitions:
            if tp not in everything:
                fail(f"{tp} given to {member_id!r} is not a partition of a subscribed topic")
            if tp.topic not in topics:
                fail(f"{tp} given to {member_id!r}, which does not subscribe to {tp.topic!r}")
            if tp in holder:
                fail(f"{tp} given to both {holder[tp]!r} and {member_id!r}")
            holder[tp] = member_id

    listed = {tp for s in subscriptions.values() for tp in s.owned_partitions}
    missing = everything - set(holder)
    held_back = assignor_name == "cooperative-sticky" and bool(missing)
    if missing:
        if assignor_name != "cooperative-sticky":
            fail(f"partitions left unassigned: {sorted(missing)}")
        unowned = missing - listed
        if unowned:
            fail(f"partitions left out that nobody owns: {sorted(unowned)}")

    if assignor_name == "cooperative-sticky":
        listed_by: dict[TopicPartition, set[str]] = defaultdict(set)
        for m, s in subscriptions.items():
            for tp in s.owned_partitions:
                listed_by[tp].add(m)
        for member_id, partitions in assignment.items():
            for tp in partitions:
                if member_id not in listed_by.get(tp, {member_id}):
                    fail(f"{tp} given to {member_id!r} while {sorted(listed_by[tp])} still own it")

    counts = {m: len(p) for m, p in assignment.items()}
    identical = len({frozenset(s.topics) for s in subscriptions.values()}) <= 1

    if assignor_name == "range":
        order = _member_order(subscriptions)
        for topic in subscribed_topics:
            subscribers = [m for m in order if topic in subscriptions[m].topics]
            per = [sum(1 for tp in assignment[m] if tp.topic == topic) for m in subscribers]
            if per != sorted(per, reverse=True) or max(per) - min(per) > 1:
                fail(f"topic {topic!r} split unevenly over {subscribers}: {per}")
    elif assignor_name == "roundrobin":
        if identical and counts and max(counts.values()) - min(counts.values()) > 1:
            fail(f"identical subscriptions but counts {sorted(Counter(counts.values()).items())}")
    elif assignor_name in STICKY_NAMES and not held_back:
        uneven = _evening_chain(subscriptions, assignment, counts)
        if uneven:
            fail(f"unbalanced: {uneven[0]!r} ({counts[uneven[0]]} partitions) could shed one to "
                 f"{uneven[-1]!r} ({counts[uneven[-1]]}) along {uneven}")

    if assignor_name in STICKY_NAMES:
        _check_stickiness(partitions_per_topic, subscriptions, assignment, holder, identical,
                          everything, fail)


def _evening_chain(subscriptions, assignment, counts):
    """Members [a, ..., z] such that a could hand a partition to the next, and so on, with
    count(a) >= count(z) + 2, i.e. a chain of moves would even the counts out; None if the counts
    are as even as the subscriptions allow."""
    subscribers = defaultdict(list)
    for m in sorted(subscriptions):
        for t in set(subscriptions[m].topics):
            subscribers[t].append(m)
    held = {m: {tp.topic for tp in ps} for m, ps in assignment.items()}
    for level in sorted(set(counts.values()), reverse=True):
        parent = {m: None for m in subscriptions if counts[m] >= level}
        frontier = list(parent)
        while frontier:
            nxt = []
            for giver in frontier:
                for topic in held[giver]:
                    for taker in subscribers[topic]:
                        if taker in parent:
                            continue
                        parent[taker] = giver
                        if counts[taker] <= level - 2:
                            chain = [taker]
                            while parent[chain[-1]] is not None:
                                chain.append(parent[chain[-1]])
                            return chain[::-1]
                        nxt.append(taker)
            frontier = nxt
    return None


def _check_stickiness(partitions_per_topic, subscriptions, assignment, holder, identical, everything, fail):
    owners = settled_owners(partitions_per_topic, subscriptions)
    valid = {tp: m for tp, m in owners.items()
             if m is not None and tp in everything and tp.topic in subscriptions[m].topics}
    moves: set[tuple[str, str, str]] = set()
    for tp, old in valid.items():
        new = holder.get(tp)
        if new is not None and new != old:
            moves.add((tp.topic, old, new))
    for topic, a, b in moves:
        if (topic, b, a) in moves:
            fail(f"{a!r} and {b!r} swap partitions of {topic!r}")
    if identical and subscriptions and everything:
        total, n = len(everything), len(subscriptions)
        min_q, extra = divmod(total, n)
        owned = Counter(valid.values())
        best = sum(min(owned[m], min_q) for m in subscriptions)
        best += min(extra, sum(1 for m in subscriptions if owned[m] > min_q))
        kept = sum(1 for tp, m in valid.items() if holder.get(tp) == m)
        if kept != best:
            fail(f"kept {kept} partitions with their owners; a balanced assignment can keep {best}")


@pytest.fixture(autouse=True)
def check_every_assignment(request, monkeypatch):
    """Check every ``PartitionAssignor.assign`` result of the test with :func:`check_assignment`."""
    original = PartitionAssignor.assign
    calls = []

    def checked(self, partitions_per_topic, subscriptions):
        result = original(self, partitions_per_topic, subscriptions)
        check_assignment(self.name, partitions_per_topic, subscriptions, result,
                         context=request.node.nodeid)
        calls.append(self.name)
        return result

    monkeypatch.setattr(PartitionAssignor, "assign", checked)
    yield calls


# -- helpers shared by the assignor tests ------------------------------------------------------


def resubscribe(subscriptions, assignment, generation: int, *, topics=None):
    """The subscriptions members send after receiving ``assignment`` in ``generation``: same
    topics (or ``topics[member]`` where given), ``owned_partitions`` set to what they got."""
    from dataclasses import replace

    topics = topics or {}
    return {m: replace(s, topics=topics.get(m, s.topics), owned_partitions=assignment.get(m, []),
                       generation_id=generation)
            for m, s in subscriptions.items()}


def rebalance(assignor, partitions_per_topic, subscriptions, *, max_rounds: int = 4):
    """One rebalance as the group experiences it. For an eager assignor that is one ``assign``.
    For cooperative-sticky, partitions held back in a round are revoked by their owners, which
    triggers a follow-up round; rounds repeat (at most ``max_rounds``) until nothing is held back,
    as Kafka's CooperativeStickyAssignorTest does. Returns the final assignment."""
    result = assignor.assign(partitions_per_topic, subscriptions)
    if assignor.name != "cooperative-sticky":
        return result
    subscribed = {t for s in subscriptions.values() for t in s.topics}
    total = sum(n for t, n in partitions_per_topic.items() if t in subscribed)
    generation = max((s.generation_id for s in subscriptions.values()), default=0)
    for _ in range(max_rounds):
        if sum(len(p) for p in result.values()) == total:
            return result
        generation += 1
        subscriptions = resubscribe(subscriptions, result, generation)
        result = assignor.assign(partitions_per_topic, subscriptions)
    pytest.fail(f"cooperative-sticky still holds partitions back after {max_rounds} follow-up rounds")
