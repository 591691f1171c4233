"""The offsetlog PySpark data source against the engine's own readers."""

import os

import pytest

from offsetlog import OffsetStore, TopicPartition
from offsetlog.log.format import HEADER_SIZE, Attribute, RecordType
from offsetlog.log.framing import encode_batch
from offsetlog.log.naming import list_segments, partition_dir
from offsetlog.log.records import describe, offset_commit
from offsetlog.recovery.tools.inspect import iter_records, scan
from support.spark_fixtures import random_history, spark_error_text
from support.stores import ManualClock

pytestmark = pytest.mark.spark


def read(spark, path, **options):
    reader = spark.read.format("offsetlog")
    for k, v in options.items():
        reader = reader.option(k, v)
    return reader.load(str(path))


def expected_rows(path):
    """What the engine's read-only iterator sees, as the data source's columns."""
    out = []
    for p, seg, batch, offset, record in iter_records(str(path)):
        d = describe(record)
        key, value = d["key"], d["value"]
        is_commit = record[1] == RecordType.OFFSET_COMMIT
        v = value if (is_commit and value is not None) else {}
        out.append((p, os.path.basename(seg), batch.position, batch.base_offset,
                    batch.timestamp, batch.attributes, batch.producer_id, batch.producer_epoch,
                    offset, d["type"] if not d["type"].startswith("UNKNOWN") else "UNKNOWN",
                    record[1], record[2], key.get("group"),
                    key.get("topic") if is_commit else None,
                    key.get("partition") if is_commit else None, v.get("offset"),
                    v.get("leader_epoch"), v.get("metadata"), v.get("commit_timestamp"),
                    v.get("expire_timestamp"), value is None))
    return sorted(out, key=lambda r: (r[0], r[8]))


COLUMNS = ["log_partition", "segment", "batch_position", "batch_base_offset", "batch_timestamp",
           "attributes", "producer_id", "producer_epoch", "log_offset", "record_type",
           "record_type_id", "record_version", "group", "topic", "partition", "offset",
           "leader_epoch", "metadata", "commit_timestamp", "expire_timestamp", "tombstone"]


def actual_rows(df):
    return sorted((tuple(r) for r in df.select(*COLUMNS).collect()), key=lambda r: (r[0], r[8]))


def segment_count(path):
    return sum(len(list_segments(d)) for d in
               (partition_dir(str(path), p) for p in range(50)) if os.path.isdir(d))


def test_rows_match_the_engines_reader_on_random_histories(spark, tmp_path, seeded_random):
    from pyspark.sql.functions import spark_partition_id
    root = tmp_path / "many"
    stores = [str(root / "a"), str(root / "b" / "c"), str(root / "b" / "d")]
    for store in stores:
        random_history(store, seeded_random, ManualClock(), ops=120,
                       segment_bytes=seeded_random.choice([2048, 4096]))
    df = read(spark, root)
    # one input partition per segment file
    assert df.rdd.getNumPartitions() == sum(segment_count(s) for s in stores)
    rows = df.select("store", spark_partition_id().alias("task"), *COLUMNS).collect()
    for store in stores:
        mine = [tuple(r)[2:] for r in rows if r.store == os.path.abspath(store)]
        assert sorted(mine, key=lambda r: (r[0], r[8])) == expected_rows(store)
    assert len(rows) == sum(len(expected_rows(s)) for s in stores)
    # ... each read by one task
    segments_per_task = {}
    for r in rows:
        segments_per_task.setdefault(r.task, set()).add((r.store, r.log_partition, r.segment))
    assert all(len(s) == 1 for s in segments_per_task.values())


def test_a_torn_tail_is_ignored_as_recovery_ignores_it(spark, tmp_path, clock):
    store = str(tmp_path / "s")
    with OffsetStore.open(store, partitions=1, segment_bytes=1024, clock=clock,
                          cleaner_backoff_ms=0, retention_check_interval_ms=0) as s:
        for i in range(40):
            s.commit_sync("g", {TopicPartition("t", i % 3): i})
    before = expected_rows(store)
    last = list_segments(partition_dir(store, 0))[-1][1]
    size = os.path.getsize(last)
    torn = encode_batch(10_000, [offset_commit(0, "g", "t", 0, 99, commit_timestamp=1)],
                        timestamp=1)
    with open(last, "ab") as f:
        f.write(torn[:HEADER_SIZE + 5])
    assert actual_rows(read(spark, store)) == before == expected_rows(store)
    (problem,) = read(spark, store, view="problems").collect()
    report, _ = scan(store, salvage=False)
    assert report.partitions[0].truncated.position == problem.position == size
    assert problem.kind == "torn tail" and problem.bytes == HEADER_SIZE + 5
    assert problem.segment == os.path.basename(last)


def _commit_store(path, clock, n=60):
    with OffsetStore.open(path, partitions=1, segment_bytes=1024, clock=clock,
                          cleaner_backoff_ms=0, retention_check_interval_ms=0) as s:
        for i in range(n):
            s.commit_sync("g", {TopicPartition("t", i % 3): i})


def test_corruption_fails_the_job_with_file_and_position_unless_salvage(spark, tmp_path, clock):
    store = str(tmp_path / "s")
    _commit_store(store, clock)
    segments = list_segments(partition_dir(store, 0))
    assert len(segments) >= 3
    victim = segments[1][1]
    data = bytearray(open(victim, "rb").read())
    second = int.from_bytes(data[0:4], "little") + 4  # position of the segment's 2nd batch
    data[second + HEADER_SIZE + 3] ^= 0xFF  # a payload byte: checksum mismatch
    open(victim, "wb").write(bytes(data))
    with pytest.raises(Exception) as e:
        read(spark, store).collect()
    text = spark_error_text(e)
    assert "CorruptLogError" in text and victim in text
    assert f"corrupt record batch at byte {second}: checksum mismatch" in text
    # salvage: exactly what the engine's salvage scan keeps, and the same dropped range
    assert actual_rows(read(spark, store, salvage="true")) == expected_rows(store)
    report, _ = scan(store, salvage=True)
    (skipped,) = report.partitions[0].skipped
    (problem,) = read(spark, store, view="problems").collect()
    assert (problem.position, problem.bytes, problem.reason, problem.kind) == (
        skipped.position, skipped.bytes_dropped, skipped.reason, "corrupt")


def test_a_torn_tail_in_a_closed_segment_is_corruption(spark, tmp_path, clock):
    store = str(tmp_path / "s")
    _commit_store(store, clock)
    victim = list_segments(partition_dir(store, 0))[0][1]
    size = os.path.getsize(victim)
    os.truncate(victim, size - 7)
    with pytest.raises(Exception) as e:
        read(spark, store).collect()
    assert "in a closed segment" in spark_error_text(e) and victim in spark_error_text(e)


def test_unknown_record_types_and_transactional_batches_are_rows(spark, tmp_path, clock):
    store = str(tmp_path / "s")
    _commit_store(store, clock, n=3)
    (_, seg), = list_segments(partition_dir(store, 0))
    unknown = (0, 99, 0, {"thing": 1}, {"x": b"\x00"})
    marker = (1, int(RecordType.TRANSACTION_MARKER), 0, {"producer_id": 7},
              {"producer_epoch": 2, "result": "commit"})
    with open(seg, "ab") as f:
        f.write(encode_batch(3, [offset_commit(0, "tx", "t", 0, 5, commit_timestamp=9)],
                             timestamp=9, attributes=Attribute.TRANSACTIONAL, producer_id=7,
                             producer_epoch=2))
        f.write(encode_batch(4, [unknown, marker], timestamp=10, attributes=Attribute.CONTROL,
                             producer_id=7, producer_epoch=2))
    rows = {r.log_offset: r for r in read(spark, store).collect()}
    assert len(rows) == 6
    tx = rows[3]
    assert (tx.group, tx.offset, tx.attributes, tx.producer_id, tx.producer_epoch) == (
        "tx", 5, Attribute.TRANSACTIONAL, 7, 2)
    assert (rows[4].record_type, rows[4].record_type_id, rows[4].group, rows[4].offset) == (
        "UNKNOWN", 99, None, None)
    assert rows[5].record_type == "TRANSACTION_MARKER"
    assert rows[5].transaction_result == "commit" and rows[5].producer_id == 7


def test_transaction_state_rows_carry_their_transactional_id(spark, tmp_path, clock):
    store = str(tmp_path / "s")
    with OffsetStore.open(store, partitions=3, clock=clock, cleaner_backoff_ms=0,
                          retention_check_interval_ms=0, transaction_check_interval_ms=0) as s:
        for tid in ("txn-a", "txn-b"):
            txn = s.init_transactions(tid)
            txn.begin()
            txn.commit_offsets("g", {TopicPartition("t", 0): 1})
            txn.commit()
    want = sorted((p, offset, record[3]["transactional_id"] if
                   record[1] == RecordType.TRANSACTION_STATE else None)
                  for p, _, _, offset, record in iter_records(store))
    got = sorted((r.log_partition, r.log_offset, r.transactional_id) for r in
                 read(spark, store).select("log_partition", "log_offset",
                                           "transactional_id").collect())
    assert got == want
    assert {t for *_, t in got} == {None, "txn-a", "txn-b"}
    states = read(spark, store).where("record_type = 'TRANSACTION_STATE'")
    assert states.where("transactional_id IS NULL").count() == 0
    # new columns come last: the existing columns keep their places
    assert read(spark, store).columns[-3:] == ["value_msgpack", "transactional_id",
                                               "key_msgpack"]


def test_a_directory_without_stores_is_refused(spark, tmp_path):
    (tmp_path / "empty").mkdir()
    with pytest.raises(Exception) as e:
        read(spark, tmp_path / "empty").collect()
    assert "holds no offsetlog store" in spark_error_text(e)


def test_import_offsetlog_does_not_import_pyspark(tmp_path):
    import subprocess
    import sys
    code = ("import sys, offsetlog, offsetlog.spark, offsetlog.spark.segments, offsetlog.cli;"
            "assert 'pyspark' not in sys.modules, 'pyspark imported'")
    subprocess.run([sys.executable, "-c", code], check=True, env={**os.environ})
