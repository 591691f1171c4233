"""KIP-848's online migration between the classic and the consumer group protocol, sans-IO:
a classic group upgraded when a consumer-protocol member joins it, its members living on
through JoinGroup/SyncGroup/Heartbeat/LeaveGroup, and the downgrade when the last
consumer-protocol member leaves (``offsetlog.group.migration``)."""

from __future__ import annotations

import itertools

import pytest

from offsetlog.errors import IllegalGenerationError, RebalanceInProgressError, UnknownMemberIdError
from offsetlog.group import GroupConfig, GroupCoordinator
from offsetlog.group.consumer import ConsumerGroupConfig, ConsumerGroupCoordinator
from offsetlog.group.consumer.group import CLASSIC_GROUP_METADATA
from offsetlog.group.consumer_protocol import (
    decode_assignment,
    encode_assignment,
    encode_subscription,
)
from offsetlog.group.errors import GroupIdNotFoundError, MemberIdRequiredError
from offsetlog.group.migration import Migration
from offsetlog.log.records import GROUP_METADATA

TOPICS = {"t": 6}
SESSION = 10_000
REBALANCE = 20_000


def make(policy="bidirectional", consumer_max=None, classic_max=None):
    ids = (f"c{i}" for i in itertools.count(1))
    classic = GroupCoordinator(GroupConfig(initial_rebalance_delay_ms=100, max_size=classic_max,
                                           member_id_factory=lambda p: next(ids)))
    consumer = ConsumerGroupCoordinator(ConsumerGroupConfig(
        migration_policy=policy, max_size=consumer_max))
    return Migration(classic, consumer)


class Classic:
    """A classic consumer as a client runs it (eager: it gives up everything to rejoin)."""

    def __init__(self, m: Migration, group="g", protocol="range", version_owned=True):
        self.m, self.group, self.protocol = m, group, protocol
        self.member_id, self.generation, self.owned = "", -1, frozenset()
        self.version_owned = version_owned

    def metadata(self):
        return encode_subscription(["t"], owned_partitions=self.owned if self.version_owned
                                   else ())

    def join(self, now, *, protocol_type="consumer"):
        r = self.m.join_group(self.group, topics=TOPICS, now_ms=now, member_id=self.member_id,
                              client_id="py", session_timeout_ms=SESSION,
                              rebalance_timeout_ms=REBALANCE, protocol_type=protocol_type,
                              protocols=[(self.protocol, self.metadata())])
        return r

    def joined(self, now):
        """Join until answered (a classic group parks the first JoinGroup)."""
        r = self.join(now)
        resp = r.response
        if resp is None:
            resp = self.m.classic.poll(now + 200).responses[0]
        assert resp.error is None, resp.error
        self.member_id, self.generation = resp.member_id, resp.generation_id
        return resp

    def sync(self, now, assignments=None):
        r = self.m.sync_group(self.group, now_ms=now, member_id=self.member_id,
                              generation_id=self.generation, protocol_type="consumer",
                              protocol_name=self.protocol, assignments=assignments)
        resp = r.response
        if resp is not None and resp.error is None:
            self.owned = frozenset((tp.topic, tp.partition)
                                   for tp in decode_assignment(resp.assignment))
        return r

    def beat(self, now):
        return self.m.heartbeat(self.group, now_ms=now, member_id=self.member_id,
                                generation_id=self.generation).response


class Modern:
    """A consumer-protocol member that owns what it was last given."""

    def __init__(self, m: Migration, member_id, group="g"):
        self.m, self.member_id, self.group = m, member_id, group
        self.epoch, self.owned = 0, frozenset()

    def beat(self, now):
        joining = self.epoch == 0
        r = self.m.consumer_heartbeat(
            self.group, member_id=self.member_id, member_epoch=self.epoch, topics=TOPICS,
            now_ms=now, rebalance_timeout_ms=REBALANCE if joining else -1,
            subscribed_topic_names=["t"] if joining else None, server_assignor="range",
            owned=frozenset() if joining else self.owned)
        if r.response.error is None:
            self.epoch = r.response.member_epoch
            if r.response.assignment is not None:
                self.owned = r.response.assignment
        return r

    def leave(self, now):
        return self.m.consumer_heartbeat(self.group, member_id=self.member_id, member_epoch=-1,
                                         topics=TOPICS, now_ms=now)


def stable_classic_group(m, n=2, now=0):
    """``n`` classic members in a Stable generation 1, the leader splitting t's partitions."""
    members = [Classic(m) for _ in range(n)]
    for c in members:
        c.join(now)
    answers = m.classic.poll(now + 200).responses
    by_id = {}
    for c, a in zip(members, answers):
        c.member_id, c.generation = a.member_id, a.generation_id
        by_id[a.member_id] = c
    ids = sorted(by_id)
    plan = {mid: encode_assignment([("t", p) for p in range(6) if p % n == i])
            for i, mid in enumerate(ids)}
    leader = next(c for c in members if c.member_id == m.classic.group("g").leader)
    for c in members:
        if c is not leader:
            c.sync(now + 2)
    leader.sync(now + 2, plan)
    for c in members:
        c.owned = frozenset(("t", p) for p in range(6) if p % n == ids.index(c.member_id))
    assert m.classic.describe_group("g").state == "Stable"
    return members


def owners(m, group="g"):
    """(topic, partition) -> member ids that may own it now."""
    out: dict = {}
    for mid, member in m.consumer.group(group).members.items():
        for tp in member.owned():
            out.setdefault(tp, []).append(mid)
    return out


def settle(m, classics, moderns, now, rounds=8):
    """Let every member heartbeat, rejoin and sync as clients do until nothing changes."""
    for _ in range(rounds):
        for c in classics:
            resp = c.beat(now)
            if isinstance(resp.error, RebalanceInProgressError):
                c.owned = frozenset()  # an eager client revokes everything
                resp = c.joined(now)
                c.sync(now)
            now += 1
        for mm in moderns:
            mm.beat(now)
            now += 1
    return now


# -- upgrade -----------------------------------------------------------------------------------

def test_consumer_member_upgrades_a_stable_classic_group():
    m = make()
    a, b = stable_classic_group(m)
    x = Modern(m, "x")
    r = x.beat(10)
    assert r.response.error is None
    assert m.classic.group("g") is None
    group = m.consumer.group("g")
    # the classic generation became the group epoch; the join bumped it
    assert (group.group_epoch, group.assignment_epoch) == (2, 2)
    assert {mid: mm.member_epoch for mid, mm in group.members.items()} == {
        a.member_id: 1, b.member_id: 1, "x": r.response.member_epoch}
    assert group.members[a.member_id].uses_classic_protocol
    assert not group.members["x"].uses_classic_protocol
    kinds = [k for k, _, _ in r.records]
    assert kinds[0] == CLASSIC_GROUP_METADATA and r.records[0][2] is None
    # the classic members' assignments carried over
    assert group.members[a.member_id].assigned == a.owned
    # x gets nothing a classic member still owns
    assert not (x.owned & (a.owned | b.owned))


def test_classic_members_are_told_to_rejoin_and_reconcile():
    m = make()
    a, b = stable_classic_group(m)
    x = Modern(m, "x")
    x.beat(10)
    assert isinstance(a.beat(11).error, RebalanceInProgressError)
    now = settle(m, [a, b], [x], 12)
    group = m.consumer.group("g")
    assert group.state() == "Stable"
    owned = owners(m)
    assert sorted(owned) == [("t", p) for p in range(6)]
    assert all(len(ids) == 1 for ids in owned.values())
    assert a.owned | b.owned | x.owned == frozenset(("t", p) for p in range(6))
    assert all(len(s) == 2 for s in (a.owned, b.owned, x.owned))
    assert a.beat(now).error is None and a.generation == group.group_epoch


def test_join_answer_of_a_classic_member_in_a_consumer_group():
    m = make()
    a, _ = stable_classic_group(m)
    Modern(m, "x").beat(10)
    resp = a.joined(11)
    assert (resp.protocol_type, resp.protocol_name, resp.leader_id, resp.members) == (
        "consumer", "range", "", ())
    assert resp.generation_id == m.consumer.group("g").members[a.member_id].member_epoch


@pytest.mark.parametrize("policy", ["downgrade", "disabled"])
def test_upgrade_refused_by_policy(policy):
    m = make(policy)
    stable_classic_group(m)
    r = Modern(m, "x").beat(10)
    assert isinstance(r.response.error, GroupIdNotFoundError)
    assert r.records == [] and m.consumer.group("g") is None
    assert m.classic.describe_group("g").state == "Stable"


def test_upgrade_refused_beyond_consumer_max_size():
    m = make(consumer_max=1)
    stable_classic_group(m)
    assert isinstance(Modern(m, "x").beat(10).response.error, GroupIdNotFoundError)


def test_upgrade_refused_for_another_protocol_type():
    m = make()
    m.classic.join_group("g", member_id="", client_id="k", session_timeout_ms=SESSION,
                         protocol_type="connect", protocols=[("v1", b"x")], now_ms=0)
    m.classic.poll(200)
    assert m.classic.describe_group("g").members
    assert isinstance(Modern(m, "x").beat(10).response.error, GroupIdNotFoundError)


def test_heartbeat_with_an_epoch_for_a_classic_group_is_group_id_not_found():
    m = make()
    stable_classic_group(m)
    x = Modern(m, "x")
    x.epoch = 3
    assert isinstance(x.beat(10).response.error, GroupIdNotFoundError)
    assert m.classic.group("g") is not None


def test_empty_classic_group_is_taken_over():
    m = make()
    a, b = stable_classic_group(m)
    for c in (a, b):
        m.leave_group("g", member_id=c.member_id, now_ms=5)
    m.classic.poll(10)
    assert m.classic.describe_group("g").state == "Empty"
    r = Modern(m, "x").beat(20)
    # a new consumer group, at epoch 1 before the member's join (Kafka 4.4 answers 2 too)
    assert r.response.error is None and r.response.member_epoch == 2
    assert r.records[0] == (CLASSIC_GROUP_METADATA, ("g",), None)
    assert r.records[1][0] == "ConsumerGroupMetadata" and r.records[1][2]["epoch"] == 1
    assert m.classic.group("g") is None


def test_upgrade_answers_parked_joins_rebalance_in_progress():
    m = make()
    a, b = stable_classic_group(m)
    # a rejoins: the group rebalances and a's JoinGroup waits for b
    assert a.join(5).response is None
    r = Modern(m, "x").beat(6)
    assert r.response.error is None
    (parked,) = r.classic_responses
    assert isinstance(parked.error, RebalanceInProgressError)


# -- classic requests to a consumer group ------------------------------------------------------

def test_classic_requests_checked_as_kafka():
    m = make()
    a, _ = stable_classic_group(m)
    Modern(m, "x").beat(10)
    stranger = Classic(m)
    stranger.member_id, stranger.generation = "nobody", 1
    assert isinstance(stranger.beat(11).error, UnknownMemberIdError)
    a.generation = 7
    assert isinstance(a.beat(12).error, IllegalGenerationError)
    # a consumer-protocol member cannot use the classic requests
    x_as_classic = Classic(m)
    x_as_classic.member_id, x_as_classic.generation = "x", m.consumer.group(
        "g").members["x"].member_epoch
    assert isinstance(x_as_classic.beat(13).error, UnknownMemberIdError)
    other = Classic(m)
    r = other.join(14, protocol_type="connect")
    assert r.response.error_code == 23  # INCONSISTENT_GROUP_PROTOCOL


def test_new_classic_member_needs_a_member_id_first():
    m = make()
    stable_classic_group(m)
    Modern(m, "x").beat(10)
    c = Classic(m)
    r = m.join_group("g", topics=TOPICS, now_ms=11, member_id="", client_id="py",
                     session_timeout_ms=SESSION, rebalance_timeout_ms=REBALANCE,
                     protocol_type="consumer", protocols=[("range", c.metadata())],
                     require_known_member_id=True)
    assert isinstance(r.response.error, MemberIdRequiredError) and r.response.member_id
    assert r.response.member_id not in m.consumer.group("g").members


def test_classic_member_commit_fenced_by_its_generation():
    m = make()
    a, _ = stable_classic_group(m)
    Modern(m, "x").beat(10)
    epoch = m.consumer.group("g").members[a.member_id].member_epoch
    assert m.consumer.check_offset_request("g", a.member_id, epoch) is None
    assert isinstance(m.consumer.check_offset_request("g", a.member_id, epoch + 1),
                      IllegalGenerationError)
    # (a classic member's commit of the classic versions is its own: not refused)
    assert m.consumer.check_offset_request("g", a.member_id, epoch, classic_commit=True) is None


def test_an_upgrade_gives_the_classic_assignments_the_generations_epoch():
    """The classic members' partitions are the consumer group's as given at the classic
    generation (Kafka 4.4 records them so): a static member's new process keeps them."""
    m = make()
    stable_classic_group(m)
    Modern(m, "x").beat(10)
    classic = [mm for mm in m.consumer.group("g").members.values() if mm.classic is not None]
    assert classic and all(mm.assigned for mm in classic)
    for mm in classic:
        assert dict(mm.assignment_epochs) == {tp: 1 for tp in mm.assigned}


def test_a_classic_members_commit_at_an_older_generation_is_judged_by_assignment_epochs():
    """KIP-1251 holds for a classic member of a consumer group too, as Kafka 4.4 judges it:
    after the upgrade (generation 1) and a rejoin at a newer epoch, a commit at generation 1
    is taken for partitions the member kept since, and ILLEGAL_GENERATION for the rest."""
    m = make()
    a, _ = stable_classic_group(m)
    Modern(m, "x").beat(10)
    a.joined(11)  # told what to keep at generation 1 (it still owns what it must give up)
    a.sync(12)
    a.joined(13)  # given up: on to the group's epoch
    member = m.consumer.group("g").members[a.member_id]
    assert member.member_epoch > 1
    epochs = dict(member.assignment_epochs)
    kept = [tp for tp, at in epochs.items() if at == 1]
    given = [tp for tp, at in epochs.items() if at > 1]
    others = [tp for tp in (("t", p) for p in range(6)) if tp not in epochs]
    assert kept and others
    assert m.consumer.check_offset_request("g", a.member_id, 1, partitions=kept) is None
    for refused in ([others[0]], kept + [others[0]]) + (([given[0]],) if given else ()):
        assert isinstance(m.consumer.check_offset_request("g", a.member_id, 1,
                                                          partitions=refused),
                          IllegalGenerationError)


def test_classic_leave_removes_the_member_and_bumps_the_epoch():
    m = make()
    a, b = stable_classic_group(m)
    Modern(m, "x").beat(10)
    epoch = m.consumer.group("g").group_epoch
    r = m.leave_group("g", member_id=a.member_id, now_ms=11)
    assert r.response.error is None and r.response.members[0].error is None
    group = m.consumer.group("g")
    assert a.member_id not in group.members and group.group_epoch == epoch + 1


def test_classic_members_rejoin_for_a_new_target_not_a_new_group_epoch():
    """A leave bumps the group epoch and leaves the new target to the next heartbeat that
    computes one. Until then a classic member at its epoch is not told to rejoin, by
    Heartbeat or SyncGroup: only a newer target assignment is worth a rejoin (Kafka 4.4,
    KAFKA-20272; found by tests/kafka/test_diff_random_mixed_groups.py). Once the consumer
    member's heartbeat has computed it, the classic member is told to rejoin."""
    m, a, b, x, now = upgraded()
    assert b.beat(now).error is None
    r = m.leave_group("g", member_id=a.member_id, now_ms=now + 1)
    assert r.response.error is None
    group = m.consumer.group("g")
    assert group.group_epoch == group.assignment_epoch + 1 == b.generation + 1
    assert b.beat(now + 2).error is None
    assert b.sync(now + 3).response.error is None
    x.beat(now + 4)
    assert group.assignment_epoch == group.group_epoch
    assert isinstance(b.beat(now + 5).error, RebalanceInProgressError)
    assert isinstance(b.sync(now + 6).response.error, RebalanceInProgressError)


def test_a_leave_by_instance_id_answers_the_member_id_it_was_given():
    """LeaveGroup naming a static member of a consumer group by its instance id alone (how
    admin tools remove one): the member is gone, and the answer names the member id the
    request named, "", as Kafka 4.4 answers."""
    from offsetlog.group.responses import MemberIdentity
    m = make()
    r = m.consumer_heartbeat("g", member_id="x", member_epoch=0, topics=TOPICS, now_ms=0,
                             instance_id="X", rebalance_timeout_ms=REBALANCE,
                             subscribed_topic_names=["t"], owned=frozenset())
    assert r.response.error is None
    r = m.leave_group("g", members=[MemberIdentity("", "X")], now_ms=1)
    (left,) = r.response.members
    assert (left.member_id, left.group_instance_id, left.error) == ("", "X", None)
    assert "x" not in m.consumer.group("g").members


def test_classic_member_that_does_not_sync_is_removed():
    m = make()
    a, b = stable_classic_group(m)
    x = Modern(m, "x")
    x.beat(10)
    a.joined(11)  # no SyncGroup follows
    for t in range(12, 11 + REBALANCE, 4_000):  # the others keep their sessions
        b.beat(t)
        x.beat(t)
    m.consumer.poll(11 + REBALANCE)
    assert a.member_id not in m.consumer.group("g").members


# -- downgrade ---------------------------------------------------------------------------------

def upgraded(policy="bidirectional"):
    m = make(policy)
    a, b = stable_classic_group(m)
    x = Modern(m, "x")
    x.beat(10)
    now = settle(m, [a, b], [x], 11)
    return m, a, b, x, now


def test_last_consumer_member_leaving_downgrades_the_group():
    m, a, b, x, now = upgraded()
    epoch = m.consumer.group("g").group_epoch
    targets = dict(m.consumer.group("g").targets)
    r = x.leave(now)
    assert r.response.error is None and r.response.member_epoch == -1
    assert m.consumer.group("g") is None
    d = m.classic.describe_group("g")
    assert (d.state, d.generation, d.protocol_type, d.protocol) == (
        "PreparingRebalance", epoch, "consumer", "range")
    # the GROUP_METADATA written: Stable at the group epoch, each member's target assignment
    (kind, key, value), = [rec for rec in r.records if rec[0] == CLASSIC_GROUP_METADATA]
    assert value["generation"] == epoch
    assert {mm["member_id"]: frozenset((tp.topic, tp.partition)
                                       for tp in decode_assignment(mm["assignment"]))
            for mm in value["members"]} == {a.member_id: targets[a.member_id],
                                            b.member_id: targets[b.member_id]}
    # every consumer record of the group is deleted
    assert all(v is None for k, _, v in r.records if k != CLASSIC_GROUP_METADATA)
    # the members rebalance as a classic group
    assert isinstance(a.beat(now + 1).error, RebalanceInProgressError)


def test_downgraded_group_completes_a_classic_rebalance():
    m, a, b, x, now = upgraded()
    epoch = m.consumer.group("g").group_epoch
    x.leave(now)
    assert a.join(now + 1).response is None  # parked: the join phase waits for b
    answers = {r.member_id: r for r in b.join(now + 2).responses}
    assert set(answers) == {a.member_id, b.member_id}
    assert {r.generation_id for r in answers.values()} == {epoch + 1}
    leader = a if answers[a.member_id].is_leader else b
    follower = b if leader is a else a
    for c in (a, b):
        c.generation = epoch + 1
    plan = {leader.member_id: encode_assignment([("t", p) for p in range(3)]),
            follower.member_id: encode_assignment([("t", p) for p in range(3, 6)])}
    assert follower.sync(now + 3).response is None
    done = leader.sync(now + 3, plan)
    assert all(r.error is None for r in done.responses) and len(done.responses) == 2
    assert m.classic.describe_group("g").state == "Stable"


def test_downgrade_disabled_keeps_a_consumer_group_of_classic_members():
    m, a, b, x, now = upgraded(policy="upgrade")
    x.leave(now)
    group = m.consumer.group("g")
    assert set(group.members) == {a.member_id, b.member_id}
    assert m.classic.group("g") is None


def test_no_downgrade_beyond_classic_max_size():
    m, a, b, x, now = upgraded()
    m.classic.config = GroupConfig(max_size=1)  # group.max.size below the classic members
    x.leave(now)
    assert m.consumer.group("g") is not None and m.classic.group("g") is None


def test_consumer_member_session_expiry_downgrades_the_group():
    m, a, b, x, now = upgraded()
    t = now
    while t < now + 45_000:  # the classic members heartbeat, x does not
        t += 3_000
        a.beat(t)
        b.beat(t)
        m.consumer.poll(t)
    assert m.consumer.group("g") is None
    assert m.classic.describe_group("g").state == "PreparingRebalance"


def test_classic_join_takes_over_an_empty_consumer_group():
    m = make()
    x = Modern(m, "x")
    x.beat(0)
    x.leave(1)
    assert m.consumer.group("g").members == {}
    c = Classic(m)
    r = c.join(2)
    kinds = [rec[1] for rec in r.records]
    assert GROUP_METADATA not in kinds[:1]  # the consumer group's tombstones come first
    assert m.consumer.group("g") is None
    assert m.classic.group("g") is not None


def test_classic_leave_of_the_last_consumer_member_downgrades_the_group():
    """Kafka 4.4: LeaveGroup removes a consumer-protocol member too, and so downgrades."""
    m, a, b, x, now = upgraded()
    r = m.leave_group("g", member_id="x", now_ms=now)
    assert r.response.members[0].error is None
    assert m.consumer.group("g") is None
    assert m.classic.describe_group("g").state == "PreparingRebalance"


def test_join_with_a_bad_session_timeout_leaves_an_empty_consumer_group_alone():
    m = make()
    x = Modern(m, "x")
    x.beat(0)
    x.leave(1)
    r = m.join_group("g", topics=TOPICS, now_ms=2, member_id="", client_id="py",
                     session_timeout_ms=1, rebalance_timeout_ms=REBALANCE,
                     protocol_type="consumer", protocols=[("range", Classic(m).metadata())])
    assert r.response.error_code == 26  # INVALID_SESSION_TIMEOUT
    assert r.records == [] and m.consumer.group("g") is not None


def test_classic_process_replacing_the_last_static_consumer_member_downgrades():
    m = make()
    r = m.consumer_heartbeat("g", member_id="x", member_epoch=0, topics=TOPICS, now_ms=0,
                             instance_id="I", rebalance_timeout_ms=REBALANCE,
                             subscribed_topic_names=["t"], owned=frozenset())
    assert r.response.error is None
    c = Classic(m)
    c.joined(1)
    c.sync(2)
    epoch = m.consumer.group("g").group_epoch
    k = m.join_group("g", topics=TOPICS, now_ms=3, member_id="", group_instance_id="I",
                     client_id="py", session_timeout_ms=SESSION, rebalance_timeout_ms=REBALANCE,
                     protocol_type="consumer", protocols=[("range", c.metadata())])
    answer = k.response
    # the group's generation, as Kafka 4.4 answers when it assigns in the heartbeat
    assert answer.error is None and answer.generation_id == epoch
    assert m.consumer.group("g") is None
    d = m.classic.describe_group("g")
    assert (d.state, d.generation) == ("Stable", epoch)  # no rebalance
    assert {mm.member_id for mm in d.members} == {c.member_id, answer.member_id}
    got = [tp for mm in d.members for tp in decode_assignment(mm.assignment)]
    assert len(got) == len(set(got)) == 6
    # the process syncs at the generation it was given, and gets the member's assignment
    synced = m.sync_group("g", now_ms=4, member_id=answer.member_id, group_instance_id="I",
                          generation_id=answer.generation_id, protocol_type="consumer",
                          protocol_name="range", assignments=None).response
    assert synced.error is None and decode_assignment(synced.assignment)


def test_a_replacing_process_downgrades_a_stale_group_with_a_rebalance():
    """As above, but a classic member's leave has just bumped the group epoch, so the target
    is behind it: the process is answered generation 0, and the group turns classic at the
    generation it had with the stale target as assignments and a rebalance started, as Kafka
    4.4 (KAFKA-20273; judged in tests/kafka/test_diff_consumer_group_migration.py)."""
    m = make()
    r = m.consumer_heartbeat("g", member_id="x", member_epoch=0, topics=TOPICS, now_ms=0,
                             instance_id="I", rebalance_timeout_ms=REBALANCE,
                             subscribed_topic_names=["t"], owned=frozenset())
    assert r.response.error is None
    c, d = Classic(m), Classic(m)
    c.joined(1)
    c.sync(2)
    d.joined(3)
    assert m.leave_group("g", member_id=d.member_id, now_ms=4).response.error is None
    group = m.consumer.group("g")
    epoch, stale = group.group_epoch, dict(group.targets)
    assert group.assignment_epoch < epoch
    k = m.join_group("g", topics=TOPICS, now_ms=5, member_id="", group_instance_id="I",
                     client_id="py", session_timeout_ms=SESSION, rebalance_timeout_ms=REBALANCE,
                     protocol_type="consumer", protocols=[("range", c.metadata())])
    answer = k.response
    assert answer.error is None and answer.generation_id == 0
    assert m.consumer.group("g") is None
    d = m.classic.describe_group("g")
    assert (d.state, d.generation) == ("PreparingRebalance", epoch)
    assert {mm.member_id for mm in d.members} == {c.member_id, answer.member_id}
    g = m.classic.group("g")
    # the stale target, the process holding x's
    assert decode_assignment(g.members[answer.member_id].assignment) == sorted(stale["x"])
    assert decode_assignment(g.members[c.member_id].assignment) == sorted(stale[c.member_id])
    # (c joined at a generation the leave moved past: it must rejoin)
    assert isinstance(c.beat(6).error, IllegalGenerationError)
