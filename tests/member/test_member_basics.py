"""The GroupMember's basic contract, driven by ``support.member_harness``."""

from __future__ import annotations

import time

import pytest

from offsetlog import TopicPartition
from offsetlog.errors import RebalanceInProgressError, StoreClosedError, UnknownMemberIdError
from offsetlog.member import (
    GroupMember,
    MemberClosedError,
    MemberState,
    NotSubscribedError,
    PartitionNotAssignedError,
)
from support.member_harness import GROUP, SESSION, partitions


def test_single_member_joins_and_gets_everything(harness):
    a = harness.member("a")
    assert a.state is MemberState.UNJOINED and a.assignment() == set()
    harness.run_until(harness.stable)
    assert a.member_id == "a-1"  # the KIP-394 id the coordinator handed out first
    assert a.generation_id == 1 and a.is_leader and a.protocol_name == "range"
    assert a.assignment() == partitions("t", 6)
    # no revocation before the first join: there was no generation to revoke from
    assert a.listener.events == [("assigned", sorted(partitions("t", 6)), 1)]


def test_position_seek_and_commit_of_positions(harness):
    a = harness.member("a")
    harness.run_until(harness.stable)
    tp = TopicPartition("t", 0)
    assert a.position(tp) is None  # nothing committed yet
    a.record_consumed(tp, 10)
    a.seek(TopicPartition("t", 1), 3)
    a.commit_sync()
    assert harness.store.fetch(GROUP) == {tp: (10, "", None), TopicPartition("t", 1): (3, "", None)}
    assert a.committed(tp).offset == 10
    with pytest.raises(PartitionNotAssignedError):
        a.seek(TopicPartition("other", 0), 1)
    with pytest.raises(ValueError):
        a.seek(tp, -1)


def test_positions_start_at_the_committed_offsets(harness):
    harness.store.commit_sync(GROUP, {TopicPartition("t", 2): 42})  # before the group exists
    a = harness.member("a")
    harness.run_until(harness.stable)
    assert a.position(TopicPartition("t", 2)) == 42
    assert a.position(TopicPartition("t", 3)) is None


def test_commit_async_runs_its_callback_on_the_next_poll(harness):
    a = harness.member("a")
    harness.run_until(harness.stable)
    a.record_consumed(TopicPartition("t", 0), 5)
    seen = []
    fut = a.commit_async(callback=lambda offsets, error: seen.append((dict(offsets), error)))
    fut.result(timeout=10)
    assert seen == []  # Kafka runs commit callbacks in poll, on the caller's thread
    a.poll()
    assert seen == [({TopicPartition("t", 0): (5, "", None)}, None)]


def test_commits_before_joining_are_refused(harness):
    lone = GroupMember(harness.store, GROUP, partitions_per_topic={"t": 1},
                       heartbeat_thread=False)
    with pytest.raises(UnknownMemberIdError):  # not subscribed: not a member at all
        lone.commit_sync({TopicPartition("t", 0): 1})
    lone.close()
    a = harness.member("a")
    with pytest.raises(RebalanceInProgressError):  # joining: retry after poll()
        a.commit_sync({TopicPartition("t", 0): 1})
    a.commit_sync()  # nothing owned: nothing to commit, no error
    assert harness.store.fetch(GROUP) == {}


def test_close_is_idempotent_and_use_after_close_fails(harness):
    a = harness.member("a")
    harness.run_until(harness.stable)
    a.close()
    a.close()
    assert a.closed and a.assignment() == set()
    assert a.listener.kinds()[-1] == "revoked"
    for call in (a.poll, a.commit_sync, lambda: a.subscribe(["t"]),
                 lambda: a.seek(TopicPartition("t", 0), 1)):
        with pytest.raises(MemberClosedError):
            call()
    harness.settle()
    assert harness.store.describe_group(GROUP).state == "Empty"  # a dynamic member leaves


def test_poll_needs_a_subscription(harness):
    m = GroupMember(harness.store, GROUP, partitions_per_topic={"t": 1}, heartbeat_thread=False)
    with pytest.raises(NotSubscribedError):
        m.poll()
    m.close()


@pytest.mark.parametrize("kw", [
    {"heartbeat_interval_ms": 45_000},              # must be below the session timeout
    {"session_timeout_ms": 0},
    {"assignors": ()},
    {"assignors": ("range", "range")},
    {"group_instance_id": ""},
])
def test_bad_settings_are_refused(harness, kw):
    with pytest.raises((ValueError, TypeError)):
        GroupMember(harness.store, GROUP, partitions_per_topic={"t": 1}, **kw)


def test_a_closed_store_is_reported_by_poll_and_close_stays_quiet(harness):
    a = harness.member("a", enable_auto_commit=True)
    harness.run_until(harness.stable)
    a.record_consumed(TopicPartition("t", 0), 3)
    harness.store.close()
    with pytest.raises(StoreClosedError):
        a.commit_sync()
    a.tick(harness.clock.now + SESSION)  # heartbeats fail quietly
    a.close()  # the auto-commit and LeaveGroup fail, and are only logged
    assert a.closed and a.listener.kinds()[-1] == "revoked"


def test_poll_returns_at_once_with_work_and_waits_without(harness):
    """Like Kafka's poll waiting for records: a member that owns partitions gets them back at
    once; one that owns none waits for the timeout instead of spinning its caller's loop."""
    harness.topics = {"t": 1}
    a, b = harness.member("a"), harness.member("b")
    harness.run_until(harness.stable)
    busy, idle = (a, b) if a.assignment() else (b, a)
    started = time.monotonic()
    assert busy.poll(timeout_ms=5_000) == {TopicPartition("t", 0)}
    assert time.monotonic() - started < 1.0
    started = time.monotonic()
    assert idle.poll(timeout_ms=150) == set()
    assert time.monotonic() - started >= 0.14
