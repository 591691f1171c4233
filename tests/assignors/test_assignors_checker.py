"""The invariant checker must catch broken assignments, or every other assignor test would be
vacuous. Each case hands it one specific breakage, by hand or from a deliberately broken
assignor, and expects it to fail naming that breakage."""

from __future__ import annotations

import pytest

from offsetlog.assignors import (
    CooperativeStickyAssignor,
    PartitionAssignor,
    RangeAssignor,
    RoundRobinAssignor,
    StickyAssignor,
    Subscription,
)
from offsetlog.assignors.sticky import sticky_assign
from offsetlog.types import TopicPartition
from support.assignor_invariants import check_assignment, check_every_assignment  # noqa: F401

Failed = pytest.fail.Exception


def tp(topic: str, partition: int) -> TopicPartition:
    return TopicPartition(topic, partition)


def assert_caught(name, ppt, subs, assignment, message):
    with pytest.raises(Failed, match=message):
        check_assignment(name, ppt, subs, assignment)


TWO = {"a": Subscription(["t"]), "b": Subscription(["t"])}


def test_a_correct_assignment_passes():
    check_assignment("range", {"t": 3}, TWO, {"a": [tp("t", 0), tp("t", 1)], "b": [tp("t", 2)]})


@pytest.mark.parametrize("assignment,message", [
    ({"a": [tp("t", 0), tp("t", 1), tp("t", 2)]}, "missing"),
    ({"a": [tp("t", 0), tp("t", 1)], "b": [tp("t", 2)], "c": []}, "unknown"),
    ({"a": [tp("t", 0), tp("t", 1)], "b": [tp("t", 1), tp("t", 2)]}, "both"),
    ({"a": [tp("t", 1), tp("t", 0)], "b": [tp("t", 2)]}, "unsorted"),
    ({"a": [tp("t", 0), tp("t", 0)], "b": [tp("t", 1), tp("t", 2)]}, "repeats"),
    ({"a": [tp("t", 0), tp("t", 1)], "b": [tp("t", 2), tp("t", 3)]}, "not a partition"),
    ({"a": [tp("t", 0), tp("t", 1)], "b": []}, "unassigned"),
    ({"a": [tp("t", 0)], "b": [tp("t", 1), tp("t", 2)]}, "unevenly"),
    ({"a": [("t", 0), ("t", 1)], "b": [("t", 2)]}, "TopicPartition"),
])
def test_range_breakages(assignment, message):
    assert_caught("range", {"t": 3}, TWO, assignment, message)


def test_partition_of_a_topic_the_member_does_not_read():
    subs = {"a": Subscription(["t"]), "b": Subscription(["u"])}
    assert_caught("roundrobin", {"t": 1, "u": 1}, subs, {"a": [tp("u", 0)], "b": [tp("t", 0)]}, "does not subscribe")


def test_roundrobin_unbalanced_with_identical_subscriptions():
    assert_caught("roundrobin", {"t": 4}, TWO, {"a": [tp("t", 0), tp("t", 1), tp("t", 2)], "b": [tp("t", 3)]},
                  "identical subscriptions")


def test_sticky_unbalanced_by_a_single_move():
    subs = {"a": Subscription(["t", "u"]), "b": Subscription(["t"])}
    assert_caught("sticky", {"t": 3, "u": 1}, subs,
                  {"a": [tp("t", 0), tp("t", 1), tp("u", 0)], "b": [tp("t", 2)]}, "unbalanced")


def test_sticky_unbalanced_only_along_a_chain():
    # A reads x; B reads x, y; C reads y, z. Counts 1, 2, 3 are locally balanced (no single move
    # helps) but C -> B -> A would make them 2, 2, 2.
    subs = {"A": Subscription(["x"]), "B": Subscription(["x", "y"]), "C": Subscription(["y", "z"])}
    ppt = {"x": 2, "y": 2, "z": 2}
    uneven = {"A": [tp("x", 0)], "B": [tp("x", 1), tp("y", 0)], "C": [tp("y", 1), tp("z", 0), tp("z", 1)]}
    assert_caught("sticky", ppt, subs, uneven, "along")
    check_assignment("sticky", ppt, subs,
                     {"A": [tp("x", 0), tp("x", 1)], "B": [tp("y", 0), tp("y", 1)], "C": [tp("z", 0), tp("z", 1)]})


def test_sticky_that_moves_more_than_needed():
    subs = {"a": Subscription(["t"], owned_partitions=[tp("t", 0), tp("t", 1)], generation_id=1),
            "b": Subscription(["t"], owned_partitions=[tp("t", 2), tp("t", 3)], generation_id=1),
            "c": Subscription(["t"], generation_id=1)}
    assert_caught("sticky", {"t": 6}, subs,
                  {"a": [tp("t", 0), tp("t", 4)], "b": [tp("t", 2), tp("t", 3)], "c": [tp("t", 1), tp("t", 5)]},
                  "kept 3 partitions .* can keep 4")


def test_sticky_keeping_a_stale_claim_over_the_newer_one_counts_as_moving():
    subs = {"a": Subscription(["t"], owned_partitions=[tp("t", 0)], generation_id=2),
            "b": Subscription(["t"], owned_partitions=[tp("t", 0)], generation_id=1)}
    assert_caught("sticky", {"t": 2}, subs, {"a": [tp("t", 1)], "b": [tp("t", 0)]}, "kept 0")


def test_sticky_swapping_partitions_of_one_topic():
    subs = {"a": Subscription(["t", "u"], owned_partitions=[tp("t", 0), tp("u", 0)], generation_id=1),
            "b": Subscription(["t", "u"], owned_partitions=[tp("t", 1), tp("u", 1)], generation_id=1)}
    assert_caught("sticky", {"t": 2, "u": 2}, subs,
                  {"a": [tp("t", 1), tp("u", 0)], "b": [tp("t", 0), tp("u", 1)]}, "swap")


def test_cooperative_handing_over_a_partition_its_owner_still_holds():
    subs = {"a": Subscription(["t"], owned_partitions=[tp("t", 0), tp("t", 1)], generation_id=1),
            "b": Subscription(["t"], generation_id=1)}
    assert_caught("cooperative-sticky", {"t": 2}, subs, {"a": [tp("t", 0)], "b": [tp("t", 1)]}, "still own")
    check_assignment("cooperative-sticky", {"t": 2}, subs, {"a": [tp("t", 0)], "b": []})


def test_cooperative_leaving_out_a_partition_nobody_owns():
    subs = {"a": Subscription(["t"], owned_partitions=[tp("t", 0)], generation_id=1),
            "b": Subscription(["t"], generation_id=1)}
    assert_caught("cooperative-sticky", {"t": 3}, subs, {"a": [tp("t", 0)], "b": [tp("t", 1)]}, "nobody owns")


# -- the autouse wrapper catches broken assignors through assign() ------------------------------

class RangeExtraToTheLast(RangeAssignor):
    """Range with the classic off-by-one: the extra partitions go to the last members."""

    def assign_partitions(self, partitions_per_topic, subscriptions):
        result = super().assign_partitions(partitions_per_topic, subscriptions)
        members = sorted(subscriptions)
        flipped = {m: [] for m in members}
        for topic, n in partitions_per_topic.items():
            readers = [m for m in members if topic in subscriptions[m].topics]
            counts = [sum(p.topic == topic for p in result[m]) for m in readers][::-1]
            start = 0
            for m, c in zip(readers, counts):
                flipped[m] += [tp(topic, p) for p in range(start, start + c)]
                start += c
        return flipped


class RoundRobinWithoutSkipping(RoundRobinAssignor):
    """Deals to every member in turn, subscribed or not, dropping what a member cannot take."""

    def assign_partitions(self, partitions_per_topic, subscriptions):
        members = sorted(subscriptions)
        result = {m: [] for m in members}
        i = 0
        for topic in sorted(partitions_per_topic):
            for p in range(partitions_per_topic[topic]):
                m = members[i % len(members)]
                if topic in subscriptions[m].topics:
                    result[m].append(tp(topic, p))
                i += 1
        return result


class ForgetfulSticky(StickyAssignor):
    """Balanced but ignores ownership, as if every member were new."""

    def assign_partitions(self, partitions_per_topic, subscriptions):
        fresh = {m: Subscription(s.topics) for m, s in subscriptions.items()}
        return sticky_assign(partitions_per_topic, fresh)[0]


class ImpatientCooperative(CooperativeStickyAssignor):
    """Cooperative in name only: returns the eager sticky result."""

    def assign_partitions(self, partitions_per_topic, subscriptions):
        return sticky_assign(partitions_per_topic, subscriptions)[0]


def test_wrapper_catches_range_with_extra_partitions_at_the_end():
    with pytest.raises(Failed, match="unevenly"):
        RangeExtraToTheLast().assign({"t": 7}, {f"c{i}": Subscription(["t"]) for i in range(5)})


def test_wrapper_catches_roundrobin_that_does_not_skip():
    subs = {"C0": Subscription(["t0"]), "C1": Subscription(["t0", "t1"]), "C2": Subscription(["t0", "t1", "t2"])}
    with pytest.raises(Failed, match="unassigned"):
        RoundRobinWithoutSkipping().assign({"t0": 1, "t1": 2, "t2": 3}, subs)


def test_wrapper_catches_a_sticky_assignor_that_forgets_ownership():
    subs = {"a": Subscription(["t"], owned_partitions=[tp("t", 2), tp("t", 3)], generation_id=1),
            "b": Subscription(["t"], generation_id=1)}
    with pytest.raises(Failed, match="kept"):
        ForgetfulSticky().assign({"t": 4}, subs)


def test_wrapper_catches_a_cooperative_assignor_that_does_not_wait_for_revocation():
    subs = {"a": Subscription(["t"], owned_partitions=[tp("t", 0), tp("t", 1)], generation_id=1),
            "b": Subscription(["t"], generation_id=1)}
    with pytest.raises(Failed, match="still own"):
        ImpatientCooperative().assign({"t": 2}, subs)


def test_wrapper_checks_custom_assignors_too():
    class Lazy(PartitionAssignor):
        name = "lazy"

        def assign_partitions(self, partitions_per_topic, subscriptions):
            return {}

    with pytest.raises(Failed, match="unassigned"):
        Lazy().assign({"t": 1}, {"a": Subscription(["t"])})


def test_wrapper_records_every_call(check_every_assignment):  # noqa: F811 (the fixture)
    RangeAssignor().assign({"t": 1}, {"a": Subscription(["t"])})
    StickyAssignor().assign({"t": 1}, {"a": Subscription(["t"])})
    assert check_every_assignment == ["range", "sticky"]
