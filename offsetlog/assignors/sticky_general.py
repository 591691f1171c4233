"""Sticky assignment when members subscribe to different topics (Kafka's
``GeneralAssignmentBuilder``, plus one step Kafka lacks).

1. Every member keeps the partitions it validly owns and still subscribes to.
2. Topics are ordered by how many members subscribe to them (fewest first, then by name); their
   unowned partitions go, in that order, each to the subscriber with the fewest partitions
   (ties: lowest member id).
3. Topics with a single subscriber, and members that already hold every partition they could
   and nothing anyone else could take, are set aside: nothing about them can change.
4. Balancing passes walk the partitions (first only the newly assigned ones, unless a member
   dropped a topic, then all of them) and move a partition whenever its holder has two or more
   partitions more than some other subscriber of its topic: back to the member that held it in an
   older generation if that member qualifies, otherwise to the least loaded subscriber. Passes
   repeat until one moves nothing.
5. Not in Kafka: what step 4 cannot fix with single moves is fixed with chains of moves
   (C gives B a partition, B gives A one), so the counts end as even as the subscriptions allow.

Moves are recorded per topic as (original holder -> current holder). Before moving a partition
from A to B, if some other partition of the same topic already went from B to A during this
rebalance, that one is sent back instead, so members never swap partitions of one topic.

Where this differs from Kafka, on purpose:

* Step 5. Kafka's result can be uneven beyond need (counts 1, 2, 3 where 2, 2, 2 is possible);
  balance comes first, so chains are worth the extra moves. When Kafka's result is already as
  even as possible, step 5 changes nothing.
* Kafka re-checks "is the assignment balanced?" before every partition, an O(partitions) scan.
  It is skipped here except for the O(1) "max - min <= 1" shortcut: when the assignment is
  balanced in Kafka's sense no partition qualifies for a move, so the outcome is the same.
* The least loaded subscriber of a topic is found with one lazy heap per distinct subscription
  rather than by walking all members: O(distinct subscriptions) per partition instead of
  O(members).
* When the partition to move from A to B had itself come from X earlier in this rebalance, and
  another partition of its topic went from B to X, Kafka moves that other one from X back to B:
  A stays as loaded as before, and the passes can go round in circles. Here both go home (the
  other one to B, this one to X), which does what was intended: A loses one, B gains one. Every
  move therefore lowers the imbalance, so the passes end, and Kafka's final "keep the old
  assignment if balancing did not improve it" check can never fire and is left out.
* A partition is moved back to its older-generation holder only if that member still subscribes
  to its topic (Kafka does not check, and could assign a topic to a member not subscribed to it).
"""

from __future__ import annotations

import heapq
from collections import deque

from offsetlog.assignors.base import Subscription
from offsetlog.assignors.ordering import java_order
from offsetlog.assignors.ownership import Ownership
from offsetlog.types import TopicPartition


class _GeneralBuilder:
    def __init__(self, partitions_per_topic: dict[str, int], subscriptions: dict[str, Subscription],
                 members: list[str], ownership: Ownership) -> None:
        self.partitions_per_topic = partitions_per_topic
        self.previous = ownership.previous
        self.members = members
        self.rank = {member_id: i for i, member_id in enumerate(members)}
        self.topics_of = {member_id: frozenset(t for t in subscriptions[member_id].topics
                                               if t in partitions_per_topic)
                          for member_id in members}
        self.consumers_of: dict[str, list[str]] = {topic: [] for topic in partitions_per_topic}
        for member_id in members:
            for topic in self.topics_of[member_id]:
                self.consumers_of[topic].append(member_id)

        # Members with the same topics form a class; each class keeps a heap of
        # (count, rank, member) with stale entries skipped on read.
        class_ids: dict[frozenset[str], int] = {}
        self.class_of: dict[str, int] = {}
        class_members: list[list[str]] = []
        for member_id in members:
            cid = class_ids.setdefault(self.topics_of[member_id], len(class_ids))
            if cid == len(class_members):
                class_members.append([])
            class_members[cid].append(member_id)
            self.class_of[member_id] = cid
        self.class_sizes = [len(m) for m in class_members]
        self.classes_of_topic: dict[str, list[int]] = {topic: [] for topic in partitions_per_topic}
        for topics, cid in class_ids.items():
            for topic in topics:
                self.classes_of_topic[topic].append(cid)

        # member -> topic -> the partitions of that topic it holds
        self.held: dict[str, dict[str, set[TopicPartition]]] = {member_id: {} for member_id in members}
        self.holder: dict[TopicPartition, str] = {}
        self.revocation_required = False
        for member_id in members:
            for tp in ownership.owned.get(member_id, ()):
                if tp.topic in self.topics_of[member_id]:
                    self.held[member_id].setdefault(tp.topic, set()).add(tp)
                    self.holder[tp] = member_id
                else:  # the member dropped this topic; someone else must take it over
                    self.revocation_required = True
        self.kept = dict(self.holder)  # partition -> the owner that kept it in step 1
        self.holders_of: dict[str, set[str]] = {topic: set() for topic in partitions_per_topic}
        for member_id, topics in self.held.items():
            for topic in topics:
                self.holders_of[topic].add(member_id)
        self.count = {member_id: sum(map(len, self.held[member_id].values())) for member_id in members}
        self.heaps = [[(self.count[m], self.rank[m], m) for m in ms] for ms in class_members]
        for heap in self.heaps:
            heapq.heapify(heap)

        # Balance bookkeeping over the members that take part in balancing (set up in build()).
        self.freq: dict[int, int] = {}
        self.lo = self.hi = 0
        self.tracked: set[str] = set()

        # tp -> (holder before balancing, current holder), and (topic, from, to) -> partitions
        self.moved: dict[TopicPartition, tuple[str, str]] = {}
        self.moved_between: dict[tuple[str, str, str], set[TopicPartition]] = {}
        # (member, topic) -> heap of (kept by member?, partition number, partition); see _pick
        self.pick_heaps: dict[tuple[str, str], list[tuple[bool, int, TopicPartition]]] = {}

    # -- counts --------------------------------------------------------------------------------

    def _least_loaded(self, topic: str) -> tuple[int, int, str]:
        """(count, rank, member) of the subscriber of ``topic`` Kafka's sorted set yields first."""
        best = None
        count = self.count
        for cid in self.classes_of_topic[topic]:
            heap = self.heaps[cid]
            while True:
                top = heap[0]
                if count[top[2]] == top[0]:
                    break
                heapq.heappop(heap)
            if best is None or top < best:
                best = top
        return best

    def _bump(self, member_id: str, delta: int) -> None:
        old = self.count[member_id]
        new = old + delta
        self.count[member_id] = new
        cid = self.class_of[member_id]
        heap = self.heaps[cid]
        heapq.heappush(heap, (new, self.rank[member_id], member_id))
        if len(heap) > 4 * self.class_sizes[cid] + 64:  # drop stale entries now and then
            members = {entry[2] for entry in heap}
            heap[:] = [(self.count[m], self.rank[m], m) for m in members]
            heapq.heapify(heap)
        if member_id in self.tracked:
            freq = self.freq
            freq[old] -= 1
            freq[new] = freq.get(new, 0) + 1
            self.lo = min(self.lo, new)
            self.hi = max(self.hi, new)
            while not freq.get(self.lo):
                self.lo += 1
            while not freq.get(self.hi):
                self.hi -= 1

    def _give(self, tp: TopicPartition, member_id: str) -> None:
        self.held[member_id].setdefault(tp.topic, set()).add(tp)
        self.holders_of[tp.topic].add(member_id)
        self.holder[tp] = member_id
        self._bump(member_id, +1)

    # -- moves -----------------------------------------------------------------------------------

    def _transfer(self, tp: TopicPartition, src: str, dst: str) -> None:
        record = self.moved.pop(tp, None)
        if record is not None:
            key = (tp.topic, record[0], record[1])
            group = self.moved_between[key]
            group.discard(tp)
            if not group:
                del self.moved_between[key]
        origin = record[0] if record is not None else src
        if origin != dst:
            self.moved[tp] = (origin, dst)
            self.moved_between.setdefault((tp.topic, origin, dst), set()).add(tp)
        src_topic = self.held[src][tp.topic]
        src_topic.remove(tp)
        if not src_topic:
            del self.held[src][tp.topic]
            self.holders_of[tp.topic].discard(src)
        self.held[dst].setdefault(tp.topic, set()).add(tp)
        self.holders_of[tp.topic].add(dst)
        self.holder[tp] = dst
        heap = self.pick_heaps.get((dst, tp.topic))
        if heap is not None:
            heapq.heappush(heap, (self.kept.get(tp) == dst, tp.partition, tp))
        self._bump(src, -1)
        self._bump(dst, +1)

    def _move(self, tp: TopicPartition, src: str, dst: str) -> None:
        record = self.moved.get(tp)
        origin = record[0] if record is not None else src
        back = self.moved_between.get((tp.topic, dst, origin))
        if not back:
            self._transfer(tp, src, dst)
            return
        other = min(back)  # Kafka takes whichever its hash set yields first
        if origin == src:
            self._transfer(other, src, dst)  # undo dst -> src instead of adding src -> dst
        else:
            self._transfer(other, origin, dst)  # both partitions go home
            self._transfer(tp, src, origin)

    def _balance(self, partitions: list[TopicPartition], movable: set[str]) -> None:
        topics_of, count, holder, previous = self.topics_of, self.count, self.holder, self.previous
        # `partitions` is grouped by topic; a topic none of whose holders has two or more
        # partitions more than its least loaded subscriber has nothing to move (neither
        # branch below can fire), so its partitions are skipped as a block.
        runs, start = [], 0
        for i in range(1, len(partitions) + 1):
            if i == len(partitions) or partitions[i].topic != partitions[start].topic:
                runs.append((partitions[start].topic, start, i))
                start = i
        while True:
            modified = False
            for topic, start, end in runs:
                if self.hi - self.lo <= 1:
                    return  # no member can give one to another: nothing left to do
                least = self._least_loaded(topic)  # valid until the next move
                if max(count[m] for m in self.holders_of[topic]) <= least[0] + 1:
                    continue
                for i in range(start, end):
                    tp = partitions[i]
                    holder_id = holder[tp]
                    earlier = previous.get(tp) if previous else None
                    if earlier is not None:
                        prev_id = earlier[0]
                        if (prev_id != holder_id and prev_id in movable and topic in topics_of[prev_id]
                                and count[holder_id] > count[prev_id] + 1):
                            self._move(tp, holder_id, prev_id)
                            modified, least = True, None
                            continue
                    if least is None:
                        least = self._least_loaded(topic)
                    if count[holder_id] > least[0] + 1:
                        self._move(tp, holder_id, least[2])
                        modified, least = True, None
                    if self.hi - self.lo <= 1:
                        return
            if not modified:
                return

    def _balance_along_chains(self, movable: set[str]) -> None:
        """Move partitions along chains until no member could shed one to a member with two or
        more fewer, directly or through others.

        Kafka stops at "no single move helps", which can leave e.g. counts 1, 2, 3 where
        A (x) <- B (x, y) <- C (y, z) could be 2, 2, 2 by C handing a y partition to B and B an x
        partition to A. Each chain found here is a shortest one (fewest partitions moved), its
        first member has two or more partitions more than its last, and the members in between
        keep their counts; so every chain lowers the imbalance, and when none is left the counts
        are as even as the subscriptions allow (no assignment has a lower maximum or higher
        minimum).
        """
        while self.hi - self.lo > 1:
            chain = self._find_chain(movable)
            if chain is None:
                return
            for src, topic, dst in chain:
                self._move(self._pick(src, topic), src, dst)

    def _pick(self, member_id: str, topic: str) -> TopicPartition:
        """The partition of ``topic`` that ``member_id`` should hand on along a chain: rather one
        it did not own before this rebalance (moving it costs no stickiness), then the lowest
        numbered. A lazy heap per (member, topic), made on first use, keeps this O(log n)."""
        key = (member_id, topic)
        heap = self.pick_heaps.get(key)
        if heap is None:
            heap = [(self.kept.get(tp) == member_id, tp.partition, tp) for tp in self.held[member_id][topic]]
            heapq.heapify(heap)
            self.pick_heaps[key] = heap
        holder = self.holder
        while holder[heap[0][2]] != member_id:  # it moved away since it was pushed
            heapq.heappop(heap)
        return heap[0][2]

    def _find_chain(self, movable: set[str]) -> list[tuple[str, str, str]] | None:
        """A shortest chain of (giver, topic, taker) steps from a member with at least ``level``
        partitions to one with at most ``level - 2``, trying levels from the top; None if there
        is no such chain at any level."""
        count, rank = self.count, self.rank
        for level in sorted({count[m] for m in movable}, reverse=True):
            if level - 2 < self.lo:
                return None
            sources = sorted((m for m in movable if count[m] >= level), key=rank.__getitem__)
            came_from: dict[str, tuple[str, str] | None] = dict.fromkeys(sources)
            seen_topics: set[str] = set()
            queue = deque(sources)
            while queue:
                giver = queue.popleft()
                for topic in sorted(self.held[giver].keys() - seen_topics, key=java_order):
                    seen_topics.add(topic)
                    for taker in self.consumers_of[topic]:
                        if taker in came_from:
                            continue
                        came_from[taker] = (giver, topic)
                        if count[taker] <= level - 2:
                            chain = []
                            while came_from[taker] is not None:
                                giver_of, via = came_from[taker]
                                chain.append((giver_of, via, taker))
                                taker = giver_of
                            return chain[::-1]
                        queue.append(taker)
        return None

    # -- the algorithm ---------------------------------------------------------------------------

    def build(self) -> dict[str, list[TopicPartition]]:
        ppt = self.partitions_per_topic
        consumers_of = self.consumers_of
        order = sorted(ppt, key=lambda topic: (len(consumers_of[topic]), java_order(topic)))
        all_partitions = [TopicPartition(topic, p) for topic in order for p in range(ppt[topic])]
        holder = self.holder
        unassigned = [tp for tp in all_partitions if tp not in holder]
        for tp in unassigned:
            self._give(tp, self._least_loaded(tp.topic)[2])

        # Only topics with two or more subscribers can move; only members that could gain a
        # partition, or hold one that could move, take part.
        movable_topics = {topic for topic, consumers in consumers_of.items() if len(consumers) >= 2}
        all_partitions = [tp for tp in all_partitions if tp.topic in movable_topics]
        unassigned = [tp for tp in unassigned if tp.topic in movable_topics]
        movable: set[str] = set()
        for member_id in self.members:
            capacity = sum(ppt[topic] for topic in self.topics_of[member_id])
            if self.count[member_id] < capacity or not movable_topics.isdisjoint(self.held[member_id]):
                movable.add(member_id)
        if not movable:
            return self._result()
        self.tracked = movable
        for member_id in movable:
            c = self.count[member_id]
            self.freq[c] = self.freq.get(c, 0) + 1
        self.lo = min(self.freq)
        self.hi = max(self.freq)

        # Moving only the new partitions first keeps owned ones in place where that suffices;
        # when a member dropped a topic, its owner changes anyway, so go straight to all.
        if not self.revocation_required:
            self._balance(unassigned, movable)
        self._balance(all_partitions, movable)
        self._balance_along_chains(movable)
        return self._result()

    def _result(self) -> dict[str, list[TopicPartition]]:
        return {member_id: [tp for partitions in self.held[member_id].values() for tp in partitions]
                for member_id in self.members}


def general_assign(partitions_per_topic: dict[str, int], subscriptions: dict[str, Subscription],
                   members: list[str], ownership: Ownership) -> dict[str, list[TopicPartition]]:
    """Assign when members' subscriptions differ.

    :param members: member ids in Java order (ties on load go to the lowest)
    :param ownership: the settled previous assignment (see :mod:`.ownership`)
    """
    return _GeneralBuilder(partitions_per_topic, subscriptions, members, ownership).build()
