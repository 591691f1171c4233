"""What members put in JoinGroup, what the leader computes, and how protocols are chosen."""

from __future__ import annotations

import pytest

from offsetlog import TopicPartition
from offsetlog.assignors import (
    InvalidAssignmentError,
    PartitionAssignor,
    RebalanceProtocol,
    get_assignor,
)
from offsetlog.errors import InvalidCommitError
from offsetlog.group import JoinGroupMember
from offsetlog.group.consumer_protocol import (
    decode_assignment,
    decode_subscription,
    encode_subscription,
)
from offsetlog.member.protocol import join_protocols, leader_assignments, topic_snapshot
from support.member_harness import GROUP, Recorder, check_exact_cover, partitions  # noqa: F401

T0, T1, T2 = (TopicPartition("t", p) for p in range(3))
ALL = partitions("t", 6)


def subs(protocols):
    return {name: decode_subscription(data) for name, data in protocols}


def test_cooperative_members_list_what_they_own():
    out = subs(join_protocols([get_assignor("cooperative-sticky")], RebalanceProtocol.COOPERATIVE,
                              ["t"], owned=[T1, T0], owned_generation=4, previous=[T2],
                              previous_generation=3))
    assert out["cooperative-sticky"]["owned_partitions"] == [T0, T1]
    assert out["cooperative-sticky"]["generation_id"] == 4


def test_eager_members_list_their_previous_assignment_only_to_eager_assignors():
    """Eager: nothing is owned at rejoin. sticky reads the previous assignment for stickiness;
    cooperative-sticky would hold those partitions back, so it gets none (as in Kafka)."""
    out = subs(join_protocols([get_assignor(n) for n in ("sticky", "cooperative-sticky", "range")],
                              RebalanceProtocol.EAGER, ["t"], owned=[], owned_generation=-1,
                              previous=[T2, T0], previous_generation=3))
    assert out["sticky"]["owned_partitions"] == [T0, T2] and out["sticky"]["generation_id"] == 3
    assert out["cooperative-sticky"]["owned_partitions"] == []
    assert out["cooperative-sticky"]["generation_id"] == -1
    assert all(s["topics"] == ["t"] for s in out.values())


def test_the_leader_assigns_every_member():
    members = [JoinGroupMember("m1", None, encode_subscription(["t"])),
               JoinGroupMember("m2", "inst", encode_subscription(["t", "u"])),
               JoinGroupMember("m3", None, encode_subscription(["v"]))]
    out = leader_assignments(get_assignor("range"), RebalanceProtocol.EAGER, {"t": 4, "u": 1},
                             members)
    decoded = {m: decode_assignment(b) for m, b in out.items()}
    assert set(decoded) == {"m1", "m2", "m3"} and decoded["m3"] == []
    assert sorted(decoded["m1"] + decoded["m2"]) == sorted(
        partitions("t", 4) | {TopicPartition("u", 0)})
    assert topic_snapshot({"t": 4, "u": 1}, members) == {"t": 4, "u": 1, "v": 0}


def test_a_cooperative_leader_refuses_an_assignment_that_moves_an_owned_partition():
    class Greedy(PartitionAssignor):  # claims to be cooperative, ignores ownership
        name = "greedy"
        supported_protocols = (RebalanceProtocol.COOPERATIVE,)

        def assign_partitions(self, partitions_per_topic, subscriptions):
            first = min(subscriptions)
            return {first: [TopicPartition("t", p) for p in range(partitions_per_topic["t"])]}

    members = [JoinGroupMember("a", None, encode_subscription(["t"])),
               JoinGroupMember("b", None, encode_subscription(["t"], owned_partitions=[T1],
                                                              generation_id=2))]
    with pytest.raises(InvalidAssignmentError, match="t-1"):
        leader_assignments(Greedy(), RebalanceProtocol.COOPERATIVE, {"t": 2}, members)
    # eager members revoked everything before rejoining, so the same assignment is fine there
    leader_assignments(Greedy(), RebalanceProtocol.EAGER, {"t": 2}, members)


def test_a_member_with_an_eager_assignor_runs_the_eager_protocol(harness):
    """cooperative-sticky listed first, but range is eager-only: the member revokes everything
    before each rebalance; the group votes for the first protocol everyone lists."""
    a = harness.member("a", assignors=("cooperative-sticky", "range"))
    harness.member("b", assignors=("cooperative-sticky", "range"))
    assert a.rebalance_protocol is RebalanceProtocol.EAGER
    harness.run_until(harness.stable)
    assert a.protocol_name == "cooperative-sticky"
    owned = sorted(a.assignment())
    harness.member("c", assignors=("range",))  # now only range is common
    harness.run_until(harness.stable)
    assert a.protocol_name == "range"
    assert ("revoked", owned) in [(k, p) for k, p, _ in a.listener.events]
    check_exact_cover(harness.live(), ALL)


def test_a_failing_assignor_is_raised_from_the_leaders_poll(harness):
    class Broken(PartitionAssignor):
        name = "broken"

        def assign_partitions(self, partitions_per_topic, subscriptions):
            return {"nobody": [TopicPartition("t", 0)]}

    a = harness.member("a", assignors=(Broken(),))
    harness.stalled.add(id(a))  # the harness would raise from its poll; we poll ourselves
    for _ in range(40):
        harness.step()
        try:
            a.poll()
        except InvalidAssignmentError:
            break
    else:
        pytest.fail("the assignor's error never reached poll()")
    assert a.assignment() == set()


def test_a_listener_error_is_raised_after_the_rebalance_step_completes(harness):
    class Failing(Recorder):
        def on_partitions_assigned(self, parts):
            super().on_partitions_assigned(parts)
            raise RuntimeError("service not ready")

    a = harness.member("a", listener=Failing())
    harness.stalled.add(id(a))
    for _ in range(40):
        harness.step()
        try:
            a.poll()
        except RuntimeError as e:
            assert str(e) == "service not ready"
            break
    else:
        pytest.fail("the listener's error never reached poll()")
    assert a.assignment() == ALL  # the assignment stands
    harness.stalled.discard(id(a))
    harness.run_until(harness.stable)


def test_bad_offsets_are_refused_at_once(harness):
    a = harness.member("a")
    harness.run_until(harness.stable)
    with pytest.raises(InvalidCommitError):
        a.commit_async({T0: -1})
    with pytest.raises(InvalidCommitError):
        a.commit_sync({T0: "7"})
    assert harness.store.fetch(GROUP) == {}
