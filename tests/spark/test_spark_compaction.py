"""Spark compaction (compaction/spark.py) against the local cleaner, and its crash safety."""

import os
import shutil

import pytest

from offsetlog import OffsetStore, TopicPartition
from offsetlog.compaction.cleaner import STEPS
from offsetlog.compaction.spark import SparkCompactionError, compact
from offsetlog.errors import StoreLockedError
from offsetlog.log.naming import list_partition_dirs
from offsetlog.recovery.tools.inspect import iter_records, scan
from support.spark_fixtures import random_history
from support.stores import ManualClock

pytestmark = pytest.mark.spark
DAY = 24 * 3600 * 1000


def files(store):
    """Every file of every log partition, by name, with its bytes."""
    out = {}
    for p, d in list_partition_dirs(store):
        for name in sorted(os.listdir(d)):
            out[(p, name)] = open(os.path.join(d, name), "rb").read()
    return out


def records(store):
    """Every record with its log offset and its batch's header fields, files aside."""
    return [(p, offset, record, batch.base_offset, batch.last_offset_delta, batch.attributes,
             batch.timestamp) for p, _, batch, offset, record in iter_records(store)]


def tables(store):
    report, t = scan(store, salvage=False, tables=True)
    return {p: table.as_dict() for p, table in t.items()}


def cleaner_opts(opts):
    """The store options the cleaner uses (compact() takes these)."""
    return {k: opts[k] for k in ("segment_bytes", "delete_retention_ms") if k in opts}


def local_compact(store, opts, now_ms):
    with OffsetStore.open(store, cleaner_backoff_ms=0, retention_check_interval_ms=0,
                          **opts) as s:
        return s.compact(now_ms=now_ms)


def test_spark_and_local_compaction_write_the_same_segments(spark, tmp_path, seeded_random):
    root = tmp_path / "spark"
    stores, opts_of = [], {}
    clock = ManualClock()
    for i in range(3):
        store = str(root / f"s{i}")
        opts_of[store] = random_history(store, seeded_random, clock, ops=150,
                                        segment_bytes=1024 * (i + 1), delete_retention_ms=DAY)
        shutil.copytree(store, str(tmp_path / "local" / f"s{i}"))
        stores.append(store)
    # two cleanings: the second, past the delete horizon, drops the tombstones the first kept
    for now in (clock.now, clock.now + DAY + 1):
        before = {s: tables(s) for s in stores}
        for store in stores:
            results = compact(spark, store, now_ms=now, **cleaner_opts(opts_of[store]))
            local = local_compact(str(tmp_path / "local" / os.path.basename(store)),
                                  opts_of[store], now)
            assert [r["records_after"] for r in results if r["cleaned"]] == [
                r.records_after for r in local]
        for store in stores:
            twin = str(tmp_path / "local" / os.path.basename(store))
            assert files(store) == files(twin)  # same records, offsets, batches, names
            assert tables(store) == tables(twin) == before[store]


def test_one_job_compacts_a_directory_of_stores(spark, tmp_path, seeded_random):
    clock = ManualClock()
    opts = {}
    for name in ("a", "b/c"):
        opts[name] = random_history(str(tmp_path / "fleet" / name), seeded_random, clock,
                                    ops=100, segment_bytes=1024)
        shutil.copytree(str(tmp_path / "fleet" / name), str(tmp_path / "local" / name))
    results = compact(spark, str(tmp_path / "fleet"), now_ms=clock.now, segment_bytes=1024)
    assert {r["store"] for r in results} == {str(tmp_path / "fleet" / n) for n in ("a", "b/c")}
    for name in ("a", "b/c"):
        local_compact(str(tmp_path / "local" / name), opts[name], clock.now)
        assert files(str(tmp_path / "fleet" / name)) == files(str(tmp_path / "local" / name))


@pytest.mark.parametrize("fail_at", list(STEPS) + ["kill:swap-renamed", "kill:sources-deleted"])
def test_a_failed_or_killed_job_leaves_the_store_as_it_was(spark, tmp_path, seeded_random,
                                                          fail_at):
    store = str(tmp_path / "s")
    clock = ManualClock()
    opts = random_history(store, seeded_random, clock, ops=120, segment_bytes=1024)
    before = tables(store)
    twin = str(tmp_path / "twin")
    shutil.copytree(store, twin)
    with pytest.raises(SparkCompactionError):
        compact(spark, store, now_ms=clock.now, _fail_at=fail_at, **cleaner_opts(opts))
    # the lock was released and recovery finishes or discards the interrupted swap
    with OffsetStore.open(store, cleaner_backoff_ms=0, retention_check_interval_ms=0):
        pass
    assert tables(store) == before
    # and compacting again keeps exactly the records an uninterrupted cleaning keeps (how
    # they are grouped into files may differ: the interrupted swap already merged some)
    compact(spark, store, now_ms=clock.now, **cleaner_opts(opts))
    local_compact(twin, opts, clock.now)
    assert records(store) == records(twin)
    assert tables(store) == before


def test_an_open_store_is_refused(spark, tmp_path, clock):
    store = str(tmp_path / "s")
    with OffsetStore.open(store, partitions=1, segment_bytes=1024, clock=clock,
                          cleaner_backoff_ms=0, retention_check_interval_ms=0) as s:
        for i in range(50):
            s.commit_sync("g", {TopicPartition("t", 0): i})
        before = files(store)
        with pytest.raises(StoreLockedError):
            compact(spark, store, now_ms=clock.now)
        assert files(store) == before


def test_cli_compact_with_the_spark_engine(spark, tmp_path, clock, capsys):
    from offsetlog.cli import main
    store = str(tmp_path / "s")
    with OffsetStore.open(store, partitions=2, clock=clock, segment_bytes=1024,
                          cleaner_backoff_ms=0, retention_check_interval_ms=0) as s:
        for i in range(80):
            s.commit_sync(f"g{i % 4}", {TopicPartition("t", 0): i})
        want = {g: s.fetch(g) for g in s.groups()}
    assert main(["compact", store, "--engine", "spark"]) == 0
    assert "closed segments:" in capsys.readouterr().out
    with OffsetStore.open(store, cleaner_backoff_ms=0, retention_check_interval_ms=0) as s:
        assert {g: s.fetch(g) for g in s.groups()} == want


def test_a_task_whose_job_is_over_does_nothing(tmp_path, seeded_random):
    """A task that reaches its partition's lock after its driver gave the store back (the job
    failed before the task started) must not touch the partition: the driver deleted the job
    file before it stopped waiting for tasks."""
    from offsetlog.compaction.spark import JOB_FILE_PREFIX, PartitionTask, compact_partition

    store = str(tmp_path / "s")
    clock = ManualClock()
    opts = random_history(store, seeded_random, clock, ops=120, segment_bytes=1024)
    before = files(store)
    p, directory = list_partition_dirs(store)[0]
    gone = os.path.join(store, JOB_FILE_PREFIX + "0123456789abcdef")
    task = PartitionTask(store, p, directory, clock.now, opts["delete_retention_ms"],
                         opts["segment_bytes"], job_file=gone)
    with pytest.raises(SparkCompactionError, match="the job is over"):
        compact_partition(task)
    assert files(store) == before
    # with its job file there, the same task cleans
    with open(gone, "x"):
        pass
    assert compact_partition(task)["partition"] == p


def test_a_job_removes_the_job_files_of_a_killed_driver_and_its_own(spark, tmp_path, clock):
    from offsetlog.compaction.spark import JOB_FILE_PREFIX

    store = str(tmp_path / "s")
    with OffsetStore.open(store, partitions=2, segment_bytes=1024, clock=clock,
                          cleaner_backoff_ms=0, retention_check_interval_ms=0) as s:
        for i in range(60):
            s.commit_sync(f"g{i % 3}", {TopicPartition("t", 0): i})
    stale = os.path.join(store, JOB_FILE_PREFIX + "dead")
    open(stale, "x").close()
    compact(spark, store, now_ms=clock.now)
    assert not [n for n in os.listdir(store) if n.startswith(JOB_FILE_PREFIX)]
