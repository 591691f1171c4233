"""Apache Kafka as the judge of a steady member's Heartbeats and commits: after its first
heartbeat, offsetlog's request loop answers them from the partition's steady board, with no
Python call (docs/PROTOCOL.md, "The compiled request path"), until the coordinator changes
the group. Each case runs one session against both targets and compares every answer
(support/kafka_diff.py): the board's answers, what it leaves to the coordinator (a wrong
generation, member or instance), and the first answers after a change."""

from __future__ import annotations

import pytest

from support.kafka_diff import at, compare
from support.kafka_steps import (
    Recv,
    Req,
    Send,
    await_state,
    commit,
    formed,
    heartbeat,
    join,
    join_body,
    leader_sync,
    ref,
    sync,
)

HB_VERSIONS = range(0, 5)


def _member_commit(gid, offset, *, gen=None, member=None, inst=None):
    return commit(gid, 8, gen=gen if gen is not None else ref("m_gen"),
                  member=member if member is not None else ref("m"), inst=inst, offset=offset)


def _codes(answers, indexes):
    """The error codes of the answers at ``indexes`` (a commit's: its one partition's)."""
    out = []
    for i in indexes:
        try:
            out.append(at(answers, f"{i}.error_code"))
        except KeyError:
            out.append(at(answers, f"{i}.topics.0.partitions.0.error_code"))
    return [str(c) for c in out]


@pytest.mark.parametrize("v", HB_VERSIONS)
def test_a_steady_members_heartbeats_and_commits_then_a_rebalance(targets, gid, v):
    steps = formed(gid, 5)
    start = len(steps)
    steps += [heartbeat(gid, v), heartbeat(gid, v), _member_commit(gid, 3), heartbeat(gid, v),
              heartbeat(gid, v, gen=lambda c: c["m_gen"] + 1),
              heartbeat(gid, v, member="no-such-member"),
              _member_commit(gid, 4, gen=lambda c: c["m_gen"] - 1),
              heartbeat(gid, v), _member_commit(gid, 5)]
    end = len(steps)
    # a second member joins: the first's next heartbeat must tell it to rejoin
    b_join = join(gid, 5, as_="n", conn="b")
    steps += b_join[:-1]                                      # MEMBER_ID_REQUIRED
    steps.append(Send(11, 5, b_join[-1].body, conn="b"))      # parked
    steps.append(await_state(gid, "PreparingRebalance"))
    during = len(steps) - 1  # (answers are counted without the Send's)
    steps += [heartbeat(gid, v), _member_commit(gid, 6)]
    steps.append(Req(11, 5, join_body(gid, ref("m")), conn="a",
                     save={"m_gen": lambda r: r.generation_id}))
    steps.append(Recv("b", save={"n_gen": lambda r: r.generation_id}))
    steps.append(leader_sync(gid, 5))
    steps.append(sync(gid, 5, "n", conn="b"))
    after = len(steps) - 1
    steps += [heartbeat(gid, v), heartbeat(gid, v), heartbeat(gid, v, "n", conn="b"),
              _member_commit(gid, 7)]

    def check(answers):
        assert _codes(answers, range(start, end)) == [
            "NONE", "NONE", "NONE", "NONE", "ILLEGAL_GENERATION", "UNKNOWN_MEMBER_ID",
            "ILLEGAL_GENERATION", "NONE", "NONE"]
        assert _codes(answers, [during, during + 1]) == ["REBALANCE_IN_PROGRESS", "NONE"]
        assert _codes(answers, range(after, after + 4)) == ["NONE"] * 4
    compare(*targets, steps, check=check)


@pytest.mark.parametrize("v", [3, 4])
def test_a_steady_static_members_heartbeats_then_its_new_process(targets, gid, v):
    """A static member's heartbeats, one naming another instance, then the instance's new
    process takes over: the old member id is fenced from its next heartbeat and commit."""
    steps = formed(gid, 5, inst="i-1")
    start = len(steps)
    steps += [heartbeat(gid, v, inst="i-1"), heartbeat(gid, v, inst="i-1"),
              heartbeat(gid, v), heartbeat(gid, v, inst="i-2"),
              _member_commit(gid, 3, inst="i-1")]
    steps += join(gid, 5, as_="n", conn="b", inst="i-1")
    fenced = len(steps)
    steps += [heartbeat(gid, v, inst="i-1"), _member_commit(gid, 4, inst="i-1"),
              heartbeat(gid, v, "n", conn="b", inst="i-1")]

    def check(answers):
        assert _codes(answers, range(start, start + 5))[:3] == ["NONE"] * 3
        assert _codes(answers, range(fenced, fenced + 2)) == ["FENCED_INSTANCE_ID"] * 2
    compare(*targets, steps, check=check)
