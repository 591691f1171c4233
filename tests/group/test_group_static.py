"""Static membership (KIP-345) and incremental cooperative rebalancing (KIP-429), coordinator
side."""

from __future__ import annotations

import pytest

from offsetlog.errors import (
    FencedInstanceIdError,
    IllegalGenerationError,
    RebalanceInProgressError,
    UnknownMemberIdError,
)
from offsetlog.group import JoinGroupMember, JoinGroupResponse
from offsetlog.group.consumer_protocol import (
    decode_assignment,
    decode_subscription,
    encode_assignment,
    encode_subscription,
)
from offsetlog.log.records import group_metadata
from offsetlog.types import TopicPartition
from support.coordinator_harness import CoordinatorHarness

T0 = 1_000_000
META = b"range-metadata"


@pytest.fixture
def h():
    return CoordinatorHarness(start_ms=T0)


def static_group(h, instances, **kw):
    """A Stable group of static members; returns their member ids (``<instance>-<n>``)."""
    reqs = [h.join("g", client_id=i.upper(), group_instance_id=i, **kw).request_id
            for i in instances]
    h.advance(6_000 if len(instances) > 1 else 3_000)
    ids = [h.answer(r).member_id for r in reqs]
    h.sync("g", member_id=ids[0], generation_id=1, assignments={m: m.encode() for m in ids})
    for m in ids[1:]:
        h.sync("g", member_id=m, generation_id=1)
    assert h.describe("g").state == "Stable"
    return ids


def member_value(member_id, instance, *, assignment):
    return {"member_id": member_id, "group_instance_id": instance, "client_id": instance.upper(),
            "client_host": "", "session_timeout_ms": 10_000, "rebalance_timeout_ms": 10_000,
            "subscription": META, "assignment": assignment}


# -- static members -----------------------------------------------------------------------------

def test_static_member_rejoining_within_its_session_keeps_its_assignment(h):
    a, b = static_group(h, ["ia", "ib"])
    stable_since = h.describe("g").state_timestamp
    h.advance(5_000)  # b restarts: it lost its member id but not its instance id
    r = h.join("g", client_id="IB", group_instance_id="ib")
    new_b = "ib-3"
    assert r.response == JoinGroupResponse(
        r.request_id, None, member_id=new_b, generation_id=1, protocol_type="consumer",
        protocol_name="range", leader_id=a)
    # no rebalance: same generation, Stable; the new member id is recorded at once
    assert h.describe("g").state == "Stable" and h.describe("g").generation == 1
    assert r.records == [group_metadata(0, "g", {
        "protocol_type": "consumer", "generation": 1, "protocol": "range", "leader": a,
        "current_state_timestamp": stable_since,
        "members": [member_value(a, "ia", assignment=a.encode()),
                    member_value(new_b, "ib", assignment=b.encode())]})]
    assert h.sync("g", member_id=new_b, generation_id=1,
                  group_instance_id="ib").response.assignment == b.encode()
    # the old member id is fenced
    old = h.heartbeat("g", member_id=b, generation_id=1, group_instance_id="ib").response
    assert isinstance(old.error, FencedInstanceIdError) and old.error.code == 82
    assert isinstance(h.heartbeat("g", member_id=b, generation_id=1).response.error,
                      UnknownMemberIdError)
    assert h.coordinator.session_deadline("g", new_b) == h.now + 10_000
    assert h.replayed().describe_group("g") == h.describe("g")


def test_static_leader_rejoining_is_told_to_skip_the_assignment(h):
    a, b = static_group(h, ["ia", "ib"])
    r = h.join("g", client_id="IA", group_instance_id="ia")
    new_a = r.response.member_id
    assert r.response.leader_id == new_a and r.response.skip_assignment
    assert r.response.members == (JoinGroupMember(new_a, "ia", META),
                                  JoinGroupMember(b, "ib", META))
    assert h.describe("g").leader == new_a and h.describe("g").generation == 1


def test_static_member_rejoining_after_its_session_expired_triggers_a_rebalance(h):
    a, b = static_group(h, ["ia", "ib"])
    for _ in range(4):  # b is down for longer than its session timeout
        h.advance(3_000)
        h.heartbeat("g", member_id=a, generation_id=1, group_instance_id="ia")
    assert [m.member_id for m in h.describe("g").members] == [a]
    assert h.describe("g").state == "PreparingRebalance"
    assert h.join("g", member_id=a, group_instance_id="ia").response.generation_id == 2
    h.sync("g", member_id=a, generation_id=2, assignments={a: b"all"})
    # b comes back: a new member of the group, so a new rebalance
    r = h.join("g", client_id="IB", group_instance_id="ib")
    assert r.response is None
    assert h.describe("g").state == "PreparingRebalance"
    assert isinstance(h.heartbeat("g", member_id=a, generation_id=2).response.error,
                      RebalanceInProgressError)


def test_static_member_that_does_not_rejoin_is_kept_until_its_session_ends(h):
    kw = dict(session_timeout_ms=30_000, rebalance_timeout_ms=10_000)
    a = h.join("g", client_id="a", **kw).request_id
    s = h.join("g", client_id="S", group_instance_id="s", **kw).request_id
    h.advance(6_000)
    a, s = h.answer(a).member_id, h.answer(s).member_id
    h.sync("g", member_id=a, generation_id=1, assignments={a: b"A", s: b"S"})
    h.join("g", member_id=a, **kw)  # the leader forces a rebalance; s does not rejoin
    r = h.advance(10_000)
    assert [x.member_id for x in r.responses] == [a]  # s got no JoinGroup answer ...
    assert [m.member_id for m in h.describe("g").members] == [a, s]  # ... but is still in
    # s finds out through its heartbeat and rejoins into the running generation
    assert isinstance(h.heartbeat("g", member_id=s, generation_id=1,
                                  group_instance_id="s").response.error, IllegalGenerationError)
    rejoin = h.join("g", member_id=s, group_instance_id="s", **kw)
    assert rejoin.response.generation_id == 2 and rejoin.response.error is None


def test_static_member_replaced_before_it_synced_makes_the_sync_deadline_rebalance(h):
    """A static member that missed a join phase stays in the group (KIP-345) and the generation
    is assigned from the subscription it sent for an earlier one; it owes the generation a
    SyncGroup. If it then restarts, its new member id takes its place without a rebalance, but
    the SyncGroup stays owed under the old id (Kafka's ``replaceStaticMember`` does not move
    ``pendingSyncMembers``), so the sync deadline rebalances the group: the leader gets to
    assign from the restarted member's real subscription. Under cooperative rebalancing this is
    what frees partitions held back for the old process to revoke (it never will)."""
    kw = dict(session_timeout_ms=30_000, rebalance_timeout_ms=10_000)
    a = h.join("g", client_id="a", **kw).request_id
    s = h.join("g", client_id="S", group_instance_id="s", **kw).request_id
    h.advance(6_000)
    a, s = h.answer(a).member_id, h.answer(s).member_id
    h.sync("g", member_id=a, generation_id=1, assignments={a: b"A1", s: b"S1"})
    h.sync("g", member_id=s, generation_id=1, group_instance_id="s")
    h.join("g", member_id=a, **kw)  # a rebalance that s misses (its poll loop is stuck)
    joined_at = h.now + 10_000
    h.advance_to(joined_at)
    assert [m.member_id for m in h.describe("g").members] == [a, s]
    h.sync("g", member_id=a, generation_id=2, assignments={a: b"A2", s: b"S2"})
    assert h.describe("g").state == "Stable"
    h.advance(2_000)  # s's process restarts
    r = h.join("g", client_id="S", group_instance_id="s", **kw)
    new_s = r.response.member_id
    assert r.response.error is None and r.response.generation_id == 2  # no rebalance yet
    assert h.sync("g", member_id=new_s, generation_id=2,
                  group_instance_id="s").response.assignment == b"S2"
    h.advance_to(joined_at + 10_000 - 1)
    h.heartbeat("g", member_id=a, generation_id=2)
    h.heartbeat("g", member_id=new_s, generation_id=2, group_instance_id="s")
    assert h.describe("g").state == "Stable"
    h.advance(1)  # the sync deadline: s's old id never synced generation 2
    d = h.describe("g")
    assert d.state == "PreparingRebalance" and [m.member_id for m in d.members] == [a, new_s]
    assert isinstance(h.heartbeat("g", member_id=new_s, generation_id=2,
                                  group_instance_id="s").response.error,
                      RebalanceInProgressError)


def test_static_member_replaced_after_it_synced_causes_no_rebalance(h):
    """The KIP-345 case proper: the old member id had synced its generation, so the restart
    keeps the generation for good (past the sync deadline and beyond)."""
    a, b = static_group(h, ["ia", "ib"], rebalance_timeout_ms=10_000)
    new_b = h.join("g", client_id="IB", group_instance_id="ib",
                   rebalance_timeout_ms=10_000).response.member_id
    h.sync("g", member_id=new_b, generation_id=1, group_instance_id="ib")
    for _ in range(10):
        h.advance(3_000)
        h.heartbeat("g", member_id=a, generation_id=1, group_instance_id="ia")
        h.heartbeat("g", member_id=new_b, generation_id=1, group_instance_id="ib")
    assert h.describe("g").state == "Stable" and h.describe("g").generation == 1


@pytest.mark.parametrize("a_has,rebalances", [([2, 3], False), ([3], True)],
                         ids=["claim-went-to-a", "claim-held-back"])
def test_static_member_replaced_while_its_claim_is_held_back_rebalances(h, a_has, rebalances):
    """s's subscription claims t-0..2 and its assignment keeps t-0, t-1. If a got t-2, s's
    old claim is merely stale (eager groups look like this: a member lists its previous
    assignment): the restart takes s's place without a rebalance (KIP-345). If nobody got t-2,
    the (cooperative) leader is holding it back until s revokes it; the restarted s owns
    nothing and will never revoke it, so the replacement rebalances at once (a departure from
    Kafka, which would leave t-2 unowned until some other rebalance)."""
    def sub(owned):
        return [("cooperative-sticky", encode_subscription(
            ["t"], owned_partitions=[("t", p) for p in owned], generation_id=1 if owned else -1))]
    a = h.join("g", client_id="a", protocols=sub([])).request_id
    s = h.join("g", client_id="S", group_instance_id="s", protocols=sub([0, 1, 2])).request_id
    h.advance(6_000)
    a, s = h.answer(a).member_id, h.answer(s).member_id
    h.sync("g", member_id=a, generation_id=1,
           assignments={a: encode_assignment([("t", p) for p in a_has]),
                        s: encode_assignment([("t", 0), ("t", 1)])})
    h.sync("g", member_id=s, generation_id=1, group_instance_id="s")
    r = h.join("g", client_id="S", group_instance_id="s", protocols=sub([]))
    if rebalances:
        assert r.response is None and h.describe("g").state == "PreparingRebalance"
        assert r.records == []
    else:
        assert r.response.generation_id == 1 and h.describe("g").state == "Stable"


def test_static_replacement_fences_a_parked_join_of_the_old_member_id(h):
    a, b = static_group(h, ["ia", "ib"])
    parked_b = h.join("g", member_id=b, group_instance_id="ib", protocols=[("range", b"x")])
    assert parked_b.response is None and h.describe("g").state == "PreparingRebalance"
    # b restarts and rejoins under its instance id: its old JoinGroup is fenced, the new one
    # takes its place in the rebalance
    r = h.join("g", client_id="IB", group_instance_id="ib")
    old = h.answer(parked_b.request_id)
    assert isinstance(old.error, FencedInstanceIdError) and old.member_id == b
    assert r.response is None
    done = h.join("g", member_id=a, group_instance_id="ia")
    new_b = h.answer(r.request_id)
    assert new_b.generation_id == done.response.generation_id == 2
    assert [m.member_id for m in done.response.members] == [a, new_b.member_id]


def test_unknown_instance_id_on_a_known_member_id_is_rejected(h):
    a, b = static_group(h, ["ia", "ib"])
    r = h.join("g", member_id=a, group_instance_id="nope")
    assert isinstance(r.response.error, UnknownMemberIdError)


# -- cooperative rebalancing ----------------------------------------------------------------------

def tps(*numbers):
    return [TopicPartition("t", n) for n in numbers]


def coop(owned=(), generation=-1):
    return [("cooperative-sticky", encode_subscription(["t"], owned_partitions=owned,
                                                       generation_id=generation))]


def test_cooperative_two_consecutive_rebalances(h):
    """KIP-429 needs nothing special from the coordinator: members keep their partitions (and
    keep committing) while the group rebalances, the leader's cooperative assignment only
    revokes, and a member that has revoked partitions rejoins with new metadata (its owned
    partitions changed), which starts the follow-up rebalance that hands them out."""
    r1 = h.join("g", client_id="m1", protocols=coop())
    r2 = h.join("g", client_id="m2", protocols=coop())
    h.advance(6_000)
    m1, m2 = h.answer(r1.request_id).member_id, h.answer(r2.request_id).member_id
    h.sync("g", member_id=m1, generation_id=1,
           assignments={m1: encode_assignment(tps(0, 1)), m2: encode_assignment(tps(2, 3))})
    h.sync("g", member_id=m2, generation_id=1)

    # rebalance 1: m3 joins; m1 and m2 rejoin with what they own
    r3 = h.join("g", client_id="m3", protocols=coop())
    h.commit("g", member_id=m1, generation_id=1)  # still consuming: accepted while preparing
    j1 = h.join("g", member_id=m1, protocols=coop(tps(0, 1), 1))
    j2 = h.join("g", member_id=m2, protocols=coop(tps(2, 3), 1))
    leader_view = h.answer(j1.request_id)
    assert leader_view.generation_id == 2 and leader_view.protocol_name == "cooperative-sticky"
    owned = {m.member_id: decode_subscription(m.metadata)["owned_partitions"]
             for m in leader_view.members}
    m3 = h.answer(r3.request_id).member_id
    assert owned == {m1: tps(0, 1), m2: tps(2, 3), m3: []}
    # the cooperative leader revokes t-3 from m2 but does not give it to m3 yet
    s1 = h.sync("g", member_id=m1, generation_id=2,
                assignments={m1: encode_assignment(tps(0, 1)), m2: encode_assignment(tps(2)),
                             m3: encode_assignment([])})
    assert s1.records[0][4]["generation"] == 2
    assert decode_assignment(h.sync("g", member_id=m2, generation_id=2).response.assignment) \
        == tps(2)
    h.sync("g", member_id=m3, generation_id=2)
    assert j2.response.generation_id == 2

    # rebalance 2: m2 revoked t-3 and rejoins with its new ownership: different metadata
    j2 = h.join("g", member_id=m2, protocols=coop(tps(2), 2))
    assert j2.response is None and h.describe("g").state == "PreparingRebalance"
    h.commit("g", member_id=m1, generation_id=2)  # m1 keeps consuming t-0, t-1 meanwhile
    for m in (m1, m3):
        assert isinstance(h.heartbeat("g", member_id=m, generation_id=2).response.error,
                          RebalanceInProgressError)
    h.join("g", member_id=m1, protocols=coop(tps(0, 1), 2))
    done = h.join("g", member_id=m3, protocols=coop((), 2))
    assert done.response.generation_id == 3
    s = h.sync("g", member_id=m1, generation_id=3,
               assignments={m1: encode_assignment(tps(0, 1)), m2: encode_assignment(tps(2)),
                            m3: encode_assignment(tps(3))})
    assert s.records[0][4]["generation"] == 3
    assert decode_assignment(h.sync("g", member_id=m3, generation_id=3).response.assignment) \
        == tps(3)
    assert h.replayed().describe_group("g") == h.describe("g")
