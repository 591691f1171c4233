"""A group that changed protocol is durable: the upgrade's and the downgrade's records go
through the log in one batch, and a store reopened (from the log, from a snapshot, after
compaction) has the group as it was left, on the right coordinator."""

from __future__ import annotations

import pytest

from offsetlog.errors import RebalanceInProgressError
from offsetlog.group import GroupConfig
from offsetlog.group.consumer_protocol import decode_assignment, encode_assignment
from offsetlog.group.consumer_protocol import encode_subscription as subscription
from support.stores import ManualClock, open_log_store, open_store

TOPIC_ID = bytes(range(1, 17))


def opened(path, clock, mode):
    opener = open_store if mode == "snapshot" else open_log_store
    extra = {"segment_bytes": 2048} if mode == "compaction" else {}
    return opener(path, clock=clock, partitions=2,
                  group_config=GroupConfig(initial_rebalance_delay_ms=5), **extra)


def join(store, member_id="", group="g"):
    return store.join_group(group, member_id=member_id, client_id="py",
                            session_timeout_ms=30_000, rebalance_timeout_ms=30_000,
                            protocols=[("range", subscription(["t"]))])


def classic_group(store, clock):
    """Two classic members, Stable at generation 1 (the leader gives each 3 partitions)."""
    futures = [join(store), join(store)]
    clock.advance(10)
    store.poll_groups()
    answers = [f.result(timeout=10) for f in futures]
    ids = sorted(a.member_id for a in answers)
    leader = next(a for a in answers if a.is_leader)
    plan = {ids[0]: encode_assignment([("t", p) for p in range(3)]),
            ids[1]: encode_assignment([("t", p) for p in range(3, 6)])}
    syncs = [store.sync_group("g", member_id=a.member_id, generation_id=a.generation_id,
                              assignments=plan if a is leader else None) for a in answers]
    for s in syncs:
        assert s.result(timeout=10).error is None
    return ids


def beat(store, member, epoch, owned=frozenset(), join=False):
    kw = dict(member_id=member, member_epoch=epoch, owned=owned)
    if join:
        kw.update(rebalance_timeout_ms=30_000, subscribed_topic_names=["t"])
    return store.consumer_groups.heartbeat("g", topics={"t": 6}, **kw).result(timeout=10)


def consumer_state(store):
    return {gid: (g.group_epoch, g.assignment_epoch, dict(g.members), dict(g.targets))
            for c in store.consumer_groups.coordinators for gid, g in c.groups.items()}


def reopen_check(path, clock, mode, store):
    before_consumer = consumer_state(store)
    before_classic = store.describe_group("g")
    if mode == "snapshot":
        assert store.snapshot()
    if mode == "compaction":
        store.compact(now_ms=clock())
    store.close()
    store = opened(path, clock, mode)
    assert consumer_state(store) == before_consumer
    after = store.describe_group("g")
    if before_classic is None:
        assert after is None
    else:  # a classic group reloads Stable, as after any restart
        assert (after.generation, after.protocol, {m.member_id for m in after.members}) == (
            before_classic.generation, before_classic.protocol,
            {m.member_id for m in before_classic.members})
    return store


@pytest.mark.parametrize("mode", ["log", "snapshot", "compaction"])
def test_upgrade_and_downgrade_survive_a_reopen(tmp_path, mode):
    clock = ManualClock()
    path = tmp_path / "s"
    store = opened(path, clock, mode)
    try:
        store.registries.create_topic("t", 6, topic_id=TOPIC_ID)
        a, b = classic_group(store, clock)
        x = beat(store, "x", 0, join=True)
        assert x.error is None
        assert store.describe_group("g") is None  # no classic group any more
        store = reopen_check(path, clock, mode, store)
        group = store.consumer_groups.describe("g")
        assert group.members[a].uses_classic_protocol and group.members[a].member_epoch == 1
        assert group.members[a].classic.protocols[0][0] == "range"
        # a classic member carries on after the restart: told to rejoin (the epoch moved)
        r = store.heartbeat("g", member_id=a, generation_id=1).result(timeout=10)
        assert isinstance(r.error, RebalanceInProgressError)
        # the consumer-protocol member leaves: the group is classic again
        assert beat(store, "x", x.member_epoch, owned=x.assignment).error is None
        epoch = store.consumer_groups.describe("g").group_epoch
        assert beat(store, "x", -1).member_epoch == -1
        assert store.consumer_groups.describe("g") is None
        d = store.describe_group("g")
        assert (d.state, d.generation) == ("PreparingRebalance", epoch)
        store = reopen_check(path, clock, mode, store)
        d = store.describe_group("g")
        assert {m.member_id for m in d.members} == {a, b}
        owned = [tp for m in d.members for tp in decode_assignment(m.assignment)]
        assert len(owned) == len(set(owned))  # nobody's partition is also another's
    finally:
        store.close()


@pytest.mark.parametrize("mode", ["log", "snapshot", "compaction"])
def test_a_stale_downgrade_by_a_replacing_process_survives_a_reopen(tmp_path, mode):
    """A classic process replacing the last consumer-protocol member (static "I") after a
    classic member's leave left the target behind the group epoch: the group is classic,
    rebalancing, at the generation it had, and so it reopens."""
    clock = ManualClock()
    path = tmp_path / "s"
    store = opened(path, clock, mode)
    try:
        store.registries.create_topic("t", 6, topic_id=TOPIC_ID)
        x = store.consumer_groups.heartbeat(
            "g", topics={"t": 6}, member_id="x", member_epoch=0, instance_id="I",
            rebalance_timeout_ms=30_000, subscribed_topic_names=["t"],
            owned=frozenset()).result(timeout=10)
        assert x.error is None
        c, d = (join(store).result(timeout=10) for _ in range(2))
        assert c.error is None and d.error is None
        assert store.leave_group("g", member_id=d.member_id).result(timeout=10).error is None
        group = store.consumer_groups.describe("g")
        epoch = group.group_epoch
        assert group.assignment_epoch < epoch
        k = store.join_group("g", member_id="", group_instance_id="I", client_id="py",
                             session_timeout_ms=30_000, rebalance_timeout_ms=30_000,
                             protocols=[("range", subscription(["t"]))]).result(timeout=10)
        assert k.error is None and k.generation_id == 0
        assert store.consumer_groups.describe("g") is None
        before = store.describe_group("g")
        assert (before.state, before.generation) == ("PreparingRebalance", epoch)
        assert {m.member_id for m in before.members} == {c.member_id, k.member_id}
        store = reopen_check(path, clock, mode, store)
    finally:
        store.close()
