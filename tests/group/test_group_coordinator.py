"""Join, sync, heartbeat and leave flows of the group coordinator, with a clock that moves only
when told. Each test asserts the exact records a step produces and, where the group is at rest
(Stable or Empty), that replaying the log into a fresh coordinator gives the same group."""

from __future__ import annotations

import pytest

from offsetlog.errors import (
    IllegalGenerationError,
    InvalidGroupIdError,
    RebalanceInProgressError,
    UnknownMemberIdError,
)
from offsetlog.group import (
    GroupConfig,
    GroupCoordinator,
    JoinGroupMember,
    JoinGroupResponse,
    LeaveGroupResponse,
    MemberIdentity,
    SyncGroupResponse,
)
from offsetlog.group.errors import (
    GroupMaxSizeReachedError,
    InconsistentGroupProtocolError,
    InvalidSessionTimeoutError,
    MemberIdRequiredError,
)
from offsetlog.log.records import group_metadata
from support.coordinator_harness import CoordinatorHarness

T0 = 1_000_000
META = b"range-metadata"


def member_value(member_id, client_id, *, assignment=None, instance=None, session=10_000,
                 rebalance=None, subscription=META):
    return {"member_id": member_id, "group_instance_id": instance, "client_id": client_id,
            "client_host": "", "session_timeout_ms": session,
            "rebalance_timeout_ms": session if rebalance is None else rebalance,
            "subscription": subscription,
            "assignment": member_id.encode() if assignment is None else assignment}


def group_record(group, *, generation, leader, timestamp, members, protocol="range"):
    return group_metadata(0, group, {
        "protocol_type": "consumer", "generation": generation, "protocol": protocol,
        "leader": leader, "current_state_timestamp": timestamp, "members": members})


def empty_record(group, *, generation, timestamp):
    return group_metadata(0, group, {
        "protocol_type": "consumer", "generation": generation, "protocol": None, "leader": None,
        "current_state_timestamp": timestamp, "members": []})


def assert_replays(h: CoordinatorHarness, group="g"):
    """A fresh coordinator fed the log describes the group exactly as the live one does."""
    assert h.replayed().describe_group(group) == h.describe(group)


@pytest.fixture
def h():
    return CoordinatorHarness(start_ms=T0)


# -- one member --------------------------------------------------------------------------------

def test_single_member_join_sync_heartbeat(h):
    r = h.join("g", client_id="a")
    assert r.response is None and r.records == []
    assert h.describe("g").state == "PreparingRebalance"
    assert h.coordinator.next_deadline() == T0 + 3_000

    assert h.advance(2_999).responses == []
    r = h.advance(1)
    assert r.responses == [JoinGroupResponse(
        1, None, member_id="a-1", generation_id=1, protocol_type="consumer",
        protocol_name="range", leader_id="a-1", members=(JoinGroupMember("a-1", None, META),))]
    assert r.records == []
    assert h.describe("g").state == "CompletingRebalance"

    h.advance(10)
    r = h.sync("g", member_id="a-1", generation_id=1, assignments={"a-1": b"A"})
    assert r.response == SyncGroupResponse(r.request_id, None, "consumer", "range", b"A")
    assert r.records == [group_record("g", generation=1, leader="a-1", timestamp=T0 + 3_010,
                                      members=[member_value("a-1", "a", assignment=b"A")])]
    assert h.describe("g").state == "Stable"
    assert h.coordinator.session_deadline("g", "a-1") == T0 + 13_010
    assert_replays(h)

    h.advance(9_000)
    r = h.heartbeat("g", member_id="a-1", generation_id=1)
    assert r.response.error is None and r.records == []
    assert h.coordinator.session_deadline("g", "a-1") == h.now + 10_000
    # a SyncGroup in Stable returns the current assignment again
    assert h.sync("g", member_id="a-1", generation_id=1).response.assignment == b"A"


def test_last_member_leaving_empties_the_group_and_records_it(h):
    (a,) = h.stable_group("g", ["a"])
    h.advance(100)
    r = h.leave("g", member_id=a)
    assert r.response == LeaveGroupResponse(r.request_id, None, members=r.response.members)
    assert [m.error for m in r.response.members] == [None]
    # the rebalance completes at once (nobody left to wait for): generation 2, Empty
    assert r.records == [empty_record("g", generation=2, timestamp=h.now)]
    assert h.describe("g").state == "Empty"
    assert h.coordinator.next_deadline() is None
    assert_replays(h)


# -- several members ---------------------------------------------------------------------------

def test_three_members_join_sync_and_the_follower_waits_for_the_leader(h):
    reqs = [h.join("g", client_id=c).request_id for c in ("a", "b", "c")]
    # members kept arriving during the initial delay: it is extended once (3 s + 3 s)
    assert h.advance(3_000).responses == []
    r = h.advance(3_000)
    answers = {x.member_id: x for x in r.responses}
    assert sorted(answers) == ["a-1", "b-2", "c-3"]
    assert {x.request_id for x in r.responses} == set(reqs)
    assert all(x.generation_id == 1 and x.leader_id == "a-1" for x in r.responses)
    assert answers["a-1"].members == tuple(JoinGroupMember(m, None, META)
                                           for m in ("a-1", "b-2", "c-3"))
    assert answers["b-2"].members == () and answers["c-3"].members == ()

    follower = h.sync("g", member_id="b-2", generation_id=1)
    assert follower.response is None  # parked until the leader syncs
    assert h.heartbeat("g", member_id="c-3", generation_id=1).response.error is None
    leader = h.sync("g", member_id="a-1", generation_id=1,
                    assignments={"a-1": b"A", "b-2": b"B"})  # c-3 left out: gets b""
    assert leader.response.assignment == b"A"
    assert leader.response_to(follower.request_id).assignment == b"B"
    assert leader.records == [group_record(
        "g", generation=1, leader="a-1", timestamp=h.now,
        members=[member_value("a-1", "a", assignment=b"A"),
                 member_value("b-2", "b", assignment=b"B"),
                 member_value("c-3", "c", assignment=b"")])]
    assert h.sync("g", member_id="c-3", generation_id=1).response.assignment == b""
    assert_replays(h)


def test_follower_leaving_rebalances_and_the_rest_rejoin(h):
    a, b, c = h.stable_group("g", ["a", "b", "c"])
    r = h.leave("g", member_id=b)
    assert r.records == []
    assert h.describe("g").state == "PreparingRebalance"
    assert isinstance(h.heartbeat("g", member_id=a, generation_id=1).response.error,
                      RebalanceInProgressError)
    ja = h.join("g", member_id=a)
    assert ja.response is None
    jc = h.join("g", member_id=c)  # the last known member rejoined: the join phase completes
    assert jc.response.generation_id == 2 and jc.response.leader_id == a
    assert jc.response_to(ja.request_id).members == (JoinGroupMember(a, None, META),
                                                     JoinGroupMember(c, None, META))
    r = h.sync("g", member_id=a, generation_id=2, assignments={a: b"A2", c: b"C2"})
    assert r.records == [group_record("g", generation=2, leader=a, timestamp=h.now,
                                      members=[member_value(a, "a", assignment=b"A2"),
                                               member_value(c, "c", assignment=b"C2")])]
    assert_replays(h)


def test_leader_leaving_hands_leadership_to_the_longest_standing_member(h):
    a, b, c = h.stable_group("g", ["a", "b", "c"])
    h.leave("g", member_id=a)
    h.join("g", member_id=c)
    r = h.join("g", member_id=b)
    assert {x.leader_id for x in r.responses} == {b}
    assert r.response.members == (JoinGroupMember(b, None, META), JoinGroupMember(c, None, META))


def test_leader_not_rejoining_is_replaced_by_a_member_that_did(h):
    a, b = h.stable_group("g", ["a", "b"], session_timeout_ms=30_000,
                          rebalance_timeout_ms=10_000)
    jb = h.join("g", member_id=b, session_timeout_ms=30_000, rebalance_timeout_ms=10_000,
                protocols=[("range", b"new")])  # changed metadata: rebalance
    assert jb.response is None
    r = h.advance(10_000)  # the rebalance timeout: a never rejoined and is dropped
    assert [(x.member_id, x.leader_id, x.generation_id) for x in r.responses] == [(b, b, 2)]
    assert [m.member_id for m in h.describe("g").members] == [b]


def test_follower_rejoining_with_the_same_metadata_in_stable_does_not_rebalance(h):
    a, b = h.stable_group("g", ["a", "b"])
    r = h.join("g", member_id=b)
    assert r.response.error is None and r.response.generation_id == 1
    assert r.response.members == () and r.response.leader_id == a
    assert h.describe("g").state == "Stable"


def test_leader_rejoining_in_stable_forces_a_rebalance(h):
    a, b = h.stable_group("g", ["a", "b"])
    assert h.join("g", member_id=a).response is None
    assert h.describe("g").state == "PreparingRebalance"


def completing(h):
    """Two members past the join phase of generation 1, nobody synced yet."""
    reqs = [h.join("g", client_id=c).request_id for c in ("a", "b")]
    h.advance(6_000)
    assert h.describe("g").state == "CompletingRebalance"
    return [h.answer(r).member_id for r in reqs]


def test_member_rejoining_in_completing_rebalance_gets_the_current_generation(h):
    a, b = completing(h)
    r = h.join("g", member_id=a)  # the leader lost its response: same metadata, same answer
    assert r.response.generation_id == 1 and r.response.leader_id == a
    assert len(r.response.members) == 2
    r = h.join("g", member_id=b)
    assert r.response.generation_id == 1 and r.response.members == ()
    assert h.describe("g").state == "CompletingRebalance"


def test_changed_metadata_in_completing_rebalance_restarts_and_fails_parked_syncs(h):
    a, b = completing(h)
    parked = h.sync("g", member_id=b, generation_id=1)
    assert parked.response is None
    r = h.join("g", member_id=a, protocols=[("range", b"changed")])
    assert r.response is None
    assert isinstance(h.answer(parked.request_id).error, RebalanceInProgressError)
    assert h.describe("g").state == "PreparingRebalance"


# -- errors on join, sync, heartbeat -----------------------------------------------------------

@pytest.mark.parametrize("timeout", [5_999, 1_800_001])
def test_session_timeout_out_of_bounds(h, timeout):
    r = h.join("g", client_id="a", session_timeout_ms=timeout)
    assert isinstance(r.response.error, InvalidSessionTimeoutError)
    assert r.response.error.code == 26
    assert h.describe("g") is None  # nothing was created


@pytest.mark.parametrize("timeout", [6_000, 1_800_000])
def test_session_timeout_bounds_are_inclusive(h, timeout):
    assert h.join("g", client_id="a", session_timeout_ms=timeout).response is None


def test_empty_group_id_is_invalid(h):
    assert isinstance(h.join("", client_id="a").response.error, InvalidGroupIdError)
    assert isinstance(h.heartbeat("", member_id="x", generation_id=1).response.error,
                      InvalidGroupIdError)


def test_known_member_id_for_unknown_group(h):
    r = h.join("g", member_id="ghost")
    assert isinstance(r.response.error, UnknownMemberIdError)
    assert isinstance(h.sync("g", member_id="ghost", generation_id=1).response.error,
                      UnknownMemberIdError)
    assert isinstance(h.heartbeat("g", member_id="ghost", generation_id=1).response.error,
                      UnknownMemberIdError)
    leave = h.leave("g", member_id="ghost").response
    assert leave.error is None and isinstance(leave.members[0].error, UnknownMemberIdError)


def test_heartbeat_with_old_generation(h):
    (a,) = h.stable_group("g", ["a"])
    r = h.heartbeat("g", member_id=a, generation_id=0)
    assert isinstance(r.response.error, IllegalGenerationError)
    assert isinstance(h.sync("g", member_id=a, generation_id=7).response.error,
                      IllegalGenerationError)


def test_sync_during_preparing_rebalance_says_rejoin(h):
    a, b = h.stable_group("g", ["a", "b"])
    h.join("g", member_id=a)
    assert isinstance(h.sync("g", member_id=b, generation_id=1).response.error,
                      RebalanceInProgressError)


def test_member_id_required_kip_394(h):
    r = h.join("g", client_id="a", require_known_member_id=True)
    assert isinstance(r.response.error, MemberIdRequiredError)
    assert r.response.member_id == "a-1"
    assert h.describe("g").members == ()  # only pending
    r = h.join("g", member_id="a-1")
    assert r.response is None
    h.advance(3_000)
    assert h.answer(r.request_id).member_id == "a-1"


def test_pending_member_id_lapses_after_the_session_timeout(h):
    h.join("g", client_id="a", require_known_member_id=True)
    h.advance(10_000)
    assert h.describe("g") is None  # the id is gone, and with it the never-used group
    assert isinstance(h.join("g", member_id="a-1").response.error, UnknownMemberIdError)


def test_group_max_size(h):
    h2 = CoordinatorHarness(start_ms=T0, max_size=2)
    h2.stable_group("g", ["a", "b"])
    r = h2.join("g", client_id="c")
    assert isinstance(r.response.error, GroupMaxSizeReachedError)
    assert r.response.member_id == ""


def test_new_member_that_never_completes_its_join_is_dropped(h):
    h2 = CoordinatorHarness(start_ms=T0, initial_rebalance_delay_ms=0)
    (a,) = h2.stable_group("g", ["a"], session_timeout_ms=10_000,
                           rebalance_timeout_ms=600_000)
    # a new member arrives; `a` keeps heartbeating but never rejoins: the join phase would wait
    # the whole rebalance timeout, but the new member's JoinGroup expires first
    r = h2.join("g", client_id="b", rebalance_timeout_ms=600_000)
    while h2.now < T0 + 300_000:
        assert h2.answer(r.request_id) is None
        h2.advance(min(9_000, T0 + 300_000 - h2.now))
        h2.heartbeat("g", member_id=a, generation_id=1)
    answer = h2.answer(r.request_id)  # new_member_join_timeout_ms (5 min) after it joined
    assert isinstance(answer.error, UnknownMemberIdError) and answer.member_id == ""
    assert [m.member_id for m in h2.describe("g").members] == [a]


# -- protocol vote -----------------------------------------------------------------------------

def test_protocol_vote_picks_the_most_voted_common_protocol(h):
    h.join("g", client_id="a", protocols=[("sticky", b"s"), ("range", b"r")])
    h.join("g", client_id="b", protocols=[("range", b"r"), ("sticky", b"s")])
    h.join("g", client_id="c", protocols=[("roundrobin", b"o"), ("range", b"r")])
    r = h.advance(6_000)
    # candidates: range (the only protocol all three support); everyone votes for it
    assert {x.protocol_name for x in r.responses} == {"range"}


@pytest.mark.parametrize("order", [("a", "b"), ("b", "a")])
def test_protocol_vote_tie_does_not_depend_on_join_order(order):
    # one vote each, equal total rank: choose_protocol takes the name that sorts first
    protocols = {"a": [("roundrobin", b""), ("range", b"")],
                 "b": [("range", b""), ("roundrobin", b"")]}
    h = CoordinatorHarness(start_ms=T0)
    for client in order:
        h.join("g", client_id=client, protocols=protocols[client])
    r = h.advance(6_000)
    assert {x.protocol_name for x in r.responses} == {"range"}


def test_member_without_a_common_protocol_is_rejected(h):
    h.join("g", client_id="a", protocols=[("range", b"")])
    r = h.join("g", client_id="b", protocols=[("roundrobin", b"")])
    err = r.response.error
    assert isinstance(err, InconsistentGroupProtocolError) and err.code == 23
    assert r.response.member_id == ""
    assert [m.member_id for m in h.describe("g").members] == ["a-1"]


def test_other_protocol_type_is_rejected(h):
    h.stable_group("g", ["a"])
    r = h.join("g", client_id="x", protocol_type="connect")
    assert isinstance(r.response.error, InconsistentGroupProtocolError)


def test_rejected_first_join_leaves_no_group_behind(h):
    r = h.join("g", client_id="a", protocols=[])
    assert isinstance(r.response.error, InconsistentGroupProtocolError)
    assert h.coordinator.group_ids() == []


# -- initial delay and rebalance timeout -------------------------------------------------------

def test_initial_rebalance_delay_is_capped_by_the_rebalance_timeout():
    h = CoordinatorHarness(start_ms=T0)
    h.join("g", client_id="a", rebalance_timeout_ms=7_000, session_timeout_ms=7_000)
    # a member arrives during every delay; the phase still ends by the rebalance timeout
    h.advance(2_000)
    h.join("g", client_id="b", rebalance_timeout_ms=7_000, session_timeout_ms=7_000)
    h.advance(1_000)  # T0+3000: extended (remaining 4000) to T0+6000
    h.join("g", client_id="c", rebalance_timeout_ms=7_000, session_timeout_ms=7_000)
    h.advance(2_999)
    assert h.describe("g").state == "PreparingRebalance"
    r = h.advance(1)  # T0+6000: extended by min(3000, remaining 1000) to T0+7000
    assert r.responses == []
    assert h.coordinator.next_deadline() == T0 + 7_000
    h.join("g", client_id="d", rebalance_timeout_ms=7_000, session_timeout_ms=7_000)
    r = h.advance(1_000)  # remaining is 0 now: no more extensions
    assert len(r.responses) == 4 and h.describe("g").generation == 1


def test_initial_delay_applies_again_when_an_empty_group_restarts(h):
    (a,) = h.stable_group("g", ["a"])
    h.leave("g", member_id=a)
    h.join("g", client_id="b")
    assert h.coordinator.next_deadline() == h.now + 3_000


def test_rebalance_timeout_evicts_members_that_did_not_rejoin(h):
    kw = dict(session_timeout_ms=30_000, rebalance_timeout_ms=10_000)
    a, b, c = h.stable_group("g", ["a", "b", "c"], **kw)
    h.join("g", member_id=c, protocols=[("range", b"changed")], **kw)
    h.join("g", member_id=a, **kw)
    for _ in range(3):  # b is alive (heartbeats) but never rejoins
        h.advance(3_000)
        assert isinstance(h.heartbeat("g", member_id=b, generation_id=1).response.error,
                          RebalanceInProgressError)
    r = h.advance(1_000)  # 10 s after the rebalance began
    assert sorted(x.member_id for x in r.responses) == [a, c]
    assert [m.member_id for m in h.describe("g").members] == [a, c]
    assert isinstance(h.heartbeat("g", member_id=b, generation_id=2).response.error,
                      UnknownMemberIdError)


def test_session_expiry_evicts_and_rebalances(h):
    a, b = h.stable_group("g", ["a", "b"])
    synced_at = h.now
    for _ in range(3):
        h.advance(3_000)
        h.heartbeat("g", member_id=a, generation_id=1)
    assert h.coordinator.session_deadline("g", b) == synced_at + 10_000
    h.advance_to(synced_at + 9_999)
    assert h.describe("g").state == "Stable"
    r = h.advance(1)
    assert r.records == [] and h.describe("g").state == "PreparingRebalance"
    assert [m.member_id for m in h.describe("g").members] == [a]
    assert isinstance(h.heartbeat("g", member_id=b, generation_id=1).response.error,
                      UnknownMemberIdError)
    r = h.join("g", member_id=a)
    assert r.response.generation_id == 2 and r.response.leader_id == a


def test_late_poll_fires_deadlines_at_their_own_time(h):
    a, b = h.stable_group("g", ["a", "b"])
    synced_at = h.now
    r = h.advance(60_000)  # nobody heartbeats; poll once, a minute late
    # both sessions lapsed at synced_at + 10 s: the group went Empty then, not now
    assert r.records == [empty_record("g", generation=2, timestamp=synced_at + 10_000)]


def test_members_waiting_in_join_or_sync_are_not_evicted_by_their_session(h):
    kw = dict(session_timeout_ms=10_000, rebalance_timeout_ms=60_000)
    a, b, c = h.stable_group("g", ["a", "b", "c"], **kw)
    ja = h.join("g", member_id=a, **kw)
    for _ in range(10):  # a waits in its JoinGroup far beyond its session; b has gone silent;
        h.advance(3_000)  # c heartbeats but does not rejoin, so the join phase goes on
        h.heartbeat("g", member_id=c, generation_id=1)
    assert [m.member_id for m in h.describe("g").members] == [a, c]
    assert h.coordinator.session_deadline("g", a) is None  # suspended while it waits
    assert h.answer(ja.request_id) is None
    for _ in range(10):
        h.advance(3_000)
        h.heartbeat("g", member_id=c, generation_id=1)
    # the rebalance timeout (60 s) has passed: c was dropped, a got generation 2
    assert h.answer(ja.request_id).generation_id == 2
    assert [m.member_id for m in h.describe("g").members] == [a]
    assert h.coordinator.session_deadline("g", a) == h.now + 10_000


def test_sync_deadline_evicts_members_that_never_sync(h):
    reqs = [h.join("g", client_id=c).request_id for c in ("a", "b")]
    h.advance(6_000)
    a, b = (h.answer(r).member_id for r in reqs)
    h.sync("g", member_id=a, generation_id=1, assignments={a: b"A", b: b"B"})
    h.advance(5_000)
    h.heartbeat("g", member_id=a, generation_id=1)
    h.heartbeat("g", member_id=b, generation_id=1)  # alive, but never syncs
    h.advance(5_000)  # the rebalance timeout after the join phase ended
    assert [m.member_id for m in h.describe("g").members] == [a]
    assert h.describe("g").state == "PreparingRebalance"


def test_batch_leave_by_member_and_instance_id(h):
    a, = h.stable_group("g", ["a"])
    s = h.stable_group("g2", ["x"], group_instance_id="inst")[0]
    r = h.leave("g2", members=[MemberIdentity("", "inst"), MemberIdentity("nobody"),
                               MemberIdentity("", "other")])
    errors = [type(m.error) for m in r.response.members]
    assert errors == [type(None), UnknownMemberIdError, UnknownMemberIdError]
    assert h.describe("g2").state == "Empty"
    assert s not in [m.member_id for m in h.describe("g2").members]


def test_deadlines_and_request_ids_are_deterministic():
    def run():
        h = CoordinatorHarness(start_ms=T0)
        h.stable_group("g", ["a", "b", "c"])
        h.leave("g", member_id="b-2")
        h.advance(20_000)
        return h.log, [(k, type(v).__name__, v.error.__class__.__name__)
                       for k, v in h.answers.items()]
    assert run() == run()


def test_arguments_of_the_wrong_type_raise():
    c = GroupCoordinator(GroupConfig())
    with pytest.raises(TypeError):
        c.join_group("g", session_timeout_ms="10", protocols=[], now_ms=0)
    with pytest.raises(TypeError):
        c.join_group("g", session_timeout_ms=10_000, protocols=[("range", "str")], now_ms=0)
    with pytest.raises(TypeError):
        c.heartbeat("g", member_id="m", generation_id=1, now_ms=1.5)


@pytest.mark.parametrize("call", ["expire_offsets", "delete_group"])
def test_calls_whose_caller_keeps_only_records_fire_no_deadline(h, call):
    """The retention pass and a group's delete keep only their Result's records (the store's
    deferred producers): a deadline they fired would lose its answers. The next poll fires
    it, and answers the parked join."""
    join = h.join("g", client_id="a")
    assert join.responses == []  # parked for the initial delay
    h.now += 3_000
    if call == "expire_offsets":
        result = h.coordinator.expire_offsets({}, now_ms=h.now, retention_ms=1)
    else:
        result = h.coordinator.delete_group("other", now_ms=h.now)
    assert (result.records, result.responses) == ([], [])
    assert h.describe("g").state == "PreparingRebalance"
    h.advance(0)
    assert h.answer(join.request_id).error is None
    assert h.describe("g").state == "CompletingRebalance"
