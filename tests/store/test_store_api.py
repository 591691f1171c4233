import os
import threading
import time

import pytest

from offsetlog import OffsetAndMetadata, OffsetStore, TopicPartition
from offsetlog.errors import StoreClosedError, StoreConfigError, StoreLockedError
from offsetlog.group.errors import GroupIdNotFoundError
from offsetlog.log.naming import list_segments, partition_dir
from support import stores

TP0, TP1, TP2 = (TopicPartition("orders", i) for i in range(3))
DAY = 24 * 3600 * 1000


def open_store(path, **kw):
    kw.setdefault("partitions", 5)
    return stores.open_store(path, **kw)


def test_commit_fetch_committed_groups(store_dir):
    with open_store(store_dir) as s:
        s.commit_sync("g", {TP0: 5, TP1: OffsetAndMetadata(7, "meta", 2)})
        assert s.fetch("g") == {TP0: OffsetAndMetadata(5), TP1: OffsetAndMetadata(7, "meta", 2)}
        assert s.fetch("g", [TP1, TP2]) == {TP1: OffsetAndMetadata(7, "meta", 2)}
        assert s.committed("g", TP0) == OffsetAndMetadata(5, "", None)
        assert s.committed("g", TP2) is None
        assert s.committed("other", TP0) is None
        assert s.fetch("other") == {}
        s.commit_sync("a-group", {TP0: 1})
        assert s.groups() == ["a-group", "g"]


def test_state_survives_reopen(store_dir):
    with open_store(store_dir, snapshot_on_close=False) as s:  # replay the whole log
        s.commit_sync("g", {TP0: 5, TP1: 6})
        s.commit_sync("g", {TP0: 8})
        s.delete_offsets("g", [TP1])
        before = s.fetch("g")
    with open_store(store_dir) as s:
        assert s.fetch("g") == before == {TP0: OffsetAndMetadata(8)}
        assert s.recovery_report.clean
        assert s.recovery_report.records == 4


def test_default_partition_count_comes_from_the_directory(store_dir):
    with OffsetStore.open(store_dir, partitions=7) as s:
        s.commit_sync("g", {TP0: 1})
    with OffsetStore.open(store_dir) as s:
        assert s.partitions == 7 and s.committed("g", TP0).offset == 1
    with pytest.raises(StoreConfigError, match="created with 7 partitions"):
        OffsetStore.open(store_dir, partitions=50)


def test_close_is_idempotent_and_use_after_close_raises(store_dir):
    s = open_store(store_dir)
    s.close()
    s.close()
    assert s.closed
    for call in (lambda: s.commit_sync("g", {TP0: 1}), lambda: s.commit_async("g", {TP0: 1}),
                 lambda: s.fetch("g"), lambda: s.groups(), lambda: s.flush(),
                 lambda: s.expire_offsets(), lambda: s.delete_group("g")):
        with pytest.raises(StoreClosedError):
            call()


def test_second_open_fails_until_closed(store_dir):
    s = open_store(store_dir)
    with pytest.raises(StoreLockedError):
        open_store(store_dir)
    s.close()
    open_store(store_dir).close()


def test_bad_options_are_rejected(store_dir):
    with pytest.raises(StoreConfigError):
        OffsetStore.open(store_dir, fsync="sometimes")
    with pytest.raises(StoreConfigError):
        OffsetStore.open(store_dir, partitions=0)
    with pytest.raises(StoreConfigError):
        OffsetStore.open(store_dir, retention_ms=-1)
    # one round's commit calls share a batch: the cap must fit what a reader accepts
    from offsetlog.store.config import MAX_GROUP_COMMIT_BYTES
    with pytest.raises(StoreConfigError, match="max_group_commit_bytes"):
        OffsetStore.open(store_dir, max_group_commit_bytes=MAX_GROUP_COMMIT_BYTES + 1)
    open_store(store_dir, max_group_commit_bytes=MAX_GROUP_COMMIT_BYTES).close()
    open_store(store_dir).close()  # nothing was left locked


def test_missing_meta_with_partitions_is_refused(store_dir):
    with open_store(store_dir) as s:
        s.commit_sync("g", {TP0: 1})
    os.remove(os.path.join(store_dir, "meta.json"))
    with pytest.raises(StoreConfigError, match="refusing to guess"):
        open_store(store_dir)


def test_commit_async_future_and_callback(store_dir):
    calls = []
    done = threading.Event()
    with open_store(store_dir) as s:
        fut = s.commit_async("g", {TP0: 3}, callback=lambda o, e: (calls.append((o, e)),
                                                                   done.set()))
        assert fut.result(timeout=10) is None
        assert done.wait(10)
        assert calls == [({TP0: 3}, None)]
        assert s.committed("g", TP0).offset == 3


def test_async_then_sync_to_same_key_keeps_call_order(store_dir):
    with open_store(store_dir) as s:
        futs = [s.commit_async("g", {TP0: i}) for i in range(500)]
        s.commit_sync("g", {TP0: 1000})
        assert all(f.done() for f in futs)  # FIFO: earlier async commits went first
        assert s.committed("g", TP0).offset == 1000
        futs = [s.commit_async("g", {TP0: i}) for i in range(2000, 2500)]
        s.flush()
        assert s.committed("g", TP0).offset == 2499


def test_callbacks_run_in_call_order(store_dir):
    seen = []
    with open_store(store_dir) as s:
        for i in range(300):
            s.commit_async(f"g{i % 7}", {TP0: i}, callback=lambda o, e: seen.append(o[TP0]))
        s.flush()
    # close() runs queued callbacks before it returns
    assert sorted(seen) == list(range(300))
    per_group = {}
    for v in seen:
        per_group.setdefault(v % 7, []).append(v)
    assert all(vs == sorted(vs) for vs in per_group.values())


def test_a_raising_callback_does_not_stop_the_others(store_dir):
    seen = []

    def bad(o, e):
        raise RuntimeError("user bug")

    with open_store(store_dir) as s:
        s.commit_async("g", {TP0: 1}, callback=bad)
        s.commit_async("g", {TP0: 2}, callback=lambda o, e: seen.append(o))
    assert seen == [{TP0: 2}]


def test_delete_group(store_dir):
    with open_store(store_dir) as s:
        s.commit_sync("g", {TP0: 1, TP1: 2})
        s.commit_sync("h", {TP0: 1})
        s.delete_group("g")
        assert s.fetch("g") == {} and s.groups() == ["h"]
        with pytest.raises(GroupIdNotFoundError):  # Kafka's GROUP_ID_NOT_FOUND
            s.delete_group("never-existed")
    with open_store(store_dir) as s:
        assert s.groups() == ["h"]


def test_delete_offsets_writes_tombstones_only_for_existing_keys(store_dir):
    with open_store(store_dir) as s:
        s.commit_sync("g", {TP0: 1})
        before = sum(p["next_offset"] for p in s.stats())
        s.delete_offsets("g", [TP1, TP2])
        assert sum(p["next_offset"] for p in s.stats()) == before
        s.delete_offsets("g", [TP0, TP1])
        assert sum(p["next_offset"] for p in s.stats()) == before + 1
        assert s.fetch("g") == {}


def test_standalone_offsets_expire_after_retention(store_dir, clock):
    with open_store(store_dir, clock=clock, retention_ms=DAY) as s:
        s.commit_sync("g", {TP0: 1, TP1: 1})
        clock.advance(DAY // 2)
        s.commit_sync("g", {TP1: 2})  # a later commit restarts TP1's retention
        clock.advance(DAY // 2 - 1)
        assert s.expire_offsets() == 0
        clock.advance(1)
        assert s.expire_offsets() == 1
        assert s.fetch("g") == {TP1: OffsetAndMetadata(2)}
        assert s.expire_offsets(now_ms=clock.now + DAY) == 1
        assert s.groups() == []
    with open_store(store_dir, clock=clock) as s:
        assert s.groups() == []  # expiry wrote tombstones, so it survives reopen


def test_expiry_never_removes_an_offset_committed_after_the_pass_was_queued(store_dir, clock):
    # The pass computes its tombstones at the head of the queue, after earlier commits apply.
    with open_store(store_dir, clock=clock, retention_ms=DAY) as s:
        s.commit_sync("g", {TP0: 1})
        clock.advance(2 * DAY)
        s.commit_async("g", {TP0: 2})
        s.expire_offsets()
        assert s.committed("g", TP0).offset == 2


def test_background_retention_pass_uses_the_injected_clock(store_dir, clock):
    with open_store(store_dir, clock=clock, retention_ms=DAY,
                    retention_check_interval_ms=20) as s:
        s.commit_sync("g", {TP0: 1})
        time.sleep(0.2)
        assert s.committed("g", TP0) is not None  # real time passed, the clock did not
        clock.advance(DAY)
        deadline = time.monotonic() + 10
        while s.committed("g", TP0) is not None and time.monotonic() < deadline:
            time.sleep(0.02)
        assert s.committed("g", TP0) is None


def test_segments_roll_at_segment_bytes(store_dir):
    with open_store(store_dir, partitions=1, segment_bytes=1024) as s:
        for i in range(100):
            s.commit_sync("g", {TopicPartition("t", i % 10): i})
        expected = s.fetch("g")
        segs = list_segments(partition_dir(store_dir, 0))
    assert len(segs) > 5
    for base, path in segs[:-1]:
        assert os.path.getsize(path) <= 1024
    assert [b for b, _ in segs] == sorted(b for b, _ in segs)
    with open_store(store_dir, partitions=1, segment_bytes=1024) as s:
        assert s.fetch("g") == expected
        assert s.stats()[0]["next_offset"] == 100


@pytest.mark.parametrize("policy", ["always", "interval", "never"])
def test_every_fsync_policy_commits_and_recovers(store_dir, policy):
    with open_store(store_dir, fsync=policy, fsync_interval_ms=10) as s:
        for i in range(50):
            s.commit_sync("g", {TP0: i})
        futs = [s.commit_async("g", {TP1: i}) for i in range(50)]
        for f in futs:
            f.result(timeout=10)
        time.sleep(0.05)
    with open_store(store_dir) as s:
        assert s.fetch("g") == {TP0: OffsetAndMetadata(49), TP1: OffsetAndMetadata(49)}


def test_groups_land_on_kafkas_partition(store_dir):
    with OffsetStore.open(store_dir) as s:
        s.commit_sync("my-group", {TP0: 1})
        assert s.partition_of("my-group") == 12
    assert list_segments(partition_dir(store_dir, 12))
    assert not os.path.exists(partition_dir(store_dir, 11))


def test_log_offsets_are_never_reused_after_reopen(store_dir):
    with open_store(store_dir, partitions=1) as s:
        s.commit_sync("g", {TP0: 1, TP1: 1})
    with open_store(store_dir, partitions=1) as s:
        assert s.stats()[0]["next_offset"] == 2
        s.commit_sync("g", {TP0: 2})
        assert s.stats()[0]["next_offset"] == 3


def test_open_restores_the_callers_gc_setting(store_dir):
    import gc
    assert gc.isenabled()
    open_store(store_dir).close()
    assert gc.isenabled()
    gc.disable()
    try:
        open_store(store_dir).close()
        assert not gc.isenabled()
    finally:
        gc.enable()


def test_the_per_group_route_cache_stays_bounded_and_correct(tmp_path, monkeypatch):
    """The commit path remembers each group's partition and fencing check; with groups
    coming and going it must not grow for ever, and a group whose entry was dropped is
    routed the same way again."""
    import offsetlog.store.routing as routing
    monkeypatch.setattr(routing, "ROUTES_CACHED", 10)
    with OffsetStore.open(tmp_path / "s", partitions=3) as s:
        for i in range(100):
            s.commit_sync(f"g{i}", {TopicPartition("t", 0): i})
            assert len(s._router.routes) <= 10
        for i in range(100):
            s.commit_sync(f"g{i}", {TopicPartition("t", 0): i + 1})
            assert s.committed(f"g{i}", TopicPartition("t", 0)).offset == i + 1
    with OffsetStore.open(tmp_path / "s") as s:
        assert all(s.committed(f"g{i}", TopicPartition("t", 0)).offset == i + 1
                   for i in range(100))
