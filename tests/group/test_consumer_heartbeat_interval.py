"""The heartbeat interval the consumer-protocol coordinator answers (docs/GROUPS.md, "Heartbeat
intervals"): ``heartbeat_interval_ms`` as Kafka answers, except the shorter
``reconciliation_heartbeat_interval_ms`` to a member with partitions to revoke or waiting for
partitions another member will release."""

from __future__ import annotations

import pytest

from offsetlog.group.consumer import ConsumerGroupConfig, ConsumerGroupCoordinator

TOPICS = {"t": 6}
NORMAL, SHORT = 5_000, 250


def tps(*ps):
    return frozenset(("t", p) for p in ps)


class Client:
    """A well-behaved member: owns what its last assignment said and reports it."""

    def __init__(self, c, member_id, instance_id=None, assignor="range"):
        self.c, self.member_id, self.instance_id, self.assignor = c, member_id, instance_id, assignor
        self.epoch, self.owned = 0, frozenset()

    def beat(self, now, *, report=True):
        joining = self.epoch == 0
        resp = self.c.heartbeat(
            "g", member_id=self.member_id, member_epoch=self.epoch, topics=TOPICS, now_ms=now,
            instance_id=self.instance_id, rebalance_timeout_ms=30_000 if joining else -1,
            subscribed_topic_names=("t",) if joining else None,
            server_assignor=self.assignor if joining else None,
            owned=frozenset() if joining else (self.owned if report else None)).response
        assert resp.error is None, resp.error
        self.epoch = resp.member_epoch
        if resp.assignment is not None:
            self.owned = resp.assignment
        return resp

    def leave(self, now, epoch=-1):
        return self.c.heartbeat("g", member_id=self.member_id, member_epoch=epoch,
                                topics=TOPICS, now_ms=now, instance_id=self.instance_id).response


@pytest.fixture
def c():
    return ConsumerGroupCoordinator(ConsumerGroupConfig(heartbeat_interval_ms=NORMAL,
                                                        reconciliation_heartbeat_interval_ms=SHORT))


def test_a_stable_member_is_told_the_configured_interval(c):
    a = Client(c, "a")
    assert a.beat(0).heartbeat_interval_ms == NORMAL  # alone: nothing to spread from
    assert a.beat(5_000).heartbeat_interval_ms == NORMAL


def test_a_join_that_moves_partitions(c):
    a, b = Client(c, "a"), Client(c, "b")
    a.beat(0)  # a is expected back at 5000
    resp = b.beat(100)  # b's target is t-3..5, all still a's: b waits
    assert (resp.assignment, resp.member_epoch) == (frozenset(), 3)
    assert c.group("g").members["b"].state == "unreleased_partitions"
    assert resp.heartbeat_interval_ms == SHORT  # ... and is told to come back soon
    assert b.beat(350).heartbeat_interval_ms == SHORT  # still waiting
    resp = a.beat(5_000)  # a learns it must give up t-3..5: revoking, told to come back soon
    assert (resp.assignment, resp.heartbeat_interval_ms) == (tps(0, 1, 2), SHORT)
    # a has revoked: stable at the new epoch; b is polling (expected before now + SHORT), so
    # the widest gap is the whole window [now + SHORT, now + NORMAL]: its middle
    resp = a.beat(5_010)
    assert resp.member_epoch == 3
    assert resp.heartbeat_interval_ms == (SHORT + NORMAL) // 2
    a_due = 5_010 + resp.heartbeat_interval_ms
    resp = b.beat(5_050)  # b gets its partitions: settled, placed in the wider gap after a's
    assert resp.assignment == tps(3, 4, 5)
    assert resp.heartbeat_interval_ms == (a_due + 5_050 + NORMAL) // 2 - 5_050
    assert c.group("g").state() == "Stable"


def test_an_early_heartbeat_keeps_the_members_place(c):
    a, b = Client(c, "a"), Client(c, "b")
    a.beat(0)
    b.beat(100)
    a.beat(5_000)
    placed = a.beat(5_010).heartbeat_interval_ms  # settled: placed mid-window
    assert SHORT < placed < NORMAL
    # clients acknowledge a new assignment at once: the answer keeps a where it was put
    assert a.beat(5_015).heartbeat_interval_ms == placed - 5
    # on time, the configured interval
    assert a.beat(5_010 + placed).heartbeat_interval_ms == NORMAL


def test_a_revoking_member_that_has_not_revoked_yet_keeps_the_short_interval(c):
    a, b = Client(c, "a"), Client(c, "b")
    a.beat(0)
    b.beat(100)
    a.beat(200)  # told to revoke t-3..5
    assert a.beat(450, report=False).heartbeat_interval_ms == SHORT  # owned not reported
    a.owned = tps(0, 1, 2, 3)  # reports one of them still
    assert a.beat(700).heartbeat_interval_ms == SHORT
    assert c.group("g").members["a"].state == "unrevoked_partitions"


def test_members_that_settle_together_are_spread_over_the_interval(c):
    clients = [Client(c, m) for m in "abcdef"]
    due = {}
    for i, cl in enumerate(clients):  # all join at once; a gets everything first
        due[cl.member_id] = i + cl.beat(i).heartbeat_interval_ms
    while c.group("g").state() != "Stable" or any(
            cl.owned != c.group("g").targets[cl.member_id] for cl in clients):
        m = min(due, key=lambda k: (due[k], k))
        assert due[m] < 60_000
        client = next(cl for cl in clients if cl.member_id == m)
        due[m] += client.beat(due[m]).heartbeat_interval_ms
    # the next heartbeats, on the interval's circle: no two within NORMAL / (2 * members)
    phases = sorted(d % NORMAL for d in due.values())
    gaps = [b - a for a, b in zip(phases, phases[1:] + [phases[0] + NORMAL])]
    assert min(gaps) >= NORMAL // (2 * len(clients)), sorted(due.values())


def test_a_member_given_free_partitions_at_once_is_not_shortened(c):
    a, b = Client(c, "a"), Client(c, "b")
    a.beat(0)
    b.beat(100)
    a.beat(5_000)
    a.beat(5_010)
    b_due = 5_100 + b.beat(5_100).heartbeat_interval_ms  # the group is stable
    a.leave(5_200)
    resp = b.beat(b_due)  # a's partitions are free: b takes them in this answer
    assert (resp.assignment, resp.heartbeat_interval_ms) == (tps(*range(6)), NORMAL)


def test_waiting_for_a_static_member_that_left_for_a_while_is_not_shortened(c):
    a = Client(c, "a", instance_id="A")
    a.beat(0)
    assert a.leave(100, epoch=-2).member_epoch == -2  # keeps t-0..5 under its instance id
    b = Client(c, "b")
    resp = b.beat(200)  # b's target is a's, but nothing is released before A is back
    assert (resp.assignment, resp.heartbeat_interval_ms) == (frozenset(), NORMAL)
    assert c.group("g").members["b"].state == "unreleased_partitions"


def test_the_short_interval_is_never_above_the_configured_one():
    c = ConsumerGroupCoordinator(ConsumerGroupConfig(heartbeat_interval_ms=100,
                                                     reconciliation_heartbeat_interval_ms=250))
    a, b = Client(c, "a"), Client(c, "b")
    a.beat(0)
    assert b.beat(10).heartbeat_interval_ms == 100


def test_setting_it_to_the_heartbeat_interval_answers_as_kafka():
    c = ConsumerGroupCoordinator(ConsumerGroupConfig(heartbeat_interval_ms=NORMAL,
                                                     reconciliation_heartbeat_interval_ms=NORMAL))
    a, b = Client(c, "a"), Client(c, "b")
    answers = [a.beat(0), b.beat(10), a.beat(20), a.beat(30), b.beat(40), a.beat(50)]
    # waiting, revoking, settling (the spreading window [now + short, now + normal] is closed)
    # and an early heartbeat: every answer is the configured interval
    assert [r.heartbeat_interval_ms for r in answers] == [NORMAL] * 6
    assert b.owned == tps(3, 4, 5) and c.group("g").state() == "Stable"


@pytest.mark.parametrize("bad", [0, 49, -1, 1.5, True, None])
def test_the_setting_is_bounded_below(bad):
    with pytest.raises(ValueError):
        ConsumerGroupConfig(reconciliation_heartbeat_interval_ms=bad)


def test_the_default_is_250_ms():
    assert ConsumerGroupConfig().reconciliation_heartbeat_interval_ms == 250
