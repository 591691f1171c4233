"""The consumer group protocol's coordinator (KIP-848), sans-IO: joins, epochs, incremental
revocation, fencing, leaving, static members, deadlines, records and replay."""

from __future__ import annotations

import pytest

from offsetlog.errors import FencedInstanceIdError, UnknownMemberIdError, UnsupportedVersionError
from offsetlog.group.consumer import ConsumerGroupConfig, ConsumerGroupCoordinator
from offsetlog.group.consumer.assignors import AssignorMember, range_assign, uniform_assign
from offsetlog.group.consumer.errors import (
    FencedMemberEpochError,
    InvalidRequestError,
    StaleMemberEpochError,
    UnreleasedInstanceIdError,
    UnsupportedAssignorError,
)
from offsetlog.group.errors import GroupIdNotFoundError, GroupMaxSizeReachedError

TOPICS = {"t": 6, "u": 3}


def tps(topic, *ps):
    return frozenset((topic, p) for p in ps)


class Client:
    """A member as a well-behaved client runs it: it owns what its last assignment said and
    reports that in every heartbeat."""

    def __init__(self, coordinator, member_id, topics=("t",), instance_id=None, group="g",
                 assignor=None, rebalance_timeout_ms=30_000):
        self.c, self.member_id, self.topics, self.instance_id = (coordinator, member_id,
                                                                 topics, instance_id)
        self.group, self.assignor, self.rto = group, assignor, rebalance_timeout_ms
        self.epoch, self.owned = 0, frozenset()

    def beat(self, now, metadata=TOPICS, **kw):
        joining = self.epoch == 0
        r = self.c.heartbeat(
            self.group, member_id=self.member_id, member_epoch=self.epoch, topics=metadata,
            now_ms=now, instance_id=self.instance_id,
            rebalance_timeout_ms=self.rto if joining else -1,
            subscribed_topic_names=self.topics if joining else None,
            server_assignor=self.assignor if joining else None,
            owned=frozenset() if joining else self.owned, **kw)
        resp = r.response
        if resp.error is None:
            self.epoch = resp.member_epoch
            if resp.assignment is not None:
                self.owned = resp.assignment
        return resp

    def leave(self, now, epoch=-1):
        resp = self.c.heartbeat(self.group, member_id=self.member_id, member_epoch=epoch,
                                topics=TOPICS, now_ms=now, instance_id=self.instance_id)
        self.owned = frozenset()
        return resp.response


@pytest.fixture
def c():
    return ConsumerGroupCoordinator(ConsumerGroupConfig(max_size=3))


def test_defaults_are_kafkas():
    config = ConsumerGroupConfig()
    assert (config.session_timeout_ms, config.heartbeat_interval_ms, config.max_size,
            config.assignors) == (45_000, 5_000, None, ("uniform", "range"))


def test_first_member_gets_every_partition_at_epoch_2(c):
    """A new group is at epoch 1 with an empty target (Kafka 4.3+, KAFKA-20268): its first
    member's join bumps it to 2, the first assignment's epoch."""
    a = Client(c, "a")
    resp = a.beat(0)
    assert (resp.member_epoch, resp.assignment, resp.heartbeat_interval_ms) == (
        2, tps("t", *range(6)), 5_000)
    group = c.group("g")
    assert (group.group_epoch, group.assignment_epoch, group.state()) == (2, 2, "Stable")


def test_a_new_groups_records_start_at_epoch_1():
    """Replay sees the group at epoch 1 before the join's bump (its records say so)."""
    c = ConsumerGroupCoordinator()
    records = c.heartbeat("g", member_id="a", member_epoch=0, topics=TOPICS, now_ms=0,
                          rebalance_timeout_ms=30_000, subscribed_topic_names=["t"],
                          owned=[]).records
    epochs = [(k, v.get("epoch", v.get("assignment_epoch"))) for k, _, v in records
              if k in ("ConsumerGroupMetadata", "ConsumerGroupTargetAssignmentMetadata")]
    assert epochs == [("ConsumerGroupMetadata", 1), ("ConsumerGroupTargetAssignmentMetadata", 1),
                      ("ConsumerGroupMetadata", 2), ("ConsumerGroupTargetAssignmentMetadata", 2)]


def test_the_last_member_leaving_brings_the_assignment_epoch_to_the_group_epoch(c):
    """Kafka 4.3+ (KAFKA-20442): an empty group's assignment epoch is its group epoch."""
    a, b = Client(c, "a"), Client(c, "b")
    for now in range(4):
        (a if now % 2 else b).beat(now)
    b.leave(5)
    a.leave(6)
    group = c.group("g")
    assert (group.group_epoch, group.assignment_epoch, group.targets) == (5, 5, {})


def test_a_partition_is_revoked_before_it_is_given_to_another_member(c):
    a, b = Client(c, "a"), Client(c, "b")
    a.beat(0)
    resp = b.beat(1)
    # b is at the new epoch, but t-3..5 are still a's: b gets nothing yet
    assert (resp.member_epoch, resp.assignment) == (3, frozenset())
    resp = a.beat(2)  # a is told to keep t-0..2 and stays at epoch 2 until it has revoked
    assert (resp.member_epoch, resp.assignment) == (2, tps("t", 0, 1, 2))
    assert c.group("g").members["a"].pending_revocation == tps("t", 3, 4, 5)
    assert b.beat(3).assignment is None  # still owned by a
    resp = a.beat(4)  # a reports that it owns only t-0..2 now
    assert (resp.member_epoch, resp.assignment) == (3, None)
    resp = b.beat(5)
    assert (resp.member_epoch, resp.assignment) == (3, tps("t", 3, 4, 5))
    assert c.group("g").state() == "Stable"


def test_a_member_that_does_not_report_its_partitions_keeps_them_pending():
    c = ConsumerGroupCoordinator()
    a, b = Client(c, "a"), Client(c, "b")
    a.beat(0)
    b.beat(1)
    r = c.heartbeat("g", member_id="a", member_epoch=2, topics=TOPICS, now_ms=2, owned=None)
    assert r.response.member_epoch == 2
    r = c.heartbeat("g", member_id="a", member_epoch=2, topics=TOPICS, now_ms=3, owned=None)
    assert c.group("g").members["a"].state == "unrevoked_partitions"


def test_leaving_gives_the_partitions_to_the_others(c):
    a, b = Client(c, "a"), Client(c, "b")
    for now in range(6):
        (a if now % 2 else b).beat(now)
    assert a.owned | b.owned == tps("t", *range(6)) and not a.owned & b.owned
    resp = b.leave(10)
    assert (resp.error, resp.member_id, resp.member_epoch) == (None, "b", -1)
    assert c.group("g").group_epoch == 4
    resp = a.beat(11)
    assert (resp.member_epoch, resp.assignment) == (4, tps("t", *range(6)))


def test_partitions_a_member_was_revoking_come_back_to_it_at_once(c):
    """b joins (a must give up t-3..5), then leaves before a has: once a has revoked them,
    the new target gives them back to a in the same heartbeat, not as partitions to wait for
    (a held them, and nobody else does), as Kafka 4.4 answers."""
    a, b = Client(c, "a"), Client(c, "b")
    a.beat(0)
    b.beat(1)
    assert a.beat(2).assignment == tps("t", 0, 1, 2)  # revoking t-3..5
    b.leave(3)
    resp = a.beat(4)  # reports t-0..2 only: done revoking
    assert (resp.member_epoch, resp.assignment) == (4, tps("t", *range(6)))
    assert c.group("g").members["a"].state == "stable"


def test_a_member_revoking_again_keeps_its_epoch():
    """a revokes t-3..5 for b; before it has, c joins and a must give up t-2 too: when a has
    revoked the first lot it goes on revoking at the epoch it has, not the next one (Kafka
    4.2+, KAFKA-19974), and reaches the target's epoch once done."""
    c = ConsumerGroupCoordinator()
    a, b, x = Client(c, "a"), Client(c, "b"), Client(c, "c")
    a.beat(0)
    b.beat(1)
    assert a.beat(2).assignment == tps("t", 0, 1, 2)  # revoking t-3..5 at epoch 2
    x.beat(3)  # epoch 4: a's target is t-0,1
    resp = a.beat(4)  # a reports t-0..2: done with t-3..5, t-2 now to revoke
    assert (resp.member_epoch, resp.assignment) == (2, tps("t", 0, 1))
    assert c.group("g").members["a"].state == "unrevoked_partitions"
    resp = a.beat(5)
    assert (resp.member_epoch, c.group("g").members["a"].state) == (4, "stable")


def test_epochs_fence_zombies(c):
    a = Client(c, "a")
    a.beat(0)
    bad = c.heartbeat("g", member_id="a", member_epoch=5, topics=TOPICS, now_ms=1, owned=[])
    assert isinstance(bad.response.error, FencedMemberEpochError)
    assert bad.response.error_code == 110 and bad.records == []
    Client(c, "b").beat(2)
    a.beat(3)  # a is at epoch 2, revoking
    a.beat(4)  # a moves to epoch 3
    assert c.group("g").members["a"].member_epoch == 3
    # the previous epoch is accepted with partitions within the assignment (a lost response)
    ok = c.heartbeat("g", member_id="a", member_epoch=2, topics=TOPICS, now_ms=5,
                     owned=tps("t", 0))
    assert ok.response.error is None and ok.response.member_epoch == 3
    for owned in (None, tps("t", 5)):
        bad = c.heartbeat("g", member_id="a", member_epoch=2, topics=TOPICS, now_ms=6,
                          owned=owned)
        assert isinstance(bad.response.error, FencedMemberEpochError)
    unknown = c.heartbeat("g", member_id="z", member_epoch=1, topics=TOPICS, now_ms=7, owned=[])
    assert isinstance(unknown.response.error, UnknownMemberIdError)
    nogroup = c.heartbeat("h", member_id="a", member_epoch=1, topics=TOPICS, now_ms=8, owned=[])
    assert isinstance(nogroup.response.error, GroupIdNotFoundError)


@pytest.mark.parametrize("kw, message", [
    ({"member_epoch": 0, "rebalance_timeout_ms": -1}, "RebalanceTimeoutMs"),
    ({"member_epoch": 0, "owned": [("t", 0)]}, "TopicPartitions"),
    ({"member_epoch": 0, "subscribed_topic_names": None}, "SubscribedTopicNames"),
    ({"member_epoch": -2}, "InstanceId"),
    ({"member_epoch": -3}, "MemberEpoch"),
    ({"member_id": ""}, "MemberId"),
])
def test_invalid_requests(c, kw, message):
    args = {"member_id": "a", "member_epoch": 0, "topics": TOPICS, "now_ms": 0,
                "rebalance_timeout_ms": 1000, "subscribed_topic_names": ["t"], "owned": []}
    args.update(kw)
    r = c.heartbeat("g", **args)
    assert isinstance(r.response.error, InvalidRequestError) and message in str(r.response.error)
    assert r.records == [] and c.group("g") is None


def test_v0_member_ids_come_from_the_coordinator():
    c = ConsumerGroupCoordinator(ConsumerGroupConfig(member_id_factory=lambda: "made"))
    r = c.heartbeat("g", member_id="", member_epoch=0, topics=TOPICS, now_ms=0,
                    rebalance_timeout_ms=1000, subscribed_topic_names=["t"], owned=[],
                    member_id_required=False)
    assert r.response.member_id == "made"


def test_made_member_ids_are_written_as_kafkas_uuids():
    """22 characters of URL-safe base64 of 16 random bytes, never a leading "-", as Kafka's
    ``Uuid.randomUuid().toString()`` (what a classic member joining a consumer group is
    given on Kafka 4.4)."""
    import base64

    from offsetlog.group.consumer.config import random_member_id
    ids = {random_member_id() for _ in range(2000)}
    assert len(ids) == 2000
    for made in ids:
        assert len(made) == 22 and not made.startswith("-")
        assert len(base64.urlsafe_b64decode(made + "==")) == 16


def test_unsupported_assignor_and_max_size(c):
    r = Client(c, "a", assignor="sticky").beat(0)
    assert isinstance(r.error, UnsupportedAssignorError) and r.error_code == 112
    for m in "abc":
        assert Client(c, m).beat(1).error is None
    r = Client(c, "d").beat(2)
    assert isinstance(r.error, GroupMaxSizeReachedError) and r.error_code == 81


def test_the_assignor_most_members_name_is_used():
    c = ConsumerGroupCoordinator()
    for m in "ab":
        Client(c, m, assignor="range").beat(0)
    Client(c, "c", assignor="uniform").beat(0)
    assert c.preferred_assignor(c.group("g")) == "range"


def test_session_timeout_removes_the_member_and_bumps_the_epoch():
    c = ConsumerGroupCoordinator(ConsumerGroupConfig(session_timeout_ms=10_000))
    a, b = Client(c, "a"), Client(c, "b")
    a.beat(0)
    b.beat(0)
    a.beat(9_000)
    assert c.next_deadline() == 10_000
    r = c.poll(10_000)
    assert "b" not in c.group("g").members and c.group("g").group_epoch == 4
    assert [k for k, _, v in r.records if v is None] == [
        "ConsumerGroupCurrentMemberAssignment", "ConsumerGroupTargetAssignmentMember",
        "ConsumerGroupMemberMetadata"]
    assert isinstance(b.beat(10_001).error, UnknownMemberIdError)


def test_a_member_that_does_not_revoke_in_its_rebalance_timeout_is_fenced():
    c = ConsumerGroupCoordinator()
    a, b = Client(c, "a", rebalance_timeout_ms=5_000), Client(c, "b")
    a.beat(0)
    b.beat(100)
    c.heartbeat("g", member_id="a", member_epoch=2, topics=TOPICS, now_ms=200, owned=None)
    b.beat(4_000)
    c.poll(5_199)
    assert "a" in c.group("g").members
    c.poll(5_200)
    assert "a" not in c.group("g").members
    assert b.beat(5_300).assignment == tps("t", *range(6))


def test_static_member_leaves_for_a_while_and_comes_back_without_a_rebalance():
    c = ConsumerGroupCoordinator()
    a, b = Client(c, "a1", instance_id="A"), Client(c, "b")
    for now in range(6):
        (a if now % 2 == 0 else b).beat(now)
    kept, epoch = a.owned, c.group("g").group_epoch
    assert a.leave(10, epoch=-2).member_epoch == -2
    assert c.group("g").members["a1"].assigned == kept
    b.beat(11)
    assert not b.owned & kept
    again = Client(c, "a2", instance_id="A")
    resp = again.beat(12)
    assert (resp.error, resp.assignment, c.group("g").group_epoch) == (None, kept, epoch)
    assert set(c.group("g").members) == {"a2", "b"}
    # a second process with the same instance id while a2 is in
    r = Client(c, "a3", instance_id="A").beat(13)
    assert isinstance(r.error, UnreleasedInstanceIdError) and r.error_code == 111
    old = c.heartbeat("g", member_id="a1", member_epoch=epoch, topics=TOPICS, now_ms=14,
                      instance_id="A", owned=[])
    assert isinstance(old.response.error, FencedInstanceIdError)


def test_a_static_member_that_does_not_return_is_removed_after_its_session():
    c = ConsumerGroupCoordinator(ConsumerGroupConfig(session_timeout_ms=10_000))
    a, b = Client(c, "a1", instance_id="A"), Client(c, "b")
    a.beat(0)
    b.beat(0)
    a.beat(1)
    a.beat(2)
    a.leave(3, epoch=-2)
    b.beat(9_000)
    c.poll(10_003)
    assert set(c.group("g").members) == {"b"}
    assert b.beat(10_004).assignment == tps("t", *range(6))


def test_offset_requests_are_checked_against_the_member_epoch(c):
    a = Client(c, "a")
    a.beat(0)
    assert c.check_offset_request("g", "a", 2) is None
    assert isinstance(c.check_offset_request("g", "a", 3), StaleMemberEpochError)
    assert isinstance(c.check_offset_request("g", "a", 1), StaleMemberEpochError)
    assert isinstance(c.check_offset_request("g", "x", 1), UnknownMemberIdError)
    assert isinstance(c.check_offset_request("g", "", -1), UnknownMemberIdError)
    a.leave(1)
    assert c.check_offset_request("g", "", -1) is None  # empty group: admin commits
    assert c.check_offset_request("other", "", -1) is None


def test_a_consumer_protocol_members_classic_commit_is_refused(c):
    """An OffsetCommit of the classic versions from a consumer-protocol member: refused once
    the member is found, before its epoch is judged; others as before."""
    a = Client(c, "a")
    a.beat(0)
    classic = {"classic_commit": True}
    assert isinstance(c.check_offset_request("g", "a", 1, **classic), UnsupportedVersionError)
    assert isinstance(c.check_offset_request("g", "a", 7, **classic), UnsupportedVersionError)
    assert isinstance(c.check_offset_request("g", "x", 1, **classic), UnknownMemberIdError)
    a.leave(1)
    assert c.check_offset_request("g", "", -1, **classic) is None


def test_a_new_partition_count_bumps_the_group_epoch(c):
    a = Client(c, "a")
    a.beat(0)
    resp = a.beat(1, metadata={"t": 8})
    assert resp.member_epoch == 3 and resp.assignment == tps("t", *range(8))


def test_replaying_the_records_rebuilds_the_groups():
    c = ConsumerGroupCoordinator()
    log = []
    orig = c.heartbeat

    def recording(*a, **kw):
        r = orig(*a, **kw)
        log.extend(r.records)
        return r

    c.heartbeat = recording
    clients = [Client(c, "a", topics=("t", "u")), Client(c, "b", instance_id="B"),
               Client(c, "c", topics=("u",))]
    for now in range(12):
        clients[now % 3].beat(now)
    clients[2].leave(20)
    clients[1].leave(21, epoch=-2)
    assert {k for k, _, _ in log} == {
        "ConsumerGroupMetadata", "ConsumerGroupMemberMetadata",
        "ConsumerGroupTargetAssignmentMetadata", "ConsumerGroupTargetAssignmentMember",
        "ConsumerGroupCurrentMemberAssignment"}
    fresh = ConsumerGroupCoordinator()
    fresh.replay(log, now_ms=100)
    assert fresh.groups == c.groups
    assert fresh.groups["g"].members["b"].member_epoch == -2


def test_range_is_kafkas_range():
    members = {m: AssignorMember(m, frozenset({"t"})) for m in ("m2", "m1", "m3")}
    members["s"] = AssignorMember("s", frozenset({"t"}), instance_id="i")
    out = range_assign(members, {"t": 7}, {})
    # static members first (by instance id), then by member id; the first 7 % 4 get one more
    assert out == {"s": tps("t", 0, 1), "m1": tps("t", 2, 3), "m2": tps("t", 4, 5),
                   "m3": tps("t", 6)}


def test_uniform_keeps_what_it_can():
    members = {m: AssignorMember(m, frozenset({"t"})) for m in ("a", "b")}
    out = uniform_assign(members, {"t": 6}, {"a": tps("t", 3, 4, 5), "b": tps("t", 0, 1, 2)})
    assert out == {"a": tps("t", 3, 4, 5), "b": tps("t", 0, 1, 2)}
    members["c"] = AssignorMember("c", frozenset({"t"}))
    out2 = uniform_assign(members, {"t": 6}, out)
    assert sorted(len(v) for v in out2.values()) == [2, 2, 2]
    assert out2["a"] < out["a"] and out2["b"] < out["b"]


def test_partitions_keep_the_epoch_they_were_assigned_at(c):
    """KIP-1251: a partition carries the member epoch it was given at while the member keeps
    it; one taken away and one newly given are at the epoch of that change."""
    a = Client(c, "a")
    a.beat(0)
    first = a.epoch
    assert (dict(c.group("g").members["a"].assignment_epochs)
            == {tp: first for tp in tps("t", *range(6))})
    b = Client(c, "b")
    b.beat(1)
    a.beat(2)  # told to revoke t-3..5: they stay at their epoch while pending
    member = c.group("g").members["a"]
    assert member.pending_revocation == tps("t", 3, 4, 5)
    assert dict(member.assignment_epochs) == {tp: first for tp in tps("t", *range(6))}
    a.beat(3)  # revoked: a moves on, keeping t-0..2 at the epoch it got them
    member = c.group("g").members["a"]
    assert member.member_epoch > first and member.assigned == tps("t", 0, 1, 2)
    assert dict(member.assignment_epochs) == {tp: first for tp in tps("t", 0, 1, 2)}
    b.beat(4)  # b gets the freed partitions at its current epoch
    member = c.group("g").members["b"]
    assert dict(member.assignment_epochs) == {tp: member.member_epoch for tp in tps("t", 3, 4, 5)}


def test_a_commit_at_an_older_epoch_names_partitions_held_since(c):
    """Kafka's rule: assignment epoch <= the commit's epoch <= the member's epoch, for every
    partition committed, else the whole commit is stale; an OffsetFetch (no partitions) and
    a newer epoch must match exactly."""
    a, b = Client(c, "a"), Client(c, "b")
    a.beat(0)
    first = a.epoch
    b.beat(1)
    a.beat(2)
    a.beat(3)
    now = a.epoch
    assert now > first
    check = c.check_offset_request
    assert check("g", "a", first, partitions=tps("t", 0, 2)) is None
    assert check("g", "a", now - 1, partitions=tps("t", 1)) is None
    for stale in (tps("t", 3), tps("t", 0, 3), frozenset({("u", 0)})):
        assert isinstance(check("g", "a", first, partitions=stale), StaleMemberEpochError)
    assert isinstance(check("g", "a", first - 1, partitions=tps("t", 0)),
                      StaleMemberEpochError)
    assert isinstance(check("g", "a", now + 1, partitions=tps("t", 0)), StaleMemberEpochError)
    assert isinstance(check("g", "a", first), StaleMemberEpochError)  # (a fetch)
    assert check("g", "a", now, partitions=tps("t", 5)) is None  # its epoch: anything


def test_a_static_members_new_process_holds_its_partitions_from_epoch_0(c):
    """Kafka 4.4 resets the assignment epochs of the partitions a static member's new
    process takes over to 0: its commits at any epoch up to its own are taken for them."""
    a = Client(c, "a", instance_id="A")
    a.beat(0)
    Client(c, "b").beat(1)
    a.beat(2)
    a.beat(3)
    a.leave(4, epoch=-2)
    a2 = Client(c, "a2", instance_id="A")
    a2.beat(5)
    member = c.group("g").members["a2"]
    assert member.assigned and dict(member.assignment_epochs) == {
        tp: 0 for tp in member.assigned}
    for epoch in range(member.member_epoch + 1):
        assert c.check_offset_request("g", "a2", epoch, partitions=member.assigned) is None
    assert c.check_offset_request("g", "a2", member.member_epoch + 1,
                                  partitions=member.assigned) is not None


def test_a_record_without_assignment_epochs_takes_commits_at_its_epoch_only():
    """A current-assignment record written before assignment epochs: its partitions have
    none, so only the member's own epoch commits them, as before; the next move of the
    member gives them the epoch it leaves."""
    from offsetlog.group.consumer.group import ConsumerGroup, current_record
    from offsetlog.group.consumer.member import ConsumerMember, reconcile

    member = ConsumerMember("m", member_epoch=5, previous_member_epoch=4,
                            assigned=tps("t", 0, 1))
    _, _, value = current_record("g", member)
    assert "assignment_epochs" not in value  # (none known: the record is as before)
    group = ConsumerGroup("g")
    group.apply("ConsumerGroupCurrentMemberAssignment", ("g", "m"), value)
    loaded = group.members["m"]
    assert loaded.assignment_epochs == ()
    assert loaded.commit_error(5, tps("t", 0)) is None
    assert loaded.commit_error(4, tps("t", 0)) is not None
    moved = reconcile(loaded, 7, tps("t", 0, 1, 2), lambda tp: -1, tps("t", 0, 1))
    assert dict(moved.assignment_epochs) == {("t", 0): 5, ("t", 1): 5, ("t", 2): 7}
    _, _, value = current_record("g", moved)
    assert value["assignment_epochs"] == [["t", [[0, 5], [1, 5], [2, 7]]]]
    again = ConsumerGroup("g")
    again.apply("ConsumerGroupCurrentMemberAssignment", ("g", "m"), value)
    assert again.members["m"] == moved
