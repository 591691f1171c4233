"""Members of an eager group (range, roundrobin, sticky) joining and leaving."""

from __future__ import annotations

import pytest

from offsetlog import TopicPartition
from offsetlog.assignors import RebalanceProtocol
from support.member_harness import GROUP, Harness, Recorder, check_exact_cover, partitions

TOPICS = {"t": 6, "u": 3}
ALL = partitions("t", 6) | partitions("u", 3)


@pytest.fixture
def harness(store_dir, clock):
    h = Harness(store_dir, clock, topics=TOPICS)
    yield h
    h.close()


def check_eager_log(member, history):
    """The member's callbacks, against the assignments it held: before every rebalance it
    revokes everything it owns; after it, it is assigned everything it owns (eager)."""
    expected = []
    previous = None
    for generation, owned in history:
        if previous is not None:
            expected.append(("revoked", sorted(previous)))
        expected.append(("assigned", sorted(owned)))
        previous = owned
    assert [(k, p) for k, p, _ in member.listener.events] == expected


@pytest.mark.parametrize("assignor", ["range", "roundrobin", "sticky"])
def test_members_join_and_leave_and_every_partition_has_one_owner(harness, assignor):
    a = harness.member("a", assignors=(assignor,))
    b = harness.member("b", assignors=(assignor,))
    assert a.rebalance_protocol is RebalanceProtocol.EAGER
    harness.run_until(harness.stable)
    check_exact_cover([a, b], ALL)
    gen1 = a.generation_id
    assert b.generation_id == gen1 and a.protocol_name == assignor
    history = {a: [(gen1, a.assignment())], b: [(gen1, b.assignment())]}

    c = harness.member("c", assignors=(assignor,))
    harness.run_until(harness.stable)
    check_exact_cover([a, b, c], ALL)
    gen2 = a.generation_id
    assert gen2 == gen1 + 1
    for m in (a, b):
        history[m].append((gen2, m.assignment()))
    history[c] = [(gen2, c.assignment())]
    assert all(len(m.assignment()) == 3 for m in (a, b, c))
    if assignor == "sticky":  # eager, yet sticky: each keeps 2 of its 3 and gives 1 to c
        for m in (a, b):
            assert len(history[m][1][1] & history[m][0][1]) == len(history[m][1][1])

    b.close()  # dynamic: revokes, then leaves at once (no session timeout to wait for)
    harness.run_until(harness.stable)
    check_exact_cover([a, c], ALL)
    gen3 = a.generation_id
    assert gen3 == gen2 + 1
    for m in (a, c):
        history[m].append((gen3, m.assignment()))

    check_eager_log(a, history[a])
    check_eager_log(c, history[c])
    # b: assigned twice, revoked before the second rebalance and when it closed
    assert [k for k, _, _ in b.listener.events] == ["assigned", "revoked", "assigned", "revoked"]
    assert b.listener.events[-1][1] == sorted(history[b][1][1])
    # the callbacks saw the generation they belong to
    assert [g for k, _, g in a.listener.events if k == "assigned"] == [gen1, gen2, gen3]


def test_revocation_callback_commits_with_the_old_generation(harness):
    """What a service does in on_partitions_revoked (commit what it processed) must work: the
    member is still in its old generation then."""
    def commit_on_revoke(member, parts):
        for tp in parts:
            member.record_consumed(tp, 100 + tp.partition)
        member.commit_sync()

    a = harness.member("a", listener=Recorder(on_revoked=commit_on_revoke))
    harness.run_until(harness.stable)
    owned = sorted(a.assignment())
    harness.member("b")
    harness.run_until(harness.stable)
    assert harness.store.fetch(GROUP, owned) == {tp: (100 + tp.partition, "", None) for tp in owned}


def test_a_new_partition_makes_the_leader_rebalance(harness):
    counts = dict(TOPICS)
    a = harness.member("a", partitions_per_topic=lambda: dict(counts))  # the leader
    b = harness.member("b")
    harness.run_until(harness.stable)
    gen = a.generation_id
    counts["t"] = 8
    harness.run_until(lambda: harness.stable() and a.generation_id > gen)
    check_exact_cover([a, b], ALL | {TopicPartition("t", 6), TopicPartition("t", 7)})
