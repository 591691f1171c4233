"""The data source's reading layer, without Spark: planning and recovery's policy."""

import os

import pytest

from offsetlog import OffsetStore, TopicPartition
from offsetlog.errors import CorruptLogError, StoreConfigError
from offsetlog.log.framing import encode_batch
from offsetlog.log.naming import list_segments, partition_dir
from offsetlog.log.records import offset_commit
from offsetlog.spark.segments import RECORD_COLUMNS, find_stores, plan_segments, segment_rows


def make_store(path, clock, n=60):
    with OffsetStore.open(path, partitions=2, segment_bytes=1024, clock=clock,
                          cleaner_backoff_ms=0, retention_check_interval_ms=0) as s:
        for i in range(n):
            s.commit_sync(f"g{i % 3}", {TopicPartition("t", 0): i})


def test_stores_are_found_at_any_depth_but_not_inside_a_store(tmp_path, clock):
    for name in ("a", "x/b", "x/y/c"):
        make_store(str(tmp_path / name), clock, n=1)
    os.makedirs(tmp_path / "a" / "nested")  # inside a store: not searched
    assert find_stores(str(tmp_path)) == sorted(str(tmp_path / n) for n in ("a", "x/b", "x/y/c"))
    assert find_stores(str(tmp_path / "a")) == [str(tmp_path / "a")]
    with pytest.raises(StoreConfigError):
        find_stores(str(tmp_path / "a" / "nested"))


def test_one_task_per_segment_and_only_the_last_may_end_torn(tmp_path, clock):
    store = str(tmp_path / "s")
    make_store(store, clock)
    tasks = plan_segments(store)
    segments = [seg for p in (0, 1) for _, seg in list_segments(partition_dir(store, p))]
    assert [t.path for t in tasks] == segments
    for p in (0, 1):
        mine = [t for t in tasks if t.log_partition == p]
        assert [t.last for t in mine] == [False] * (len(mine) - 1) + [True]
        assert all(a.limit == b.base for a, b in zip(mine, mine[1:]))


def test_a_batch_reaching_past_the_next_segment_is_corruption(tmp_path, clock):
    store = str(tmp_path / "s")
    make_store(store, clock)
    d = partition_dir(store, 0)
    (b0, first), (b1, _) = list_segments(d)[:2]
    with open(first, "ab") as f:  # offsets b1 .. b1+1: inside the next segment's range
        f.write(encode_batch(b1, [offset_commit(0, "g0", "t", 0, 1, commit_timestamp=1),
                                  offset_commit(1, "g0", "t", 0, 2, commit_timestamp=1)],
                             timestamp=1))
    task = next(t for t in plan_segments(store) if t.path == first)
    with pytest.raises(CorruptLogError) as e:
        list(segment_rows(task))
    assert e.value.path == first and "past the next segment" in e.value.reason


def test_a_batch_that_passes_its_crc_but_does_not_decode_is_skipped_and_listed_under_salvage(
        tmp_path, clock):
    """As recovery does: corruption without salvage; with it the batch is skipped, the rest
    of the segment is read, and the problems view lists it (the Spark reader used to fail the
    job even with salvage on)."""
    from offsetlog.log.framing import frame_payload
    from offsetlog.spark.segments import segment_problems

    store = str(tmp_path / "s")
    make_store(store, clock)
    d = partition_dir(store, 0)
    _, last = list_segments(d)[-1]
    task = next(t for t in plan_segments(store) if t.path == last)
    rows_before = len(list(segment_rows(task)))
    with open(last, "ab") as f:  # 0xc1 is never valid msgpack
        f.write(frame_payload(task.base + 10_000, b"\xc1", record_count=1, last_offset_delta=0,
                              timestamp=1))
        f.write(encode_batch(task.base + 10_001,
                             [offset_commit(0, "g0", "t", 0, 99, commit_timestamp=1)],
                             timestamp=1))
    with pytest.raises(CorruptLogError) as e:
        list(segment_rows(task))
    assert "undecodable payload" in e.value.reason
    assert len(list(segment_rows(task, salvage=True))) == rows_before + 1
    assert [p[5] for p in segment_problems(task)] == ["undecodable payload"]


def test_rows_carry_the_key_of_every_record_but_offsets(tmp_path, clock):
    """``key_msgpack``: the keys the cleaner keys records by beyond the other columns (a
    consumer group's member, a SCRAM user, an ACL binding), as the engine's reader decodes
    them; null for offsets, whose key is in their columns."""
    import msgpack

    from offsetlog.acl import AclBinding, Operation, PatternType, Permission, ResourceType
    from offsetlog.compaction.rules import record_key
    from offsetlog.log.records import OFFSET_COMMIT
    from offsetlog.recovery.tools.inspect import iter_records
    from offsetlog.server.scram import make_credential
    from offsetlog.spark.cleaning import row_key
    from support.embedded_consumer import Member

    path = str(tmp_path / "s")
    with OffsetStore.open(path, partitions=2, clock=clock, cleaner_backoff_ms=0,
                          retention_check_interval_ms=0) as s:
        Member(s, "m1", group="cg").leave()
        s.acls.create([AclBinding(ResourceType.TOPIC, "t", PatternType.LITERAL, "User:a", "*",
                                  Operation.READ, Permission.ALLOW)])
        s.registries.set_scram_credential("u", "SCRAM-SHA-256",
                                          make_credential("SCRAM-SHA-256", "pw"))
        s.commit_sync("g", {TopicPartition("t", 0): 1})
    want = {(p, off): r for p, _, _, off, r in iter_records(os.path.abspath(path))}
    rows = [row for task in plan_segments(path) for row in segment_rows(task)]
    assert len(rows) == len(want)
    col = {name: i for i, (name, _) in enumerate(RECORD_COLUMNS)}
    types = set()
    for row in rows:
        record = want[(row[col["log_partition"]], row[col["log_offset"]])]
        types.add(record[1])
        blob = row[col["key_msgpack"]]
        if record[1] == OFFSET_COMMIT:
            assert blob is None
        else:
            assert msgpack.unpackb(blob, raw=False) == record[3]
        assert row_key(row) == record_key(record)
    assert len(types) >= 7  # offsets, the five consumer group types, ACL, SCRAM (and topics)
