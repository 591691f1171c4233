"""Auto-commit: on its interval, before partitions are revoked, and on close."""

from __future__ import annotations

from offsetlog import TopicPartition
from support.member_harness import GROUP, STEP, Recorder  # noqa: F401

INTERVAL = 5_000
TP0 = TopicPartition("t", 0)


def committed(harness, tp=TP0):
    o = harness.store.committed(GROUP, tp)
    return None if o is None else o.offset


def test_auto_commit_runs_on_its_interval(harness):
    a = harness.member("a", enable_auto_commit=True, auto_commit_interval_ms=INTERVAL)
    harness.run_until(harness.stable)
    assigned_at = harness.clock.now
    a.record_consumed(TP0, 7)
    harness.run_for(INTERVAL - 2 * STEP)
    assert committed(harness) is None  # not yet due
    harness.run_until(lambda: committed(harness) == 7, max_ms=4 * STEP)
    assert harness.clock.now - assigned_at >= INTERVAL
    a.record_consumed(TP0, 9)
    harness.run_for(INTERVAL - 2 * STEP)
    assert committed(harness) == 7
    harness.run_until(lambda: committed(harness) == 9, max_ms=4 * STEP)
    # every owned partition with a position is committed, the others are not
    a.record_consumed(TopicPartition("t", 3), 1)
    harness.run_for(INTERVAL + STEP)
    assert {tp: o.offset for tp, o in harness.store.fetch(GROUP).items()} == {
        TP0: 9, TopicPartition("t", 3): 1}


def test_auto_commit_off_commits_nothing(harness):
    a = harness.member("a", enable_auto_commit=False)
    harness.run_until(harness.stable)
    a.record_consumed(TP0, 7)
    harness.run_for(3 * INTERVAL)
    a.close()
    assert harness.store.fetch(GROUP) == {}


def test_eager_revocation_is_preceded_by_an_auto_commit(harness):
    seen = {}

    def on_revoked(member, parts):  # what the service sees when it is asked to let go
        seen.update({tp: committed(harness, tp) for tp in parts})

    a = harness.member("a", enable_auto_commit=True, auto_commit_interval_ms=60_000,
                       listener=Recorder(on_revoked=on_revoked))
    harness.run_until(harness.stable)
    owned = sorted(a.assignment())
    for tp in owned:
        a.record_consumed(tp, 20 + tp.partition)
    harness.member("b", enable_auto_commit=True, auto_commit_interval_ms=60_000)
    harness.run_until(harness.stable)
    assert seen == {tp: 20 + tp.partition for tp in owned}


def test_cooperative_revocation_is_preceded_by_an_auto_commit(harness):
    """a keeps processing while the group rebalances; what it processed up to the moment it
    lets a partition go is committed, and that is where the new owner starts."""
    coop = ("cooperative-sticky",)
    at_revocation = {}

    def on_revoked(member, parts):
        at_revocation.update({tp: member.position(tp) for tp in parts})

    a = harness.member("a", assignors=coop, enable_auto_commit=True,
                       auto_commit_interval_ms=60_000, listener=Recorder(on_revoked=on_revoked))
    harness.run_until(harness.stable)

    def process(m):
        if m is a:
            for tp in m.assignment():
                m.record_consumed(tp, (m.position(tp) or 0) + 1)

    harness.work = process
    harness.run_for(2_000)
    c = harness.member("c", assignors=coop)
    harness.run_until(lambda: harness.stable() and len(c.assignment()) == 3)
    assert set(at_revocation) == c.assignment()
    for tp in c.assignment():  # the new owner starts where the old one stopped
        assert c.position(tp) == committed(harness, tp) == at_revocation[tp]


def test_close_commits_then_revokes(harness):
    order = []

    def on_revoked(member, parts):
        order.append(("revoked", committed(harness)))

    a = harness.member("a", enable_auto_commit=True, auto_commit_interval_ms=60_000,
                       listener=Recorder(on_revoked=on_revoked))
    harness.run_until(harness.stable)
    a.record_consumed(TP0, 11)
    a.close()
    assert order == [("revoked", 11)]
    assert committed(harness) == 11
    harness.settle()
    assert harness.store.describe_group(GROUP).state == "Empty"


def test_commit_async_results_reach_the_callback_before_close_returns(harness):
    a = harness.member("a")
    harness.run_until(harness.stable)
    results = []
    for i in range(1, 6):
        a.commit_async({TP0: i}, callback=lambda offsets, error: results.append(
            (offsets[TP0], error)))
    a.close()
    assert results == [(i, None) for i in range(1, 6)]  # in call order
    assert committed(harness) == 5
