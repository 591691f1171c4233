"""The bench's own-file baselines write what they say they write: a ratio against a baseline
that skipped its work would flatter nobody but would mislead everyone."""

import os
import zlib

import msgpack
import pytest

from offsetlog import TopicPartition
from offsetlog.bench.baselines import own_file_python_threads
from offsetlog.bench.workload import FIRST_OFFSET, TOPIC, LeanWriter, many_group, many_partition


def _frames(path: str) -> list:
    with open(path, "rb") as f:
        data = f.read()
    out, pos, size = [], 0, LeanWriter.HEADER.size
    while pos + size <= len(data):
        length, crc = LeanWriter.HEADER.unpack_from(data, pos)
        if length == 0:  # the preallocated, never-written rest
            break
        payload = data[pos + size:pos + size + length]
        assert zlib.crc32(payload) == crc
        out.append(msgpack.unpackb(payload, use_list=False))
        pos += size + length
    return out


def test_own_file_python_threads_writes_each_threads_records(tmp_path):
    rate = own_file_python_threads(str(tmp_path), 3, spin_us=1.0, calls_per_thread=7)
    assert rate > 0
    for i in range(3):
        records = _frames(os.path.join(tmp_path, f"own-{i}.log"))
        assert [key for key, _ in records] == [(many_group(i), TOPIC, many_partition(i))] * 7
        assert [value[0] for _, value in records] == list(range(FIRST_OFFSET, FIRST_OFFSET + 7))


def test_threads_given_one_file_append_their_records_to_it_side_by_side(tmp_path):
    """``files`` gives two threads one file (as the case's groups that share a log
    partition): each frame lands whole, none over another, each thread's in its order, and
    a thread alone in its file writes there as before."""
    from offsetlog.bench.baselines import own_file_dsync_threads

    files = {0: 0, 1: 0, 2: 5}.__getitem__
    (tmp_path / "py").mkdir()
    (tmp_path / "raw").mkdir()
    own_file_python_threads(str(tmp_path / "py"), 3, files=files, calls_per_thread=50)
    shared = _frames(os.path.join(tmp_path, "py", "own-0.log"))
    assert len(shared) == 100
    for i in (0, 1):
        mine = [value[0] for key, value in shared if key[0] == many_group(i)]
        assert mine == list(range(FIRST_OFFSET, FIRST_OFFSET + 50))
    alone = _frames(os.path.join(tmp_path, "py", "own-5.log"))
    assert [key for key, _ in alone] == [(many_group(2), TOPIC, many_partition(2))] * 50

    data = bytes(range(1, 95))
    own_file_dsync_threads(str(tmp_path / "raw"), 3, data, files=files, calls_per_thread=50)
    with open(os.path.join(tmp_path, "raw", "own-0.log"), "rb") as f:
        written = f.read(101 * len(data))
    assert written == data * 100 + bytes(len(data))


def test_own_file_native_threads_writes_each_threads_batches(tmp_path):
    """The native floor writes real batches of the engine's format, one commit each, read
    back by the engine's reader, with the offsets each thread committed in order."""
    from offsetlog.bench.baselines import own_file_native_threads
    from offsetlog.log.framing import read_batches
    from offsetlog.log.records import commit_key

    rate = own_file_native_threads(str(tmp_path), 3, calls_per_thread=7)
    assert rate > 0
    for i in range(3):
        with open(os.path.join(tmp_path, f"own-{i}.log"), "rb") as f:
            batches = list(read_batches(f))  # (the preallocated zeros after them: the end)
        assert [b.record_count for b in batches] == [1] * 7
        records = [r for b in batches for r in b.records()]
        assert {commit_key(r[2], r[3]) for r in records} == {
            (many_group(i), TOPIC, many_partition(i))}
        assert [r[4][0] for r in records] == list(range(FIRST_OFFSET, FIRST_OFFSET + 7))


def test_the_async_case_commits_through_the_native_entry_as_through_the_api(tmp_path):
    """The async case's information row calls the store's native entry directly: its calls
    must be taken there (a call the entry refused returns None, not a future) and commit
    what the API's calls commit (the case reads the last offsets back itself)."""
    from offsetlog.bench.cases import commit_async_stream

    keys = [("t", p) for p in range(5)]
    for api_frame in (True, False):
        path = str(tmp_path / f"api-{api_frame}")
        assert commit_async_stream(path, 300, keys, warmup=20, api_frame=api_frame) > 0


def test_apart_groups_give_each_thread_a_log_partition_of_its_own(tmp_path):
    from offsetlog.bench.cases import commit_sync_threads, open_store
    from offsetlog.bench.workload import apart_groups
    from offsetlog.partitioner import partition_for

    groups = apart_groups(32)
    assert len({partition_for(g, 50) for g in groups}) == 32
    # (the case's own groups, where none collides, in their order)
    assert groups[:2] == [many_group(0), many_group(1)]
    assert len({partition_for(many_group(i), 50) for i in range(32)}) < 32
    assert len(apart_groups(8, partitions=8)) == 8
    with pytest.raises(ValueError):
        apart_groups(9, partitions=8)
    # the case commits each thread's group as given
    path = str(tmp_path / "store")
    assert commit_sync_threads(path, 3, one_group=False, many_groups=True,
                               groups=["a", "b", "c"], calls_per_thread=4) > 0
    with open_store(path) as store:
        for i, g in enumerate("abc"):
            tp = TopicPartition(TOPIC, many_partition(i))
            assert store.fetch(g)[tp].offset == FIRST_OFFSET + 3
        assert store.fetch(many_group(0)) == {}

def test_the_one_log_partition_side_puts_every_group_in_one_log(tmp_path):
    """The threads case's one-partition side: the groups' commits all land in log partition 0
    of a store made with one (and the default side's store has the default's 50)."""
    import os

    from offsetlog.bench.cases import commit_sync_threads, open_store

    for partitions, want in ((1, 1), (None, 50)):
        path = str(tmp_path / f"store-{partitions}")
        assert commit_sync_threads(path, 3, one_group=False, many_groups=True,
                                   partitions=partitions, calls_per_thread=4) > 0
        with open_store(path) as store:
            assert store.partitions == want
            for i in range(3):
                tp = TopicPartition(TOPIC, many_partition(i))
                assert store.fetch(many_group(i))[tp].offset == FIRST_OFFSET + 3
        logs = sorted(d for d in os.listdir(path) if d.startswith("__consumer_offsets-"))
        assert (logs == ["__consumer_offsets-0"]) == (want == 1)


def test_the_latency_cases_epoch_side_commits_epochs_in_a_log_partition_of_its_own(tmp_path):
    """The leader-epoch row's commits carry the epoch, and stay out of the log partition
    whose bytes per commit the case reports."""
    from offsetlog import OffsetAndMetadata
    from offsetlog.bench.cases import commit_sync_op, open_store
    from offsetlog.bench.workload import EPOCH_GROUP, GROUP
    from offsetlog.partitioner import partition_for

    assert partition_for(EPOCH_GROUP, 50) != partition_for(GROUP, 50)
    with open_store(str(tmp_path / "store")) as store:
        op = commit_sync_op(store, EPOCH_GROUP, leader_epoch=7)
        op()
        op()
        assert store.fetch(EPOCH_GROUP) == {
            TopicPartition(TOPIC, 0): OffsetAndMetadata(FIRST_OFFSET + 1, "", 7)}
        assert store.fetch(GROUP) == {}


def test_the_latency_cases_member_commits_as_its_groups_member(tmp_path):
    """The member row's commits are a consumer group member's, in the group's generation."""
    from offsetlog import OffsetAndMetadata
    from offsetlog.bench.cases import member_commit_op, open_store
    from offsetlog.bench.workload import EPOCH_GROUP, GROUP, MEMBER_GROUP
    from offsetlog.group import GroupConfig
    from offsetlog.partitioner import partition_for

    assert len({partition_for(g, 50) for g in (GROUP, EPOCH_GROUP, MEMBER_GROUP)}) == 3
    with open_store(str(tmp_path / "store"),
                    group_config=GroupConfig(initial_rebalance_delay_ms=0)) as store:
        op, close = member_commit_op(store)
        try:
            op()
            op()
            (member,) = store.describe_group(MEMBER_GROUP).members
            assert store.describe_group(MEMBER_GROUP).state == "Stable"
            assert store.fetch(MEMBER_GROUP) == {
                TopicPartition(TOPIC, 0): OffsetAndMetadata(FIRST_OFFSET + 1)}
        finally:
            close()


def test_run_threads_reports_the_windows_cpu_per_call(tmp_path):
    """``cpu`` holds the process's CPU and context switches per call of the window: a call
    that sleeps switches at least once and costs little CPU, one that spins costs its time."""
    import time

    from offsetlog.bench.common import run_threads
    from offsetlog.bench.threads_case import cpu_rows

    def sleeper(i):
        return (lambda: time.sleep(0.001)), (lambda: None)

    def spinner(i):
        def op():
            end = time.thread_time() + 0.002
            while time.thread_time() < end:
                pass
        return op, (lambda: None)

    slept, spun = {}, {}
    calls, _ = run_threads(2, sleeper, duration_s=0.3, warmup_s=0.05, cpu=slept)
    assert slept["calls"] == calls > 0
    assert slept["voluntary_switches"] >= 0.9 and slept["user_us"] < 500
    run_threads(1, spinner, calls_per_thread=50, cpu=spun)
    assert spun["calls"] == 50 and spun["user_us"] + spun["system_us"] >= 1900
    # the bench's rows: the medians of the windows, user and system added
    windows = {(key, n): [dict(user_us=u, system_us=1.0, voluntary_switches=2.0)
                          for u in (1.0, 5.0, 3.0)]
               for key in ("many", "own", "ownpy") for n in (1, 32)}
    rows = cpu_rows(windows)
    assert [(r.offsetlog, r.baseline_value, r.unit) for r in rows] == [(4.0, 4.0, "us")] * 2
    assert "own file, no Python" in rows[1].note and "context switches" in rows[0].note
