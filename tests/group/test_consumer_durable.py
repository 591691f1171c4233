"""Consumer-protocol groups are durable: their records (CONSUMER_GROUP_*) go through the log,
the table keeps the latest of each key, and a reopened store (from the log, from a snapshot,
after compaction) has the same groups, epochs and assignments."""

from __future__ import annotations

import pytest

from offsetlog.log.records import CONSUMER_GROUP_TYPES, check_version, describe
from support.stores import ManualClock, open_log_store, open_store

TOPICS = {"t": 4, "u": 2}


def beat(store, member, epoch, owned=None, group="g", topics=("t", "u"), instance=None):
    kw = dict(member_id=member, member_epoch=epoch, instance_id=instance,
              owned=frozenset() if epoch == 0 else owned)
    if epoch == 0:
        kw.update(rebalance_timeout_ms=30_000, subscribed_topic_names=list(topics))
    return store.consumer_groups.heartbeat(group, topics=TOPICS, **kw).result(timeout=10)


def form(store):
    """Two members (one static) reconciled to a Stable group, and a third that left."""
    owned = {}
    for m, inst in (("a", None), ("b", "B"), ("c", None)):
        r = beat(store, m, 0, instance=inst)
        owned[m] = (r.member_epoch, r.assignment)
    for _ in range(4):
        for m, inst in (("a", None), ("b", "B"), ("c", None)):
            epoch, mine = owned[m]
            r = beat(store, m, epoch, owned=mine, instance=inst)
            owned[m] = (r.member_epoch, r.assignment if r.assignment is not None else mine)
    assert beat(store, "c", -1).member_epoch == -1
    for _ in range(3):
        for m, inst in (("a", None), ("b", "B")):
            epoch, mine = owned[m]
            r = beat(store, m, epoch, owned=mine, instance=inst)
            owned[m] = (r.member_epoch, r.assignment if r.assignment is not None else mine)
    assert store.consumer_groups.describe("g").state() == "Stable"
    return owned


def state(store):
    return {gid: (g.group_epoch, g.assignment_epoch, g.subscription_metadata, dict(g.members),
                  dict(g.targets))
            for c in store.consumer_groups.coordinators for gid, g in c.groups.items()}


def test_reopening_from_the_log_keeps_every_epoch_and_assignment(tmp_path):
    clock = ManualClock()
    with open_log_store(tmp_path / "s", clock=clock, partitions=2) as store:
        form(store)
        before = state(store)
        table_keys = {k for p in store._parts for k in p.table.consumer_groups}
    assert before["g"][0] == 5 and len(before["g"][3]) == 2
    assert {t for t, _, _ in table_keys} == set(CONSUMER_GROUP_TYPES)
    with open_log_store(tmp_path / "s", clock=clock, partitions=2) as store:
        assert state(store) == before
        # the members carry on at their epochs: no rebalance
        g = store.consumer_groups.describe("g")
        a = g.members["a"]
        r = beat(store, "a", a.member_epoch, owned=a.assigned)
        assert (r.error, r.member_epoch) == (None, a.member_epoch)
        assert store.consumer_groups.describe("g").group_epoch == before["g"][0]


def test_a_snapshot_covers_the_groups(tmp_path):
    clock = ManualClock()
    with open_store(tmp_path / "s", clock=clock, partitions=1) as store:
        form(store)
        before = state(store)
        assert store.snapshot()
    with open_store(tmp_path / "s", clock=clock, partitions=1) as store:
        assert store.recovery_report is not None
        assert state(store) == before
        assert store._parts[0].table.consumer_groups


def test_compaction_keeps_the_latest_record_of_each_key(tmp_path):
    clock = ManualClock()
    with open_log_store(tmp_path / "s", clock=clock, partitions=1, segment_bytes=1024) as store:
        form(store)
        for _ in range(3):  # more records of the same keys, then a roll
            g = store.consumer_groups.describe("g")
            a = g.members["a"]
            beat(store, "a", a.member_epoch, owned=a.assigned)
        before = state(store)
        results = store.compact(now_ms=clock())
        assert results and sum(r.records_before - r.records_after for r in results) > 0
    with open_log_store(tmp_path / "s", clock=clock, partitions=1) as store:
        assert state(store) == before


def test_the_records_read_back_and_describe(tmp_path):
    from offsetlog.log.records import consumer_group_record
    rec = consumer_group_record(0, CONSUMER_GROUP_TYPES[1], ("g", "m"), {"client_id": "x"})
    check_version(rec[1], rec[2])
    d = describe(rec)
    assert d["type"] == "CONSUMER_GROUP_MEMBER_METADATA"
    assert d["key"] == {"group": "g", "member": "m"}
    assert d["value"]["rebalance_timeout_ms"] == -1 and d["value"]["client_id"] == "x"


def test_the_store_checks_a_members_epoch_in_the_commits_own_step(tmp_path):
    """A commit into a consumer-protocol group is checked by the store itself, under the
    partition lock with its write (store/routing.py): the member's current epoch goes
    through; an older epoch only for partitions the member was given at that epoch or before
    (KIP-1251); a newer epoch or an unknown member does not, and neither does a commit from
    outside the group (epoch -1, no member) while it has members; nothing refused is written."""
    from offsetlog import TopicPartition
    from offsetlog.errors import UnknownMemberIdError
    from offsetlog.group.consumer.errors import StaleMemberEpochError

    with open_store(tmp_path / "s", clock=ManualClock(), partitions=2) as store:
        owned = form(store)
        epoch = owned["a"][0]
        since = dict(store.consumer_groups.describe("g").members["a"].assignment_epochs)
        held = TopicPartition(*min(tp for tp, e in since.items() if e < epoch))
        late = TopicPartition(*min(tp for tp, e in since.items() if e == epoch))
        others = TopicPartition(*min(owned["b"][1]))
        store.commit_sync("g", {held: 5}, generation_id=epoch, member_id="a")
        store.commit_sync("g", {held: 6}, generation_id=epoch - 1, member_id="a")
        with pytest.raises(StaleMemberEpochError):
            store.commit_sync("g", {held: 7, late: 7}, generation_id=epoch - 1, member_id="a")
        with pytest.raises(StaleMemberEpochError):
            store.commit_sync("g", {others: 7}, generation_id=epoch - 1, member_id="a")
        with pytest.raises(StaleMemberEpochError):
            store.commit_sync("g", {held: 7}, generation_id=epoch + 1, member_id="a")
        with pytest.raises(UnknownMemberIdError):
            store.commit_sync("g", {held: 7}, generation_id=epoch, member_id="nobody")
        with pytest.raises(UnknownMemberIdError):
            store.commit_sync("g", {held: 8})
        assert store.committed("g", held).offset == 6
        assert store.committed("g", late) is None and store.committed("g", others) is None
        # a transaction's commit naming no member is not checked against the members (Kafka's
        # TxnOffsetCommit exemption); one naming a member is, by the same rules
        txn = store.init_transactions("t")
        txn.begin()
        with pytest.raises(StaleMemberEpochError):
            txn.commit_offsets("g", {late: 9}, generation_id=epoch - 1, member_id="a")
        txn.commit_offsets("g", {held: 9, others: 9})
        txn.commit()
        assert store.committed("g", held).offset == 9 and store.committed("g", others).offset == 9
