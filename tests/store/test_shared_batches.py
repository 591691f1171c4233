"""Commit calls share batches: back-to-back ``commit_async`` calls one run (one batch, one
future: ``commit_queue.AsyncRun``), and the back-to-back commit calls of one round, sync or
async, one batch (``commit_queue.frame_round``).

Every call lands whole in one batch, in call order, with consecutive log offsets, so a torn
batch loses all of its calls or none. A run ends when anything else is queued behind it (a
sync commit), a leader takes it, or it would pass ``max_group_commit_bytes``; a round's shared
batch ends at anything that is not a plain commit call (a transaction's offsets, a marker, a
coordinator write). These tests read the segment files to see the batches, so they check the
layout the format documents, not just what ``fetch`` shows.
"""

from __future__ import annotations

import io
import itertools
import shutil
import threading
import time

import pytest

from offsetlog import OffsetAndMetadata as OAM
from offsetlog import TopicPartition as TP
from offsetlog.log.format import RecordType
from offsetlog.log.framing import encode_payload, read_batches
from offsetlog.log.records import PLAIN_COMMIT_BOUND, commit_entry, commit_key
from support.durability_helpers import last_segment, open_store, truncate


def batches(root) -> list:
    with open(last_segment(root, 0), "rb") as f:
        return list(read_batches(f))


def held(store):
    """Hold the only partition's leadership: calls queue up and nobody leads them."""
    return store._writer.exclusive(store._parts[0])


def commit_offsets(batch) -> list[tuple[str, int, int]]:
    return [(*commit_key(version, key)[1:], commit_entry(version, value)[0])
            for _, rtype, version, key, value in batch.records()
            if rtype == RecordType.OFFSET_COMMIT]


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


def test_a_sync_commit_behind_a_run_ends_it_and_the_round_is_one_batch(tmp_path):
    with open_store(tmp_path, partitions=1) as store:
        with held(store):
            f1 = store.commit_async("g", {TP("a", 0): 1})
            f2 = store.commit_async("g", {TP("a", 0): 2})
            # a sync commit queues behind the run (it waits: so from another thread)
            t = threading.Thread(target=store.commit_sync, args=("g", {TP("a", 0): 3}))
            t.start()
            wait_for_queue(store, 2)
            f3 = store.commit_async("g", {TP("a", 0): 4})
        t.join(timeout=30)
        f3.result(timeout=30)
        assert f1 is f2 and f3 is not f1  # three queue items: run, sync call, run
        assert store.committed("g", TP("a", 0)) == OAM(4)
    # ... led in one round, whose commit calls share one batch, in call order
    assert [commit_offsets(b) for b in batches(tmp_path)] == [
        [("a", 0, 1), ("a", 0, 2), ("a", 0, 3), ("a", 0, 4)]]


def wait_for_queue(store, n: int) -> None:
    deadline = time.monotonic() + 30
    while len(store._parts[0].queue) < n:
        assert time.monotonic() < deadline, "committers did not queue"
        time.sleep(0.001)


def sync_calls_in_one_round(store, calls: list[dict]) -> list[str]:
    """Run each of ``calls`` as a ``commit_sync`` from its own thread while the partition is
    held, so they all queue before one leader takes them; returns the topic of each call's
    first offset, in queue order."""
    with held(store):
        threads = [threading.Thread(target=store.commit_sync, args=("g", offsets))
                   for offsets in calls]
        for t in threads:
            t.start()
        wait_for_queue(store, len(calls))
        order = [item.fields[0][1] for item in store._parts[0].queue]  # the first key's topic
    for t in threads:
        t.join(timeout=30)
        assert not t.is_alive()
    return order


def test_the_sync_commits_of_one_round_share_one_batch(tmp_path):
    """Six ``commit_sync`` calls queued behind a held partition are written by one leader as
    one batch: each call's offsets together, the calls in queue order, numbered on from the
    batch's base offset; the batch carries the latest of their times."""
    calls = [{TP(f"c{i}", p): 10 * i + p for p in range(1 + i % 3)} for i in range(6)]
    calls[4] = {TP("c4", 0): OAM(40, "meta", 7), TP("c4", 1): 41}
    clock = itertools.count(1_700_000_000_000)
    with open_store(tmp_path, partitions=1, clock=lambda: next(clock)) as store:
        store.commit_sync("g", {TP("z", 0): 0})  # one batch before the round
        order = sync_calls_in_one_round(store, calls)
        got = store.fetch("g")
    assert got == {tp: v if isinstance(v, OAM) else OAM(v)
                   for offsets in calls + [{TP("z", 0): 0}] for tp, v in offsets.items()}
    first, shared = batches(tmp_path)
    assert shared.base_offset == first.next_offset
    assert shared.record_count == sum(map(len, calls))
    assert [delta for delta, *_ in shared.records()] == list(range(shared.record_count))
    expected = [(tp.topic, tp.partition, v.offset if isinstance(v, OAM) else v)
                for topic in order for tp, v in calls[int(topic[1:])].items()]
    assert commit_offsets(shared) == expected
    times = [commit_entry(version, value)[3] for _, _, version, _, value in shared.records()]
    assert shared.timestamp == max(times) and len(set(times)) == len(calls)


def test_a_round_frames_each_other_kind_of_item_as_a_batch_of_its_own(tmp_path):
    """``frame_round`` on a round of: two commit calls, a transaction's offsets, a coordinator
    write, a run: the two calls share a batch; every other item is its own, in queue order,
    with its own attributes and producer."""
    from offsetlog.log.format import Attribute
    from offsetlog.log.records import group_metadata, offset_commit_fields
    from offsetlog.store.commit_queue import AsyncRun, Commit, QueueItem, frame_round

    def commit(topic, offset, timestamp, item=Commit):
        fields, nbytes = offset_commit_fields("g", {TP(topic, 0): offset}, timestamp, 4096)
        if item is Commit:
            return Commit(fields, nbytes, timestamp)
        run = AsyncRun()
        run.fields, run.timestamp = list(fields), timestamp
        return run

    txn = commit("txn", 3, 30)
    txn.attributes, txn.producer_id, txn.producer_epoch = Attribute.TRANSACTIONAL, 9, 2
    coordinator = QueueItem((group_metadata(0, "g", {"protocol_type": "consumer"}),), 40)
    group = [commit("a", 1, 10), commit("b", 2, 20), txn, coordinator,
             commit("c", 4, 50, AsyncRun)]
    base = 100
    for item in group:
        item.base_offset = base
        base += 1
    frames, applied = frame_round(group)
    out = list(read_batches(io.BytesIO(b"".join(frames))))
    assert [(b.base_offset, b.record_count, b.attributes, b.producer_id, b.timestamp)
            for b in out] == [(100, 2, 0, -1, 20), (102, 1, Attribute.TRANSACTIONAL, 9, 30),
                              (103, 1, 0, -1, 40), (104, 1, 0, -1, 50)]
    assert [commit_offsets(b) for b in out] == [[("a", 0, 1), ("b", 0, 2)], [("txn", 0, 3)],
                                               [], [("c", 0, 4)]]
    # commit calls are applied from their fields, (base, calls); the rest as batches of records
    shapes = [(batch[0], sum(len(fields) // 3 for fields in batch[1]), 0) if len(batch) == 2
              else (batch[0], len(batch[1]), batch[2]) for batch in applied]
    assert shapes == [(100, 2, 0), (102, 1, Attribute.TRANSACTIONAL), (103, 1, 0), (104, 1, 0)]
    assert [len(batch) for batch in applied] == [2, 5, 5, 2]
    assert all(item.fields is None for item in group)  # nothing kept past the round


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


@pytest.mark.parametrize("calls", ["async", "sync"])
def test_a_torn_shared_batch_loses_all_of_its_calls_or_none(tmp_path, calls):
    """Cut the log at every byte of a batch two calls share (a run's, or a round's sync
    commits): recovery keeps all of its calls or none (none of them was acknowledged: the
    write and its sync come before any caller hears back)."""
    src = tmp_path / "src"
    second = [{TP("a", 0): 2}, {TP("b", 0): 2, TP("c", 0): 2}]
    with open_store(src, partitions=1) as store:
        store.commit_sync("g", {TP("a", 0): 1, TP("b", 0): 1})
        if calls == "async":
            with held(store):
                fs = [store.commit_async("g", offsets) for offsets in second]
            fs[0].result(timeout=30)
        else:
            sync_calls_in_one_round(store, second)
    first, run = batches(src)
    assert run.record_count == 3
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
    from offsetlog.store import group_commit as writer
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
        # small runs: none holds more commits than its bytes bound allows
        per_run = 1024 // (PLAIN_COMMIT_BOUND + len("g") + len("t"))
        assert len({id(f) for f in futures}) >= -(-2 * writer.YIELD_AT // per_run)
    assert sleeps_while_held == 2
