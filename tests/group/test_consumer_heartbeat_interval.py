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
    assert a.beat(0).heartbeat_interval_ms == NORMAL
    assert a.beat(5_000).heartbeat_interval_ms == NORMAL


def test_a_join_that_moves_partitions_shortens_the_waiting_members_and_the_revokers_interval(c):
    a, b = Client(c, "a"), Client(c, "b")
    a.beat(0)
    resp = b.beat(100)  # b's target is t-3..5, all still a's: b waits, and is told to come back soon
    assert (resp.assignment, resp.heartbeat_interval_ms) == (frozenset(), SHORT)
    assert c.group("g").members["b"].state == "unreleased_partitions"
    assert b.beat(350).heartbeat_interval_ms == SHORT  # still waiting
    resp = a.beat(5_000)  # a learns it must give up t-3..5: revoking, told to come back soon
    assert (resp.assignment, resp.heartbeat_interval_ms) == (tps(0, 1, 2), SHORT)
    resp = a.beat(5_010)  # a has revoked: stable at the new epoch, the configured interval again
    assert (resp.member_epoch, resp.heartbeat_interval_ms) == (2, NORMAL)
    resp = b.beat(5_100)  # b gets its partitions: stable, the configured interval
    assert (resp.assignment, resp.heartbeat_interval_ms) == (tps(3, 4, 5), NORMAL)
    assert c.group("g").state() == "Stable"


def test_a_revoking_member_that_has_not_revoked_yet_keeps_the_short_interval(c):
    a, b = Client(c, "a"), Client(c, "b")
    a.beat(0)
    b.beat(100)
    a.beat(200)  # told to revoke t-3..5
    assert a.beat(450, report=False).heartbeat_interval_ms == SHORT  # owned not reported
    a.owned = tps(0, 1, 2, 3)  # reports one of them still
    assert a.beat(700).heartbeat_interval_ms == SHORT
    assert c.group("g").members["a"].state == "unrevoked_partitions"


def test_a_member_given_free_partitions_at_once_is_not_shortened(c):
    a, b = Client(c, "a"), Client(c, "b")
    a.beat(0)
    b.beat(100)
    a.beat(200)
    a.beat(210)
    b.beat(300)  # the group is stable: a t-0..2, b t-3..5
    a.leave(400)
    resp = b.beat(500)  # a's partitions are free: b takes them in this answer
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


def test_setting_it_to_the_heartbeat_interval_answers_as_kafka(c):
    c = ConsumerGroupCoordinator(ConsumerGroupConfig(heartbeat_interval_ms=NORMAL,
                                                     reconciliation_heartbeat_interval_ms=NORMAL))
    a, b = Client(c, "a"), Client(c, "b")
    a.beat(0)
    assert b.beat(10).heartbeat_interval_ms == NORMAL
    assert a.beat(20).heartbeat_interval_ms == NORMAL


@pytest.mark.parametrize("bad", [0, 49, -1, 1.5, True, None])
def test_the_setting_is_bounded_below(bad):
    with pytest.raises(ValueError):
        ConsumerGroupConfig(reconciliation_heartbeat_interval_ms=bad)


def test_the_default_is_250_ms():
    assert ConsumerGroupConfig().reconciliation_heartbeat_interval_ms == 250
