import contextlib
import os
import shutil
import signal
import subprocess
import sys
import textwrap
import time

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from offsetlog import OffsetAndMetadata, TopicPartition
from offsetlog.compaction.cleaner import STEPS, clean_partition
from offsetlog.group.errors import GroupIdNotFoundError
from offsetlog.log.naming import list_segments, partition_dir
from offsetlog.recovery.tools.inspect import iter_records
from support import stores

DAY = 24 * 3600 * 1000


def open_store(path, **kw):
    kw.setdefault("partitions", 1)
    kw.setdefault("segment_bytes", 1024)
    return stores.open_store(path, **kw)


def snapshot(store):
    return {g: store.fetch(g) for g in store.groups()}


def fill(store, n=300, groups=("a", "b", "c"), topics=4):
    for i in range(n):
        g = groups[i % len(groups)]
        store.commit_sync(g, {TopicPartition("t", (i * 7) % topics): i,
                              TopicPartition("u", i % 2): OffsetAndMetadata(i, f"m{i}")})


def records_by_offset(path):
    return {off: rec for _, _, _, off, rec in iter_records(path)}


def test_compaction_keeps_latest_per_key_and_their_offsets(store_dir):
    with open_store(store_dir) as s:
        fill(s)
        s.delete_offsets("b", [TopicPartition("t", 0)])
        before_state = snapshot(s)
        before = records_by_offset(store_dir)
        active_path = s._parts[0].log.segments[-1][1]
        active_bytes = open(active_path, "rb").read()
        (result,) = s.compact()
        assert result.records_after < result.records_before
        assert result.bytes_after < result.bytes_before
        assert snapshot(s) == before_state
        assert open(active_path, "rb").read() == active_bytes  # never touched
    after = records_by_offset(store_dir)
    # every surviving record is an original record at its original offset
    for off, rec in after.items():
        assert before[off][1:] == rec[1:], off
    # and it is the latest record of its key
    latest = {}
    for off in sorted(before):
        r = before[off]
        key = r[3]
        latest[(r[1], tuple(key) if isinstance(key, list) else tuple(sorted(key.items())))] = off
    active_base = list_segments(partition_dir(store_dir, 0))[-1][0]
    for key, off in latest.items():
        if off < active_base:
            assert off in after, (key, off)
    with open_store(store_dir) as s:
        assert snapshot(s) == before_state


def test_tombstones_are_kept_until_delete_retention_has_passed_since_first_cleaned(
        store_dir, clock):
    with open_store(store_dir, clock=clock, delete_retention_ms=DAY) as s:
        fill(s, 100)
        s.delete_group("a")
        fill(s, 60, groups=("b",))  # push the tombstones out of the active segment
        tombstones = lambda: sum(1 for *_, r in iter_records(store_dir) if r[4] is None)
        n = tombstones()
        assert n > 0
        s.compact()
        assert tombstones() == n  # first cleaning: kept, stamped with a horizon
        clock.advance(DAY - 1)
        s.compact()
        assert tombstones() == n
        clock.advance(1)
        (r,) = s.compact()
        assert tombstones() == 0 and r.tombstones_dropped == n
        assert "a" not in s.groups()
    with open_store(store_dir) as s:
        assert "a" not in s.groups()  # no older value resurfaced


@pytest.mark.parametrize("step", STEPS)
def test_a_crash_at_every_swap_step_leaves_the_same_table(tmp_path, step):
    base = str(tmp_path / "base")
    with open_store(base) as s:
        fill(s, 400)
        s.delete_offsets("c", [TopicPartition("u", 1)])
        fill(s, 50, groups=("a",))
        expected = snapshot(s)
    for crash_after in range(1, 4):  # crash in the 1st, 2nd or 3rd output group's swap
        work = str(tmp_path / f"work-{crash_after}")
        shutil.copytree(base, work)
        d = partition_dir(work, 0)
        seen = {"n": 0}

        def hook(name):
            if name == step:
                seen["n"] += 1
                if seen["n"] == crash_after:
                    raise SystemExit("simulated crash")

        segs = list_segments(d)
        with pytest.raises(SystemExit):
            clean_partition(d, 0, active_base=segs[-1][0], now_ms=0, delete_retention_ms=DAY,
                            segment_bytes=1024 * 4, fault_hook=hook)
        with open_store(work) as s:
            assert snapshot(s) == expected, (step, crash_after)
            names = os.listdir(d)
            assert not [n for n in names if n.endswith((".swap", ".cleaned"))]
            s.compact()  # and a later cleaning still works
            assert snapshot(s) == expected
        with open_store(work) as s:
            assert snapshot(s) == expected


CHILD = textwrap.dedent("""
    import sys, time
    from offsetlog import OffsetStore
    path, step = sys.argv[1], sys.argv[2]
    s = OffsetStore.open(path, cleaner_backoff_ms=0, retention_check_interval_ms=0)
    def hook(name):
        if name == step:
            print("AT", name, flush=True)
            time.sleep(60)
    s._cleaning.fault_hook = hook
    s.compact()
    print("DONE", flush=True)
""")


@pytest.mark.parametrize("step", STEPS)
def test_sigkill_during_a_swap_step(tmp_path, step):
    path = str(tmp_path / "s")
    with open_store(path) as s:
        fill(s, 300)
        expected = snapshot(s)
    child = subprocess.Popen([sys.executable, "-c", CHILD, path, step], stdout=subprocess.PIPE,
                             text=True)
    try:
        line = child.stdout.readline()
        assert line.startswith("AT " + step), line
        child.send_signal(signal.SIGKILL)
    finally:
        child.wait(30)
    with open_store(path) as s:
        assert snapshot(s) == expected


def test_a_failed_cleaning_marks_the_partition_uncleanable_and_keeps_data(store_dir):
    with open_store(store_dir, partitions=2) as s:
        for g in ("x", "y", "z", "w"):
            for i in range(60):
                s.commit_sync(g, {TopicPartition("t", i % 3): i})
        expected = snapshot(s)
        failing = s.partition_of("x")

        def hook(step):
            if step == "swap-renamed" and s._cleaning_partition == failing:
                raise OSError(5, "injected")

        s._cleaning.fault_hook = hook
        original = s._cleaning.clean

        def tracking_clean(part, now):
            s._cleaning_partition = part.index
            return original(part, now)

        s._cleaning.clean = tracking_clean
        with pytest.raises(OSError):
            s.compact()
        stats = {p["partition"]: p for p in s.stats()}
        assert "injected" in stats[failing]["uncleanable"]
        assert snapshot(s) == expected
        other = 1 - failing
        s._cleaning.fault_hook = None
        assert s.compact([other])[0].records_after > 0
        assert stats[other]["uncleanable"] is None
        assert snapshot(s) == expected
    with open_store(store_dir, partitions=2) as s:  # recovery finishes the half-done swap
        assert snapshot(s) == expected


def test_background_cleaner_runs_when_dirty_ratio_passes(store_dir):
    with open_store(store_dir, cleaner_backoff_ms=20, min_cleanable_dirty_ratio=0.5) as s:
        fill(s, 300)
        expected = snapshot(s)
        deadline = time.monotonic() + 20
        # It may have cleaned while fill() was still writing; wait for it to catch up.
        while (s.stats()[0]["last_cleaned_ms"] is None or s.stats()[0]["dirty_ratio"] >= 0.5
               ) and time.monotonic() < deadline:
            time.sleep(0.02)
        st = s.stats()[0]
        assert st["last_cleaned_ms"] is not None and st["dirty_ratio"] < 0.5
        assert snapshot(s) == expected


ops = st.lists(st.one_of(
    st.tuples(st.just("commit"), st.sampled_from("abc"), st.integers(0, 5), st.integers(0, 99)),
    st.tuples(st.just("delete"), st.sampled_from("abc"), st.integers(0, 5)),
    st.tuples(st.just("delete_group"), st.sampled_from("abc")),
    st.tuples(st.just("expire"), st.integers(0, 3)),
    st.tuples(st.just("compact"), st.integers(0, 3)),
), min_size=1, max_size=120)


@settings(max_examples=25, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(ops)
def test_fetch_is_the_same_with_and_without_compaction(tmp_path_factory, ops):
    root = tmp_path_factory.mktemp("prop")
    clocks = [[1_000_000], [1_000_000]]
    stores = [open_store(str(root / name), clock=(lambda c=c: c[0]), retention_ms=10_000,
                         delete_retention_ms=5_000, segment_bytes=1024)
              for name, c in (("plain", clocks[0]), ("compacted", clocks[1]))]
    try:
        for op in ops:
            for i, s in enumerate(stores):
                if op[0] == "commit":
                    s.commit_sync(op[1], {TopicPartition("t", op[2]): op[3]})
                elif op[0] == "delete":
                    s.delete_offsets(op[1], [TopicPartition("t", op[2])])
                elif op[0] == "delete_group":
                    with contextlib.suppress(GroupIdNotFoundError):  # none left to delete
                        s.delete_group(op[1])
                elif op[0] == "expire":
                    clocks[i][0] += op[1] * 4_000
                    s.expire_offsets()
                elif op[0] == "compact" and i == 1:
                    clocks[i][0] += 0  # the clocks move together; compaction reads it too
                    s.compact()
            assert snapshot(stores[0]) == snapshot(stores[1]), op
        stores[1].close()
        stores[1] = open_store(str(root / "compacted"), clock=lambda: clocks[1][0])
        assert snapshot(stores[0]) == snapshot(stores[1])
    finally:
        for s in stores:
            s.close()
