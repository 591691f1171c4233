"""Members that stall, stop polling, restart (static membership) or are fenced."""

from __future__ import annotations

import pytest

from offsetlog import TopicPartition
from offsetlog.errors import FencedInstanceIdError, UnknownMemberIdError
from offsetlog.member import MemberState
from support.member_harness import (
    GROUP,
    HEARTBEAT,
    MAX_POLL,
    SESSION,
    STEP,
    check_exact_cover,
    partitions,
)

ALL = partitions("t", 6)


def test_a_stalled_member_is_evicted_and_its_late_commit_is_fenced(harness):
    a, b, c = (harness.member(n) for n in "abc")
    harness.run_until(harness.stable)
    check_exact_cover([a, b, c], ALL)
    gen = a.generation_id
    b_parts = sorted(b.assignment())
    b_id = b.member_id
    for tp in b_parts:
        b.record_consumed(tp, 10)
    b.commit_sync()

    harness.stalled.add(id(b))  # no heartbeats, no polls: a GC pause, a hung host
    stalled_at = harness.clock.now
    harness.run_until(lambda: harness.stable([a, c]) and a.generation_id > gen)
    check_exact_cover([a, c], ALL)  # the others took b's partitions
    d = harness.store.describe_group(GROUP)
    assert b_id not in {m.member_id for m in d.members}
    # evicted by its session timeout (counted from its last heartbeat), promptly
    assert stalled_at - HEARTBEAT + SESSION <= d.state_timestamp <= stalled_at + SESSION + 4 * STEP

    for tp in b_parts:  # the stalled member wakes up and commits what it was doing
        b.record_consumed(tp, 99)
    with pytest.raises(UnknownMemberIdError):
        b.commit_sync()
    assert {tp: o.offset for tp, o in harness.store.fetch(GROUP, b_parts).items()} == {
        tp: 10 for tp in b_parts}  # nothing of the fenced commit was written
    b.listener.clear()
    harness.stalled.discard(id(b))
    b.poll()
    assert b.listener.events[0] == ("lost", b_parts, -1)  # lost, not revoked: not its to commit
    assert b.assignment() == set()
    harness.run_until(harness.stable)  # and it rejoins under a fresh member id
    assert b.member_id not in ("", b_id)
    check_exact_cover([a, b, c], ALL)


def test_an_evicted_member_learns_it_from_its_heartbeat(harness):
    harness.member("a")  # a second member, so the group has one to rebalance to
    b = harness.member("b")
    harness.run_until(harness.stable)
    owned = sorted(b.assignment())
    harness.stalled.add(id(b))
    harness.run_for(SESSION + 2 * STEP)
    harness.stalled.discard(id(b))
    b.listener.clear()
    b.tick()  # the heartbeat answer (UnknownMemberId) resets the member ...
    assert b.member_id == "" and b.generation_id == -1 and b.state is MemberState.UNJOINED
    assert b.listener.events == []  # ... and callbacks wait for the caller's poll
    b.poll()
    assert b.listener.events == [("lost", owned, -1)]


def test_a_member_that_stops_polling_leaves_the_group(harness):
    a, b = harness.member("a"), harness.member("b")
    harness.run_until(harness.stable)
    gen = b.generation_id
    a_parts = sorted(a.assignment())
    harness.not_polling.add(id(a))  # its heartbeat thread runs on; its processing loop is stuck
    last_poll = harness.clock.now
    harness.run_until(lambda: harness.stable([b]) and b.generation_id > gen)
    # it left as soon as max_poll_interval_ms passed (its heartbeats alone would keep it in)
    assert harness.clock.now <= last_poll + MAX_POLL + 4 * STEP
    assert b.assignment() == ALL
    assert a.member_id == "" and a.state is MemberState.UNJOINED
    assert a.assignment() == set(a_parts)  # nothing happens behind the caller's back ...
    a.listener.clear()
    harness.not_polling.discard(id(a))
    a.poll()  # ... the next poll reports the partitions lost and rejoins
    assert a.listener.events[0] == ("lost", a_parts, -1)
    harness.run_until(harness.stable)
    check_exact_cover([a, b], ALL)


def test_static_member_restarts_within_its_session_without_a_rebalance(harness):
    a = harness.member("a", group_instance_id="inst-a")
    b = harness.member("b", group_instance_id="inst-b")
    harness.run_until(harness.stable)
    assert a.is_leader
    gen, a_parts, b_parts = a.generation_id, a.assignment(), b.assignment()
    old_id = a.member_id
    b.listener.clear()

    a.close()  # static: revokes locally, but sends no LeaveGroup
    assert a.listener.kinds()[-1] == "revoked"
    harness.remove(a)
    harness.run_for(SESSION // 2)
    a2 = harness.member("a", group_instance_id="inst-a")
    harness.run_until(harness.stable)
    assert a2.member_id != old_id
    assert a2.generation_id == gen and b.generation_id == gen  # no rebalance
    assert a2.is_leader  # it took the leader's place, with skip_assignment
    assert a2.assignment() == a_parts and b.assignment() == b_parts
    assert b.listener.events == []
    assert harness.store.describe_group(GROUP).generation == gen
    # the old member id is fenced; the new one commits
    with pytest.raises(FencedInstanceIdError):
        harness.store.commit_sync(GROUP, {TopicPartition("t", 0): 1}, generation_id=gen,
                                  member_id=old_id, group_instance_id="inst-a")
    a2.commit_sync({tp: 5 for tp in a_parts})


def test_static_member_restarting_after_its_session_causes_rebalances(harness):
    a = harness.member("a", group_instance_id="inst-a")
    b = harness.member("b", group_instance_id="inst-b")
    harness.run_until(harness.stable)
    gen = a.generation_id
    a.close()
    harness.remove(a)
    harness.run_until(lambda: harness.stable([b]) and b.generation_id > gen)
    assert b.generation_id == gen + 1 and b.assignment() == ALL  # evicted after its session
    a2 = harness.member("a", group_instance_id="inst-a")
    harness.run_until(lambda: harness.stable() and a2.generation_id > gen + 1)
    assert a2.generation_id == gen + 2
    check_exact_cover([a2, b], ALL)


def test_a_static_zombie_is_fenced_and_raises(harness):
    """Two processes with one instance id: the newer takes over; the older learns from its
    heartbeat that it is fenced, loses its partitions, and poll raises from then on."""
    a = harness.member("a", group_instance_id="inst-a")
    b = harness.member("b")
    harness.run_until(harness.stable)
    a_parts = sorted(a.assignment())
    harness.stalled.add(id(a))  # a long pause; meanwhile its replacement starts
    a2 = harness.member("a", group_instance_id="inst-a")
    harness.run_until(lambda: harness.stable([a2, b]))
    harness.run_for(HEARTBEAT)
    harness.stalled.discard(id(a))
    a.listener.clear()
    a.tick()  # a heartbeat is due: it is answered fenced
    with pytest.raises(FencedInstanceIdError):
        a.poll()
    assert a.listener.events == [("lost", a_parts, -1)]
    with pytest.raises(FencedInstanceIdError):
        a.poll()
    with pytest.raises(FencedInstanceIdError):
        a.commit_sync({TopicPartition("t", 0): 1})
    harness.stalled.add(id(a))  # the harness should not poll it any more
    harness.run_for(4 * STEP)
    assert harness.stable([a2, b])
    check_exact_cover([a2, b], ALL)


def test_a_static_member_that_stops_polling_keeps_its_place_until_its_session_ends(harness):
    """Kafka's static members send no LeaveGroup, not even when poll() stalls: the member stops
    heartbeating and the group rebalances only when its session runs out."""
    a = harness.member("a", group_instance_id="inst-a")
    b = harness.member("b")
    harness.run_until(harness.stable)
    gen = b.generation_id
    harness.not_polling.add(id(a))
    last_poll = harness.clock.now
    harness.run_until(lambda: a.member_id == "")  # its tick saw the poll timeout
    assert harness.clock.now <= last_poll + MAX_POLL + 2 * STEP
    assert b.generation_id == gen  # no LeaveGroup: the group has not noticed yet
    harness.run_until(lambda: harness.stable([b]) and b.generation_id > gen)
    assert harness.clock.now >= last_poll + MAX_POLL + SESSION - STEP
    assert b.assignment() == ALL
    harness.not_polling.discard(id(a))
    harness.run_until(harness.stable)
    check_exact_cover([a, b], ALL)
    assert [k for k, _, _ in a.listener.events][-2:] == ["lost", "assigned"]


def test_static_members_survive_a_restart_of_the_whole_process(harness):
    """Store and members restart together (a deploy): the group is loaded from the log, and the
    static members take their places back, same generation, same partitions."""
    a = harness.member("a", group_instance_id="inst-a")
    b = harness.member("b", group_instance_id="inst-b")
    harness.run_until(harness.stable)
    gen, before = a.generation_id, {"a": a.assignment(), "b": b.assignment()}
    for m in (a, b):
        m.close()
        harness.remove(m)
    harness.store.close()
    harness.clock.advance(SESSION // 2)
    harness.store = harness._open()
    a2 = harness.member("a", group_instance_id="inst-a")
    b2 = harness.member("b", group_instance_id="inst-b")
    harness.run_until(harness.stable)
    assert a2.generation_id == b2.generation_id == gen
    assert {"a": a2.assignment(), "b": b2.assignment()} == before


def test_a_static_member_that_missed_a_generation_keeps_its_id(harness):
    """A static member that does not rejoin a rebalance stays in the group (until its session
    ends) but misses the generation: its heartbeat is answered IllegalGeneration, its partitions
    are lost, and it rejoins under the same member id (Kafka keeps the id: it is still valid)."""
    kw = {"group_instance_id": "inst-a", "rebalance_timeout_ms": 2_000}
    a = harness.member("a", **kw)
    harness.member("b", rebalance_timeout_ms=2_000)
    harness.run_until(harness.stable)
    gen, a_id, a_parts = a.generation_id, a.member_id, sorted(a.assignment())
    harness.stalled.add(id(a))  # shorter than its session, longer than the join phase
    harness.member("c", rebalance_timeout_ms=2_000)
    harness.run_until(lambda: harness.store.describe_group(GROUP).generation > gen, ms=STEP)
    assert a_id in {m.member_id for m in harness.store.describe_group(GROUP).members}
    harness.stalled.discard(id(a))
    a.listener.clear()
    a.tick(harness.clock.now + HEARTBEAT)
    assert a.member_id == a_id and a.generation_id == -1
    harness.run_until(harness.stable)
    assert a.member_id == a_id
    assert [(k, p) for k, p, _ in a.listener.events][0] == ("lost", a_parts)
    check_exact_cover(harness.live(), ALL)


def test_poll_on_a_closed_store_raises_instead_of_answering_an_assignment(harness):
    """The group lived in the store: once it is closed the member owns nothing it can vouch
    for, so poll says so rather than returning its last assignment."""
    from offsetlog.errors import StoreClosedError
    a = harness.member("a")
    harness.run_until(harness.stable)
    assert a.assignment()
    harness.store.close()
    with pytest.raises(StoreClosedError):
        a.poll()
