"""A parked group request is answered even when its deadline comes due while the store runs a
call that keeps only records: the retention pass and ``delete_group`` (deferred producers,
offsetlog/store/deferred.py). Such a call once fired the partition's due deadlines itself,
and the answers those gave (a JoinGroup's, once its join phase ended) were dropped with the
rest of its Result: the member waited for ever. Seen on the wire with a retention pass every
half second (tests/kafka/test_diff_offset_retention.py).

And a group the pass would delete while calls computed before it still wait behind it (their
records are written after the pass's) is left to the next pass, so the live coordinator and
a replay of the log agree on it."""

from __future__ import annotations

import threading
import time

import pytest

from offsetlog import TopicPartition
from offsetlog.group.consumer_protocol import encode_subscription
from offsetlog.group.errors import NonEmptyGroupError
from offsetlog.log import segment
from offsetlog.store import groups as store_groups
from support.groups import form_group
from support.stores import counted_group_config, open_store

TP = TopicPartition("orders", 1)

DELAY = 3_000


@pytest.fixture
def store(store_dir, clock, monkeypatch):
    # the timer thread polls on its own every 50 ms of real time: here only the test does
    monkeypatch.setattr(store_groups, "GROUP_TIMER_INTERVAL_S", 3_600.0)
    with open_store(store_dir, clock=clock, partitions=1, group_config=counted_group_config(
            initial_rebalance_delay_ms=DELAY)) as s:
        yield s


def _parked_join(store):
    fut = store.join_group("joining", client_id="c", session_timeout_ms=10_000,
                           rebalance_timeout_ms=10_000,
                           protocols=[("range", encode_subscription(["orders"]))])
    assert not fut.done()  # the initial delay: parked
    return fut


@pytest.mark.parametrize("call", ["expire_offsets", "delete_group"])
def test_a_join_whose_delay_ends_before_a_pass_is_still_answered(store, clock, call):
    store.commit_sync("standalone", {TopicPartition("orders", 0): 1})  # (the pass runs here)
    fut = _parked_join(store)
    clock.advance(DELAY)  # the join phase is due; nobody polled yet
    if call == "expire_offsets":
        assert store.expire_offsets() == 0
    else:
        store.delete_group("standalone")
    store.poll_groups()
    join = fut.result(timeout=10)
    assert join.error is None and join.generation_id == 1


class HeldWrite:
    """``segment._write_dsync`` that holds the first write until ``release``: calls made
    meanwhile queue behind that round."""

    def __init__(self, real):
        self.real, self.started, self.go = real, threading.Event(), threading.Event()
        self.held = False

    def __call__(self, *args):
        if not self.held:
            self.held = True
            self.started.set()
            assert self.go.wait(10)
        return self.real(*args)


def _describe(store):
    d = store.describe_group("left")
    return None if d is None else (d.state, d.generation)


needs_dsync = pytest.mark.skipif(segment._write_dsync is None,
                                 reason="no pwritev/RWF_DSYNC here")


def _behind_a_held_round(s, monkeypatch, first, then):
    """Hold a round's write, queue ``first`` (run in a thread; its outcome returned) behind
    it, then compute ``then()`` (queued behind ``first``), and let the write go."""
    held = HeldWrite(segment._write_dsync)
    monkeypatch.setattr(segment, "_write_dsync", held)
    writer = threading.Thread(target=s.commit_sync, args=("solo", {TP: 1}))
    writer.start()
    assert held.started.wait(10)
    outcome: list = []

    def run():
        try:
            outcome.append(first())
        except Exception as e:  # noqa: BLE001 - the outcome is what the test reads
            outcome.append(e)
    queued = threading.Thread(target=run)
    queued.start()
    while not s._parts[0].queue:  # ``first``, queued behind the held round
        time.sleep(0.001)
    later = then()
    held.go.set()
    writer.join(10)
    queued.join(10)
    return outcome[0], later


@needs_dsync
def test_a_delete_queued_before_the_last_members_leave_finds_the_group_not_empty(
        store_dir, clock, monkeypatch):
    """A delete_group queued before the leave that empties the group comes before it in the
    log: there the group has a member, and the delete is refused, as at that point."""
    with open_store(store_dir, clock=clock, partitions=1,
                    group_config=counted_group_config(initial_rebalance_delay_ms=0)) as s:
        gen, (member,) = form_group(s, clock, group="left")
        outcome, leaving = _behind_a_held_round(
            s, monkeypatch, lambda: s.delete_group("left"),
            lambda: s.leave_group("left", member_id=member))
        assert isinstance(outcome, NonEmptyGroupError)
        assert leaving.result(10).error is None
        assert _describe(s) == ("Empty", gen + 1)
        s.delete_group("left")
        assert _describe(s) is None
    with open_store(store_dir, clock=clock, partitions=1) as s:
        assert _describe(s) is None


@needs_dsync
def test_a_group_emptied_by_a_call_queued_behind_the_pass_is_deleted_by_the_next(
        store_dir, clock, monkeypatch):
    """The pass judges the groups as the coordinator has them, the calls queued behind it
    computed; their records come after the pass's. A group whose last member's leave is
    queued there is not deleted yet: its tombstone would come before the leave's Empty
    record, and a replay bring back the group the live coordinator had dropped."""
    with open_store(store_dir, clock=clock, partitions=1, retention_ms=1,
                    group_config=counted_group_config(initial_rebalance_delay_ms=0)) as s:
        gen, (member,) = form_group(s, clock, group="left")
        _, leaving = _behind_a_held_round(s, monkeypatch, s.expire_offsets,
                                          lambda: s.leave_group("left", member_id=member))
        assert leaving.result(10).error is None
        assert _describe(s) == ("Empty", gen + 1)  # not deleted by that pass
        s.expire_offsets()  # nothing queued behind this one
        assert _describe(s) is None
        live = _describe(s)
    with open_store(store_dir, clock=clock, partitions=1) as s:
        assert _describe(s) == live
