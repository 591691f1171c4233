"""Apache Kafka as the judge of the group coordinator: join, sync, heartbeat, leave,
describe and list, right and wrong, every version the clients use; each case is one
session run against both targets and compared field by field (support/kafka_diff.py)."""

from __future__ import annotations

import pytest

from support.kafka_diff import at, compare
from support.kafka_steps import (
    Recv,
    Req,
    Send,
    await_state,
    commit,
    describe,
    formed,
    heartbeat,
    join,
    join_body,
    leader_sync,
    leave,
    protocols,
    ref,
    sync,
)

JOIN_VERSIONS = range(0, 10)
SYNC_VERSIONS = range(0, 6)
HB_VERSIONS = range(0, 5)
LEAVE_VERSIONS = range(0, 6)
DESCRIBE_VERSIONS = range(0, 7)  # v6: KIP-1043's GROUP_ID_NOT_FOUND


def expect(**paths):
    """A check of what the case is about, on Kafka's answers: ``{"0.error_code": ...}``
    written as keyword arguments with ``__`` for dots."""
    def check(answers):
        for path, value in paths.items():
            assert at(answers, path.replace("__", ".").lstrip("_")) == value, path
    return check


@pytest.mark.parametrize("v", JOIN_VERSIONS)
def test_join_sync_heartbeat_leave_of_one_member(targets, gid, v):
    steps = formed(gid, v) + [heartbeat(gid, min(v, 4)), describe(gid, 5),
                              leave(gid, min(v, 5))]
    first = 1 if v >= 4 else 0
    compare(*targets, steps, check=expect(**{f"_{first}__error_code": "NONE",
                                             f"_{first + 3}__groups__0__group_state": "Stable"}))


@pytest.mark.parametrize("v", JOIN_VERSIONS)
def test_join_with_an_unknown_member_id(targets, gid, v):
    steps = [Req(11, v, join_body(gid, "no-such-member"))]
    compare(*targets, steps, check=expect(_0__error_code="UNKNOWN_MEMBER_ID"))


@pytest.mark.parametrize("v", JOIN_VERSIONS)
def test_join_with_a_session_timeout_below_the_minimum(targets, gid, v):
    steps = [Req(11, v, join_body(gid, session=100))]
    compare(*targets, steps, check=expect(_0__error_code="INVALID_SESSION_TIMEOUT"))


@pytest.mark.parametrize("v", JOIN_VERSIONS)
def test_join_with_an_empty_group_id(targets, v):
    steps = [Req(11, v, join_body(""))]
    compare(*targets, steps, check=expect(_0__error_code="INVALID_GROUP_ID"))


@pytest.mark.parametrize("v", JOIN_VERSIONS)
def test_join_with_no_protocols(targets, gid, v):
    steps = [Req(11, v, join_body(gid, protos=[]))]
    compare(*targets, steps, check=expect(_0__error_code="INCONSISTENT_GROUP_PROTOCOL"))


@pytest.mark.parametrize("v", [0, 3, 5, 7, 9])
def test_join_with_another_protocol_type(targets, gid, v):
    steps = formed(gid, v) + [Req(11, v, join_body(gid, ptype="connect"), conn="b")]
    compare(*targets, steps, check=expect(**{f"_{len(steps) - 1}__error_code":
                                             "INCONSISTENT_GROUP_PROTOCOL"}))


@pytest.mark.parametrize("v", [1, 5, 9])
def test_join_with_no_protocol_in_common(targets, gid, v):
    steps = formed(gid, v) + [Req(11, v, join_body(gid, protos=protocols("roundrobin")),
                                  conn="b")]
    compare(*targets, steps, check=expect(**{f"_{len(steps) - 1}__error_code":
                                             "INCONSISTENT_GROUP_PROTOCOL"}))


@pytest.mark.parametrize("v", SYNC_VERSIONS)
def test_sync_of_an_unknown_group(targets, gid, v):
    steps = [sync(gid, v, gen=1, assignments=[]) ]
    steps[0].body["member_id"] = "no-such-member"
    compare(*targets, steps)


@pytest.mark.parametrize("v", SYNC_VERSIONS)
def test_sync_with_a_wrong_generation(targets, gid, v):
    steps = formed(gid, 5) + [sync(gid, v, gen=lambda c: c["m_gen"] + 1)]
    compare(*targets, steps, check=expect(**{f"_{len(steps) - 1}__error_code":
                                             "ILLEGAL_GENERATION"}))


@pytest.mark.parametrize("v", SYNC_VERSIONS)
def test_sync_of_an_unknown_member(targets, gid, v):
    steps = formed(gid, 5) + [Req(14, v, dict(group_id=gid, generation_id=ref("m_gen"),
                                              member_id="no-such-member", group_instance_id=None,
                                              protocol_type="consumer", protocol_name="range",
                                              assignments=[]))]
    compare(*targets, steps, check=expect(**{f"_{len(steps) - 1}__error_code":
                                             "UNKNOWN_MEMBER_ID"}))


@pytest.mark.parametrize("v", HB_VERSIONS)
def test_heartbeat_of_an_unknown_group(targets, gid, v):
    steps = [heartbeat(gid, v, gen=1, member="no-such-member")]
    compare(*targets, steps)


@pytest.mark.parametrize("v", HB_VERSIONS)
def test_heartbeat_with_a_wrong_generation(targets, gid, v):
    steps = formed(gid, 5) + [heartbeat(gid, v, gen=lambda c: c["m_gen"] + 1)]
    compare(*targets, steps, check=expect(**{f"_{len(steps) - 1}__error_code":
                                             "ILLEGAL_GENERATION"}))


@pytest.mark.parametrize("v", HB_VERSIONS)
def test_heartbeat_of_an_unknown_member(targets, gid, v):
    steps = formed(gid, 5) + [heartbeat(gid, v, member="no-such-member")]
    compare(*targets, steps, check=expect(**{f"_{len(steps) - 1}__error_code":
                                             "UNKNOWN_MEMBER_ID"}))


@pytest.mark.parametrize("v", HB_VERSIONS)
def test_heartbeat_during_a_rebalance_then_both_rejoin(targets, gid, v):
    """A second member's join parks until the first rejoins; the first's heartbeat meanwhile
    is REBALANCE_IN_PROGRESS; then both are answered, the first still the leader."""
    steps = formed(gid, 5)
    b_join = join(gid, 5, as_="n", conn="b")
    steps += b_join[:-1]                                      # MEMBER_ID_REQUIRED
    steps.append(Send(11, 5, b_join[-1].body, conn="b"))      # parked
    steps.append(await_state(gid, "PreparingRebalance"))
    steps.append(heartbeat(gid, v))
    steps.append(Req(11, 5, join_body(gid, ref("m")), conn="a",
                     save={"m_gen": lambda r: r.generation_id}))
    steps.append(Recv("b", save={"n_gen": lambda r: r.generation_id}))
    steps.append(leader_sync(gid, 5))
    steps.append(sync(gid, 5, "n", conn="b"))
    steps.append(describe(gid, 5))
    hb = len(formed(gid, 5)) + 2
    compare(*targets, steps, check=expect(**{f"_{hb}__error_code": "REBALANCE_IN_PROGRESS",
                                             f"_{hb + 1}__error_code": "NONE"}))


@pytest.mark.parametrize("v", [5, 6, 7, 8, 9])
def test_a_static_member_replaced_is_fenced(targets, gid, v):
    """A static member (group.instance.id) rejoining with no member id takes the instance
    over with a new member id; the old member id is then FENCED_INSTANCE_ID."""
    steps = formed(gid, v, inst="i-1")
    steps += join(gid, v, as_="n", conn="b", inst="i-1")
    steps += [heartbeat(gid, 4, inst="i-1"), heartbeat(gid, 4, "n", conn="b", inst="i-1"),
              describe(gid, 5)]
    compare(*targets, steps, check=expect(**{f"_{len(steps) - 3}__error_code":
                                             "FENCED_INSTANCE_ID"}))


@pytest.mark.parametrize("v", [3, 4, 5])
def test_a_static_member_leaves_by_instance_id(targets, gid, v):
    steps = formed(gid, 5, inst="i-1") + [
        Req(13, v, dict(group_id=gid, members=[dict(member_id="", group_instance_id="i-1",
                                                    reason=None)])),
        Req(13, v, dict(group_id=gid, members=[dict(member_id="", group_instance_id="i-2",
                                                    reason=None)])),
        describe(gid, 5)]
    compare(*targets, steps)


@pytest.mark.parametrize("v", LEAVE_VERSIONS)
def test_leave_of_an_unknown_group(targets, gid, v):
    compare(*targets, [leave(gid, v, member="no-such-member")])


@pytest.mark.parametrize("v", LEAVE_VERSIONS)
def test_leave_of_an_unknown_member(targets, gid, v):
    steps = formed(gid, 5) + [leave(gid, v, member="no-such-member"), describe(gid, 5)]
    compare(*targets, steps)


@pytest.mark.parametrize("v", DESCRIBE_VERSIONS)
def test_describe_an_unknown_group(targets, gid, v):
    compare(*targets, [describe(gid, v)],
            check=expect(_0__groups__0__group_state="Dead"))


@pytest.mark.parametrize("v", DESCRIBE_VERSIONS)
def test_describe_a_stable_group(targets, gid, v):
    steps = formed(gid, 5) + [describe(gid, v)]
    compare(*targets, steps)


@pytest.mark.parametrize("v", DESCRIBE_VERSIONS)
def test_describe_an_empty_group_id(targets, v):
    """Difference (docs/PROTOCOL.md): Kafka keeps offsets for the group "", so after a
    commit it describes it as Empty; offsetlog refuses the commit and describes "" as
    Kafka describes a group it does not know (Dead)."""
    known = {"0.topics.0.partitions.0.error_code": ("NONE", "INVALID_GROUP_ID"),
             "1.groups.0.group_state": ("Empty", "Dead")}
    if v >= 6:  # and from v6 a group offsetlog does not have is not found (KIP-1043)
        known.update({"1.groups.0.error_code": ("NONE", "GROUP_ID_NOT_FOUND"),
                      "1.groups.0.error_message": (None, "MESSAGE"),
                      "1.groups.0.authorized_operations": (3400, -2147483648)})
    compare(*targets, [commit("", 8), describe("", v)], known=known)


@pytest.mark.parametrize("v", DESCRIBE_VERSIONS)
def test_describe_a_group_that_was_left(targets, gid, v):
    steps = formed(gid, 5) + [leave(gid, 5), describe(gid, v)]
    compare(*targets, steps, check=expect(**{f"_{len(steps) - 1}__groups__0__group_state":
                                             "Empty"}))


def _rebalancing(gid):
    """A Stable group of member m (connection a) that member n (connection b) is joining:
    n's JoinGroup is parked, the group is PreparingRebalance."""
    b_join = join(gid, 5, as_="n", conn="b")
    return formed(gid, 5) + b_join[:-1] + [Send(11, 5, b_join[-1].body, conn="b"),
                                           await_state(gid, "PreparingRebalance")]


def _rejoin_all(gid):
    return [Req(11, 5, join_body(gid, ref("m")), save={"m_gen": lambda r: r.generation_id}),
            Recv("b", save={"n_gen": lambda r: r.generation_id}),
            leader_sync(gid, 5), sync(gid, 5, "n", conn="b"), describe(gid, 5)]


@pytest.mark.parametrize("v", SYNC_VERSIONS)
def test_sync_during_a_rebalance(targets, gid, v):
    steps = _rebalancing(gid)
    steps.append(sync(gid, v))
    at_sync = len(steps) - 1
    compare(*targets, steps + _rejoin_all(gid),
            check=expect(**{f"_{at_sync - 1}__error_code": "REBALANCE_IN_PROGRESS"}))


def answered(steps) -> int:
    """How many answers ``steps`` get (a parked Send's comes with a later Recv)."""
    return sum(not isinstance(s, Send) for s in steps)


@pytest.mark.parametrize("v", [2, 5, 8, 9])
def test_commit_during_a_rebalance(targets, gid, v):
    """While the group prepares a rebalance, a member's commit with the generation it has
    is accepted (Kafka refuses commits only while the group waits for the leader's
    SyncGroup)."""
    from support.kafka_steps import commit, fetch
    steps = _rebalancing(gid) + [commit(gid, v, gen=ref("m_gen"), member=ref("m"))]
    compare(*targets, steps + _rejoin_all(gid) + [fetch(gid, 5)], check=expect(**{
        f"_{answered(steps) - 1}__topics__0__partitions__0__error_code": "NONE"}))


@pytest.mark.parametrize("v", [2, 5, 8, 9])
def test_commit_while_the_group_awaits_the_leaders_sync(targets, gid, v):
    from support.kafka_steps import commit
    steps = _rebalancing(gid) + _rejoin_all(gid)[:2] + [
        commit(gid, v, gen=ref("n_gen"), member=ref("n"), conn="b")]
    compare(*targets, steps + _rejoin_all(gid)[2:], check=expect(**{
        f"_{answered(steps) - 1}__topics__0__partitions__0__error_code":
            "REBALANCE_IN_PROGRESS"}))


@pytest.mark.parametrize("v", [0, 3, 5])
def test_a_member_leaving_starts_a_rebalance(targets, gid, v):
    steps = formed(gid, 5)
    b_join = join(gid, 5, as_="n", conn="b")
    steps += b_join[:-1] + [Send(11, 5, b_join[-1].body, conn="b"),
                            await_state(gid, "PreparingRebalance")] + _rejoin_all(gid)
    steps += [leave(gid, v, "n", conn="b"), heartbeat(gid, 4), describe(gid, 5),
              Req(11, 5, join_body(gid, ref("m")), save={"m_gen": lambda r: r.generation_id}),
              leader_sync(gid, 5), heartbeat(gid, 4), describe(gid, 5)]
    compare(*targets, steps, check=expect(**{f"_{answered(steps) - 6}__error_code":
                                             "REBALANCE_IN_PROGRESS"}))


@pytest.mark.parametrize("v", [5, 7, 9])
def test_a_static_member_joins_with_a_wrong_member_id(targets, gid, v):
    steps = formed(gid, v, inst="i-1") + [
        Req(11, v, join_body(gid, "not-the-member-id", inst="i-1"), conn="b"),
        heartbeat(gid, 4, inst="i-1"), describe(gid, 5)]
    compare(*targets, steps, check=expect(**{f"_{len(steps) - 3}__error_code":
                                             "FENCED_INSTANCE_ID"}))


@pytest.mark.parametrize("v", [5, 6, 7, 8, 9])
def test_a_static_leader_rejoins_a_stable_group(targets, gid, v):
    """The static leader restarts (no member id, same instance id): it takes a new member
    id and keeps the current assignment; from v9 it is told skip_assignment, before it is
    answered as a follower (the old leader id, no members)."""
    steps = formed(gid, v, inst="i-1")
    steps += join(gid, v, as_="n", conn="b", inst="i-1")
    steps += [Req(14, 5, dict(group_id=gid, generation_id=ref("n_gen"), member_id=ref("n"),
                              group_instance_id="i-1", protocol_type="consumer",
                              protocol_name="range", assignments=[]), conn="b"),
              heartbeat(gid, 4, "n", conn="b", inst="i-1"), describe(gid, 5)]
    compare(*targets, steps)


@pytest.mark.parametrize("v", DESCRIBE_VERSIONS)
def test_describe_a_group_that_only_commits_offsets(targets, gid, v):
    compare(*targets, [commit(gid, 8), describe(gid, v)],
            check=expect(_1__groups__0__group_state="Empty"))


@pytest.mark.parametrize("v", [0, 5])
def test_describe_a_group_awaiting_the_leaders_sync(targets, gid, v):
    steps = join(gid, 5) + [describe(gid, v), leader_sync(gid, 5), describe(gid, v)]
    compare(*targets, steps, check=expect(_2__groups__0__group_state="CompletingRebalance",
                                          _4__groups__0__group_state="Stable"))
