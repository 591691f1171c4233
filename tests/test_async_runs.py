"""Back-to-back ``commit_async`` calls coalesce into one batch (``commit_queue.AsyncRun``).

A run is one batch with one future: every call lands whole in one batch, in call order, with
consecutive log offsets; anything else queued behind it (a sync commit), a leader taking it,
or ``max_group_commit_bytes`` starts the next run. These tests read the segment files to see
the batches, so they check the layout the format documents, not just what ``fetch`` shows.
"""

from __future__ import annotations

import shutil
import threading

import pytest

from offsetlog import OffsetAndMetadata as OAM, TopicPartition as TP
from offsetlog.format import RecordType
from offsetlog.framing import encode_payload, read_batches
from tests.durability_helpers import last_segment, open_store, truncate


def batches(root) -> list:
    with open(last_segment(root, 0), "rb") as f:
        return list(read_batches(f))


def held(store):
    """Hold the only partition's leadership: calls queue up and nobody leads them."""
    return store._writer.exclusive(store._parts[0])


def commit_offsets(batch) -> list[tuple[str, int, int]]:
    return [(key["topic"], key["partition"], value["offset"])
            for _, rtype, _, key, value in batch.records() if rtype == RecordType.OFFSET_COMMIT]


def test_back_to_back_async_calls_are_one_batch_with_consecutive_offsets(tmp_path):
    calls = [{TP("a", 0): 1}, {TP("a", 1): 2, TP("b", 0): 3}, {TP("a", 0): 4},
             {TP("c", 7): OAM(5, "meta", 9)}]
    callbacks = []
    with open_store(tmp_path, partitions=1) as store:
        store.commit_sync("g", {TP("z", 0): 0})  # one batch before the run
        with held(store):
            futures = [store.commit_async("g", offsets,
                                          callback=lambda o, e: callbacks.append((o, e)))
                       for offsets in calls]
        for f in futures:
            f.result(timeout=30)
        store.flush()
        assert len({id(f) for f in futures}) == 1  # one run, one future
        assert store.fetch("g")[TP("a", 0)] == OAM(4)
        assert store.fetch("g")[TP("c", 7)] == OAM(5, "meta", 9)
    assert callbacks == [(offsets, None) for offsets in calls]  # each call's, in call order
    first, run = batches(tmp_path)
    assert run.base_offset == first.next_offset and run.record_count == 5
    assert [delta for delta, *_ in run.records()] == list(range(5))
    assert commit_offsets(run) == [("a", 0, 1), ("a", 1, 2), ("b", 0, 3), ("a", 0, 4),
                                   ("c", 7, 5)]


def test_a_sync_commit_behind_a_run_ends_it(tmp_path):
    with open_store(tmp_path, partitions=1) as store:
        with held(store):
            f1 = store.commit_async("g", {TP("a", 0): 1})
            f2 = store.commit_async("g", {TP("a", 0): 2})
            # a sync commit queues behind the run (it waits: so from another thread)
            t = threading.Thread(target=store.commit_sync, args=("g", {TP("a", 0): 3}))
            t.start()
            while len(store._parts[0].queue) < 2:
                pass
            f3 = store.commit_async("g", {TP("a", 0): 4})
        t.join(timeout=30)
        f3.result(timeout=30)
        assert f1 is f2 and f3 is not f1
        assert store.committed("g", TP("a", 0)) == OAM(4)
    assert [commit_offsets(b) for b in batches(tmp_path)] == [
        [("a", 0, 1), ("a", 0, 2)], [("a", 0, 3)], [("a", 0, 4)]]


@pytest.mark.parametrize("max_bytes", [1024, 4096])
def test_a_run_never_splits_a_call_and_holds_at_most_max_group_commit_bytes(tmp_path,
                                                                           max_bytes):
    """Calls of 1-6 offsets, each call's offsets marked with its number: every call must sit
    whole in one batch, and a batch of several calls must encode within the limit."""
    sizes = [1 + (i * 7) % 6 for i in range(300)]
    with open_store(tmp_path, partitions=1, max_group_commit_bytes=max_bytes) as store:
        with held(store):
            futures = [store.commit_async("g", {TP(f"topic-{j}", j): i for j in range(n)})
                       for i, n in enumerate(sizes)]
        for f in futures:
            f.result(timeout=30)
        assert 1 < len({id(f) for f in futures}) < len(sizes)
    found = {}
    for b in batches(tmp_path):
        calls = {}
        for topic, partition, call in commit_offsets(b):
            calls[call] = calls.get(call, 0) + 1
        for call, n in calls.items():
            assert call not in found, f"call {call} split over two batches"
            assert n == sizes[call]
            found[call] = b.base_offset
        if len(calls) > 1:
            assert len(b.payload) <= max_bytes
    assert sorted(found) == list(range(len(sizes)))
    assert list(found) == sorted(found)  # batches in call order


def test_a_torn_run_loses_all_of_its_calls_or_none(tmp_path):
    """Cut the log at every byte of a run's batch: recovery keeps all of its calls or none
    (their future never resolved, so nothing acknowledged is lost)."""
    src = tmp_path / "src"
    with open_store(src, partitions=1) as store:
        store.commit_sync("g", {TP("a", 0): 1, TP("b", 0): 1})
        with held(store):
            fs = [store.commit_async("g", {TP("a", 0): 2}),
                  store.commit_async("g", {TP("b", 0): 2, TP("c", 0): 2})]
        fs[0].result(timeout=30)
    first, run = batches(src)
    start, end = run.position, run.position + run.size
    before = {TP("a", 0): OAM(1), TP("b", 0): OAM(1)}
    after = {TP("a", 0): OAM(2), TP("b", 0): OAM(2), TP("c", 0): OAM(2)}
    for cut in range(start, end + 1):
        dst = tmp_path / "cut"
        shutil.copytree(src, dst)
        truncate(last_segment(dst, 0), cut)
        with open_store(dst, partitions=1) as store:
            got = store.fetch("g")
        assert got in (before, after), f"cut at {cut}: {got}"
        assert (got == after) == (cut == end), f"cut at {cut}"
        shutil.rmtree(dst)


def test_the_size_bound_a_run_counts_is_never_below_what_it_writes(tmp_path):
    """``max_group_commit_bytes`` is counted with each call's bound (records.
    PLAIN_COMMIT_BOUND and the text): the payload written must never exceed the sum."""
    with open_store(tmp_path, partitions=1) as store:
        with held(store):
            f = None
            for i in range(50):
                f = store.commit_async("g" * (1 + i % 40), {TP("t" * (1 + i % 200), 2**31 - 1):
                                                            2**63 - 1})
            run = store._parts[0].queue[-1]
            bound = run.nbytes
        f.result(timeout=30)
    (b,) = batches(tmp_path)
    assert len(b.payload) <= bound
    assert len(b.payload) == len(encode_payload(list(b.records())))


def test_a_caller_steps_aside_every_yield_at_calls_however_small_the_runs(tmp_path,
                                                                         monkeypatch):
    """The step-aside (``time.sleep(0)``) counts a partition's calls, not a run's: with a
    small ``max_group_commit_bytes`` no run ever reaches ``YIELD_AT`` calls, and a caller
    counting per run would never give the writer the GIL."""
    from offsetlog import writer
    sleeps = []
    real_sleep = writer.time.sleep
    monkeypatch.setattr(writer.time, "sleep",
                        lambda s: sleeps.append(s) if s == 0 else real_sleep(s))
    with open_store(tmp_path, partitions=1, max_group_commit_bytes=1024) as store:
        with held(store):
            futures = [store.commit_async("g", {TP("t", i % 5): i})
                       for i in range(2 * writer.YIELD_AT)]
            sleeps_while_held = len(sleeps)
        futures[-1].result(timeout=30)
        assert len({id(f) for f in futures}) > 2 * writer.YIELD_AT // 20  # small runs
    assert sleeps_while_held == 2
