"""CooperativeStickyAssignor round by round: what it holds back, from whom, and for how long;
and validate_cooperative_assignment, the check a group leader runs on cooperative results.
(Full rebalances, follow-up rounds included, run in test_assignors_sticky.py.)"""

from __future__ import annotations

import pytest

from offsetlog.assignors import (
    CooperativeStickyAssignor,
    InvalidAssignmentError,
    StickyAssignor,
    Subscription,
    validate_cooperative_assignment,
)
from offsetlog.errors import OffsetlogError
from offsetlog.types import TopicPartition
from support.assignor_invariants import check_every_assignment, resubscribe  # noqa: F401


def tp(topic: str, partition: int) -> TopicPartition:
    return TopicPartition(topic, partition)


coop = CooperativeStickyAssignor()
GEN = 1


def test_partition_claimed_twice_in_one_generation_is_held_back_from_everyone():
    subs = {"consumer1": Subscription(["topic"], owned_partitions=[tp("topic", 0), tp("topic", 1)], generation_id=GEN),
            "consumer2": Subscription(["topic"], owned_partitions=[tp("topic", 0), tp("topic", 2)], generation_id=GEN),
            "consumer3": Subscription(["topic"], generation_id=GEN)}
    first = coop.assign({"topic": 3}, subs)
    assert first == {"consumer1": [tp("topic", 1)], "consumer2": [tp("topic", 2)], "consumer3": []}
    # Both claimants revoke topic-0 (it is not in their new assignment); next round it is free.
    second = coop.assign({"topic": 3}, resubscribe(subs, first, GEN + 1))
    assert second == {"consumer1": [tp("topic", 1)], "consumer2": [tp("topic", 2)], "consumer3": [tp("topic", 0)]}


def test_partition_claimed_twice_with_unequal_shares():
    subs = {"consumer1": Subscription(["topic"], owned_partitions=[tp("topic", 0), tp("topic", 1)], generation_id=GEN),
            "consumer2": Subscription(["topic"], owned_partitions=[tp("topic", 0), tp("topic", 2)], generation_id=GEN),
            "consumer3": Subscription(["topic"], generation_id=GEN)}
    assert coop.assign({"topic": 4}, subs) == {"consumer1": [tp("topic", 1), tp("topic", 3)],
                                               "consumer2": [tp("topic", 2)], "consumer3": []}


def test_contested_partition_is_held_back_in_the_general_algorithm_too():
    # Different subscriptions (consumer3 also reads "other"), so the general algorithm runs.
    subs = {"consumer1": Subscription(["topic"], owned_partitions=[tp("topic", 0)], generation_id=GEN),
            "consumer2": Subscription(["topic"], owned_partitions=[tp("topic", 0)], generation_id=GEN),
            "consumer3": Subscription(["topic", "other"], generation_id=GEN)}
    result = coop.assign({"topic": 3, "other": 1}, subs)
    assert tp("topic", 0) not in {p for ps in result.values() for p in ps}
    sticky = StickyAssignor().assign({"topic": 3, "other": 1}, subs)
    assert tp("topic", 0) in {p for ps in sticky.values() for p in ps}  # the eager one assigns it


def test_members_keep_what_they_own():
    subs = {"consumer1": Subscription(["topic1"], owned_partitions=[tp("topic1", 0)], generation_id=GEN),
            "consumer2": Subscription(["topic1"], owned_partitions=[tp("topic1", 1)], generation_id=GEN),
            "consumer3": Subscription(["topic1"], generation_id=GEN)}
    assert coop.assign({"topic1": 3}, subs) == {"consumer1": [tp("topic1", 0)], "consumer2": [tp("topic1", 1)],
                                                "consumer3": [tp("topic1", 2)]}


def test_joining_members_wait_for_partitions_that_must_move():
    topics = ["topic1", "topic2"]
    owned1 = [tp("topic1", 0), tp("topic1", 2), tp("topic2", 1), tp("topic2", 3)]
    owned2 = [tp("topic1", 1), tp("topic2", 0), tp("topic2", 2)]
    subs = {"consumer1": Subscription(topics, owned_partitions=owned1, generation_id=GEN),
            "consumer2": Subscription(topics, owned_partitions=owned2, generation_id=GEN),
            "consumer3": Subscription(topics, generation_id=GEN),
            "consumer4": Subscription(topics, generation_id=GEN)}
    ppt = {"topic1": 3, "topic2": 4}
    sticky = StickyAssignor().assign(ppt, subs)
    assert sticky == {"consumer1": [tp("topic1", 0), tp("topic2", 1)],
                      "consumer2": [tp("topic1", 1), tp("topic2", 0)],
                      "consumer3": [tp("topic1", 2), tp("topic2", 3)],
                      "consumer4": [tp("topic2", 2)]}
    first = coop.assign(ppt, subs)
    assert first == {"consumer1": [tp("topic1", 0), tp("topic2", 1)],
                     "consumer2": [tp("topic1", 1), tp("topic2", 0)],
                     "consumer3": [], "consumer4": []}
    second = coop.assign(ppt, resubscribe(subs, first, GEN + 1))
    assert second == sticky


def test_transfer_in_the_general_algorithm_is_held_back():
    # b also reads y, so subscriptions differ; a owns all of x and must hand one to b.
    subs = {"a": Subscription(["x"], owned_partitions=[tp("x", p) for p in range(4)], generation_id=GEN),
            "b": Subscription(["x", "y"], generation_id=GEN)}
    ppt = {"x": 4, "y": 0}
    sticky = StickyAssignor().assign(ppt, subs)
    assert [len(sticky["a"]), len(sticky["b"])] == [2, 2]
    first = coop.assign(ppt, subs)
    assert first == {"a": sticky["a"], "b": []}
    second = coop.assign(ppt, resubscribe(subs, first, GEN + 1))
    assert second == sticky


def test_stale_claim_does_not_hold_a_partition_back():
    # consumer2 missed a generation and still lists topic-0; consumer1's newer claim wins and it
    # keeps topic-0, as in Kafka: the stale member is told to give it up.
    subs = {"consumer1": Subscription(["topic"], owned_partitions=[tp("topic", 0)], generation_id=5),
            "consumer2": Subscription(["topic"], owned_partitions=[tp("topic", 0), tp("topic", 1)], generation_id=4)}
    assert coop.assign({"topic": 2}, subs) == {"consumer1": [tp("topic", 0)], "consumer2": [tp("topic", 1)]}


def test_stale_claimant_does_not_get_a_partition_its_newer_owner_still_holds():
    # consumer2 (older generation) would be handed topic-1 for balance, but consumer1 (newer)
    # still owns it: held back, even though consumer2 lists it too.
    subs = {"consumer1": Subscription(["topic"], owned_partitions=[tp("topic", 0), tp("topic", 1)], generation_id=5),
            "consumer2": Subscription(["topic"], owned_partitions=[tp("topic", 1)], generation_id=4)}
    assert StickyAssignor().assign({"topic": 2}, subs) == {"consumer1": [tp("topic", 0)], "consumer2": [tp("topic", 1)]}
    assert coop.assign({"topic": 2}, subs) == {"consumer1": [tp("topic", 0)], "consumer2": []}


def test_lone_claim_of_an_older_generation_still_holds_its_partitions_back():
    """A claim that no other member contests counts, however old its generation (Kafka since
    3.5, KAFKA-14639: ``AbstractStickyAssignor.allSubscriptionsEqual`` lets "a member continue to
    hold on to its partition if there are no other owners", for both algorithms; Kafka 2.8 to
    3.4 dropped every claim below the highest generation, KAFKA-12984; Kafka's own test of the
    rule is ported as test_assignors_sticky.py::test_no_reassignment_of_current_members). The
    older claim may be a member that missed a rebalance with REBALANCE_IN_PROGRESS and still
    holds its partitions, so they are held back until it revokes them rather than handed to
    someone else at once.

    This is the assignor's half of the churn failure of seeds 665 and 3391208204 (a static
    member that missed a join phase claims partitions it will never revoke); the fix is the
    coordinator's (a static replacement rebalances while partitions are held back for the old
    process, and the sync deadline does when it never synced; see test_group_static.py), not
    this rule.
    Note that the assignor cannot tell such a claim is stale at all when every other member
    is new (generation -1), as in seed 665: the claim is then the newest one it sees."""
    # s claims t-0..2 at generation 9; a holds t-3 at 10; c is new
    s = Subscription(["t"], owned_partitions=[tp("t", 0), tp("t", 1), tp("t", 2)], generation_id=9)
    a = Subscription(["t"], owned_partitions=[tp("t", 3)], generation_id=10)
    subs = {"s": s, "a": a, "c": Subscription(["t"])}
    assert StickyAssignor().assign({"t": 4}, subs)["c"] == [tp("t", 2)]
    assert coop.assign({"t": 4}, subs) == {"s": [tp("t", 0), tp("t", 1)], "a": [tp("t", 3)], "c": []}
    # the general algorithm (subscriptions differ): t-0 would move from s to a, and waits
    subs = {"s": s, "a": a, "c": Subscription(["t", "x"])}
    assert StickyAssignor().assign({"t": 4, "x": 1}, subs)["a"] == [tp("t", 0), tp("t", 3)]
    assert coop.assign({"t": 4, "x": 1}, subs) == {"s": [tp("t", 1), tp("t", 2)], "a": [tp("t", 3)],
                                                   "c": [tp("x", 0)]}


def test_partitions_of_a_topic_nobody_reads_any_more_are_not_held_back():
    subs = {"a": Subscription(["y"], owned_partitions=[tp("x", 0)], generation_id=GEN),
            "b": Subscription(["y"], generation_id=GEN)}
    assert coop.assign({"x": 1, "y": 2}, subs) == {"a": [tp("y", 0)], "b": [tp("y", 1)]}


def test_topic_dropped_by_its_owner_is_held_back_until_revoked():
    subs = {"a": Subscription(["y"], owned_partitions=[tp("x", 0)], generation_id=GEN),
            "b": Subscription(["x", "y"], generation_id=GEN)}
    first = coop.assign({"x": 1, "y": 2}, subs)
    assert tp("x", 0) not in first["b"]
    second = coop.assign({"x": 1, "y": 2}, resubscribe(subs, first, GEN + 1))
    assert tp("x", 0) in second["b"]


def test_validate_accepts_cooperative_output():
    subs = {"consumer1": Subscription(["t"], owned_partitions=[tp("t", 0), tp("t", 1)], generation_id=GEN),
            "consumer2": Subscription(["t"], generation_id=GEN)}
    validate_cooperative_assignment(subs, coop.assign({"t": 2}, subs))


def test_validate_rejects_reassigning_an_owned_partition():
    subs = {"consumer1": Subscription(["t"], owned_partitions=[tp("t", 0), tp("t", 1)], generation_id=GEN),
            "consumer2": Subscription(["t"], generation_id=GEN)}
    eager = StickyAssignor().assign({"t": 2}, subs)
    with pytest.raises(InvalidAssignmentError, match="t-1") as info:
        validate_cooperative_assignment(subs, eager)
    assert isinstance(info.value, OffsetlogError)
