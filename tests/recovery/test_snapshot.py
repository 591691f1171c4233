"""LMDB snapshots: the entry format, the table state, every reason a snapshot is discarded,
replay from a snapshot's offset, the cleaner's tombstone floor, and the store's options."""

from __future__ import annotations

import logging
import os
import struct
import zlib

import msgpack
import pytest

from offsetlog import OffsetAndMetadata, OffsetStore, TopicPartition
from offsetlog.compaction.cleaner import clean_partition
from offsetlog.errors import SnapshotError
from offsetlog.log import naming
from offsetlog.log.framing import encode_batch
from offsetlog.log.records import group_metadata, offset_commit, offset_tombstone
from offsetlog.recovery import snapshot as snap
from offsetlog.recovery.replay import recover_partition
from offsetlog.recovery.tools import inspect
from offsetlog.table import OffsetTable
from support.durability_helpers import ManualClock, segment_files, truncate

TP = TopicPartition
from support.snapshots import (  # noqa: E402
    P,  # noqa: E402
    open_store,
    tables,
)


def replayed(path) -> dict[int, dict]:
    """Full replay by the read-only scanner (no snapshots): the oracle for snapshot + tail."""
    _, out = inspect.scan(str(path), salvage=False, tables=True)
    return {p: out[p].as_dict() if p in out else OffsetTable().as_dict() for p in range(P)}


def fill(store, n, *, start=0, groups=5):
    for i in range(start, start + n):
        store.commit_sync(f"g{i % groups}", {TP("t", i % 4): OffsetAndMetadata(i, f"m{i}", i % 3),
                                             TP("u", 0): i})


def raw_entries(path) -> dict[int, bytes]:
    s = snap.SnapshotStore(naming.snapshot_dir(str(path)))
    try:
        return s.read_all()
    finally:
        s.close()


def put_raw(path, partition: int, data: bytes) -> None:
    s = snap.SnapshotStore(naming.snapshot_dir(str(path)))
    try:
        s.put(partition, data)
    finally:
        s.close()


def reheader(data: bytes, **fields) -> bytes:
    """``data`` with header fields replaced and both checksums made valid again."""
    names = ("magic", "version", "flags", "partition", "offset", "records", "created_ms",
             "segment", "position", "length", "body_crc", "header_crc")
    h = dict(zip(names, snap.HEADER.unpack_from(data)))
    body = fields.pop("body", data[snap.HEADER_SIZE:])
    h.update(fields)
    h["length"], h["body_crc"] = len(body), zlib.crc32(body)
    packed = snap.HEADER.pack(*[h[n] for n in names])
    return packed[:60] + zlib.crc32(packed[:60]).to_bytes(4, "little") + body


# -- format -----------------------------------------------------------------------------------

def test_table_state_round_trips_exactly():
    t = OffsetTable()
    t.apply_batch(0, [offset_commit(0, "g", "orders", 0, 5, commit_timestamp=1),
                      offset_commit(1, "g", "orders", 1, 6, metadata="x", leader_epoch=3,
                                    commit_timestamp=2, expire_timestamp=9),
                      offset_commit(2, "h", "pay", 0, 7, commit_timestamp=3),
                      group_metadata(3, "g", {"protocol_type": "consumer", "members": [1, 2]})])
    t.apply_batch(4, [offset_tombstone(0, "h", "pay", 0)])
    state = msgpack.unpackb(msgpack.packb(t.snapshot_state()), raw=False)
    u = OffsetTable.from_snapshot_state(state)
    assert u.as_dict() == t.as_dict()
    assert (u.next_offset, u.records_applied) == (t.next_offset, t.records_applied) == (5, 5)
    assert u.offsets == t.offsets and u.offsets.keys() == {"g"}
    # topics are interned on load, like apply_batches does
    [(tp, _)] = [(tp, e) for tp, e in u.offsets["g"].items() if tp[1] == 0]
    assert tp[0] is next(iter(k for k, _ in u.offsets["g"]))


@pytest.mark.parametrize("change, reason", [
    (lambda s: s.update(consumer_groups_v2=[]), "unknown snapshot sections"),
    (lambda s: s.pop("transactions"), "missing snapshot sections"),
    (lambda s: s.update(transactions={"pending": 1}), "malformed"),
    (lambda s: s.pop("topics"), "missing snapshot sections"),
    (lambda s: s["offsets"][1].pop(), "not 7-tuples"),
    (lambda s: s.update(topics=[]), "malformed"),
])
def test_table_refuses_state_it_cannot_load_whole(change, reason):
    t = OffsetTable()
    t.apply_batch(0, [offset_commit(0, "g", "orders", 0, 5, commit_timestamp=1)])
    state = t.snapshot_state()
    change(state)
    with pytest.raises(ValueError, match=reason):
        OffsetTable.from_snapshot_state(state)


def test_entry_round_trip_and_header_layout():
    t = OffsetTable()
    t.apply_batch(0, [offset_commit(0, "g", "t", 0, 5, commit_timestamp=1)])
    data = snap.encode(7, t.snapshot_state(), created_ms=123, position=(0, 99))
    assert data[:4] == b"OLSN" and len(data) == 64 + struct.unpack_from("<I", data, 52)[0]
    s = snap.decode(data, 7)
    assert (s.partition, s.offset, s.records, s.created_ms, s.position) == (7, 1, 1, 123, (0, 99))
    assert OffsetTable.from_snapshot_state(s.state).as_dict() == t.as_dict()
    assert snap.decode(snap.encode(7, t.snapshot_state(), created_ms=1), 7).position is None


@pytest.mark.parametrize("mutate, reason", [
    (lambda d: b"XXXX" + d[4:], "bad magic"),
    (lambda d: d[:4] + (2).to_bytes(2, "little") + d[6:], "format version 2"),
    (lambda d: d[:20] + bytes([d[20] ^ 1]) + d[21:], "header checksum"),
    (lambda d: d[:-1] + bytes([d[-1] ^ 1]), "body checksum"),
    (lambda d: d[:-1], "body is"),
    (lambda d: d[:30], "truncated header"),
    (lambda d: reheader(d, partition=4), "partition 4 stored under partition 7"),
    (lambda d: reheader(d, flags=1), "unknown flags"),
    (lambda d: reheader(d, offset=5), "disagrees"),
    (lambda d: reheader(d, body=b"\xc1"), "undecodable"),
])
def test_decode_refuses(mutate, reason):
    t = OffsetTable()
    t.apply_batch(0, [offset_commit(0, "g", "t", 0, 5, commit_timestamp=1)])
    data = snap.encode(7, t.snapshot_state(), created_ms=1)
    with pytest.raises(snap.SnapshotInvalid, match=reason):
        snap.decode(mutate(data), 7)


# -- the store: loading and every reason to discard --------------------------------------------

def test_reopen_loads_snapshot_and_replays_only_the_tail(tmp_path):
    with open_store(tmp_path, segment_bytes=1024, snapshot_on_close=False) as s:
        fill(s, 200)
        taken = {r.partition: r.offset for r in s.snapshot()}
        fill(s, 30, start=200)
        s.delete_group("g1")
        live = tables(s)
        logged = s.recovery_report  # noqa: F841
    with open_store(tmp_path) as s:
        r = s.recovery_report
        assert tables(s) == live == replayed(tmp_path)
        assert r.snapshots_loaded == taken and not r.snapshots_discarded
        for p, pr in r.partitions.items():
            assert pr.start_offset == taken[p]
            assert pr.segments_skipped >= 1  # whole segments below the snapshot were not read
            assert pr.records < taken[p]
        assert s.stats()[0]["snapshot_offset"] == taken[0]
    # close() snapshotted the tail: the next open reads nothing
    with open_store(tmp_path) as s:
        assert s.recovery_report.records == 0 and tables(s) == live


def test_missing_snapshot_means_full_replay_without_a_discard(tmp_path):
    with open_store(tmp_path, snapshot_on_close=False) as s:
        fill(s, 20)
        live = tables(s)
    with open_store(tmp_path) as s:
        assert tables(s) == live
        assert not s.recovery_report.snapshots_loaded and not s.recovery_report.snapshots_discarded
        assert s.recovery_report.records == 40


def _store_with_snapshot(path):
    with open_store(path) as s:
        fill(s, 30)
        live = tables(s)
    return live


@pytest.mark.parametrize("damage, reason", [
    (lambda d: d[:-3] + bytes([d[-3] ^ 0x10]) + d[-2:], "body checksum mismatch"),
    (lambda d: d[:4] + (9).to_bytes(2, "little") + d[6:], "format version 9"),
    (lambda d: reheader(d, partition=(d[8] + 1) % P), "stored under partition"),
    (lambda d: reheader(d, body=msgpack.packb(
        {**msgpack.unpackb(d[64:], raw=False), "consumer_groups_v2": []})), "unknown snapshot sections"),
])
def test_bad_snapshot_is_discarded_with_a_logged_reason_and_deleted(tmp_path, caplog, damage,
                                                                    reason):
    live = _store_with_snapshot(tmp_path)
    entries = raw_entries(tmp_path)
    victim = max(entries, key=lambda p: len(entries[p]))
    put_raw(tmp_path, victim, damage(entries[victim]))
    with caplog.at_level(logging.WARNING, logger="offsetlog.snapshot"):
        with open_store(tmp_path, snapshot_on_close=False) as s:
            r = s.recovery_report
            assert tables(s) == live
            assert reason in r.snapshots_discarded[victim]
            assert victim not in r.snapshots_loaded and len(r.snapshots_loaded) == len(entries) - 1
            assert r.partitions[victim].start_offset == 0  # replayed from the start
    assert any(reason in m and f"partition {victim}" in m for m in caplog.messages)
    assert victim not in raw_entries(tmp_path), "a discarded snapshot is deleted"


def test_snapshot_ahead_of_a_truncated_log_is_discarded(tmp_path, caplog):
    with open_store(tmp_path, snapshot_on_close=False) as s:
        fill(s, 10)
        s.commit_sync("g0", {TP("t", 0): 1})
        before_last = tables(s)
        s.commit_sync("g0", {TP("t", 0): 99})
        s.snapshot()
    p = OffsetStore.partition_of.__get__(s)("g0")
    seg = segment_files(tmp_path)[p][-1]
    truncate(seg, os.path.getsize(seg) - 5)  # the last batch is now a torn tail
    with caplog.at_level(logging.WARNING):
        with open_store(tmp_path, snapshot_on_close=False) as s:
            r = s.recovery_report
            assert "ahead of the log" in r.snapshots_discarded[p]
            assert r.partitions[p].truncated is not None  # the tail repair is still reported
            assert tables(s)[p] == before_last[p]
            # the store goes on past the discarded snapshot's offset...
            for i in range(3):
                s.commit_sync("g0", {TP("t", 0): 200 + i})
            after = tables(s)
    # ...and the stale snapshot is gone, so it cannot be loaded over the new records
    with open_store(tmp_path) as s:
        assert tables(s) == after and p not in s.recovery_report.snapshots_discarded


def test_snapshot_of_a_partition_without_log_is_discarded(tmp_path):
    _store_with_snapshot(tmp_path)
    entries = raw_entries(tmp_path)
    p = next(iter(entries))
    os.rename(naming.partition_dir(str(tmp_path), p), str(tmp_path / "moved"))
    with open_store(tmp_path, snapshot_on_close=False) as s:
        assert "no log" in s.recovery_report.snapshots_discarded[p]
        assert tables(s)[p] == OffsetTable().as_dict()


def test_unreadable_environment_is_discarded_whole(tmp_path, caplog):
    live = _store_with_snapshot(tmp_path)
    with open(os.path.join(naming.snapshot_dir(str(tmp_path)), "data.mdb"), "r+b") as f:
        f.write(os.urandom(8192))
    with caplog.at_level(logging.WARNING):
        with open_store(tmp_path) as s:
            assert tables(s) == live and not s.recovery_report.snapshots_loaded
    assert any("discarding every snapshot" in m for m in caplog.messages), caplog.messages
    with open_store(tmp_path) as s:  # close() wrote fresh snapshots
        assert tables(s) == live and s.recovery_report.snapshots_loaded


def test_snapshots_disabled_discards_them(tmp_path):
    live = _store_with_snapshot(tmp_path)
    with open_store(tmp_path, snapshots=False) as s:
        assert tables(s) == live and not s.recovery_report.snapshots_loaded
        with pytest.raises(SnapshotError):
            s.snapshot()
        assert s.stats()[0]["snapshot_offset"] is None
    assert not os.path.exists(naming.snapshot_dir(str(tmp_path)))


# -- replay from an offset ---------------------------------------------------------------------

def _write(path, batches):
    os.makedirs(path, exist_ok=True)
    with open(naming.segment_path(path, batches[0][0]), "wb") as f:
        for base, records in batches:
            f.write(encode_batch(base, records, timestamp=1))


def test_a_batch_straddling_the_start_offset_applies_only_its_records_above_it(tmp_path):
    d = str(tmp_path / "p")
    recs = [offset_commit(i, "g", "t", i, 100 + i, commit_timestamp=1) for i in range(4)]
    # one batch 0..3 (as a cleaner could leave it), then one at 4
    _write(d, [(0, recs), (4, [offset_commit(0, "g", "t", 9, 9, commit_timestamp=1)])])
    full = OffsetTable()
    recover_partition(d, 0, apply_batches=full.apply_batches, repair=False)
    # a snapshot at 2 holds records 0 and 1 (here: with other values, to see what is applied)
    t = OffsetTable()
    t.apply_batch(0, [offset_commit(0, "g", "t", 0, 100, commit_timestamp=1),
                      offset_commit(1, "g", "t", 1, 101, commit_timestamp=1)])
    seen = []
    r = recover_partition(d, 0, apply_batches=lambda c: (seen.extend(c), t.apply_batches(c)),
                          repair=False, start_offset=2)
    assert [(b, [x[0] for x in recs]) for b, recs, *_ in seen] == [(0, [2, 3]), (4, [0])]
    assert t.as_dict() == full.as_dict() and r.next_offset == 5 and not r.start_beyond_end


def test_untrustworthy_position_falls_back_to_a_scan(tmp_path):
    d = str(tmp_path / "p")
    recs = [(i, [offset_commit(0, "g", "t", i, i, commit_timestamp=1)]) for i in range(6)]
    _write(d, recs)
    full = OffsetTable()
    recover_partition(d, 0, apply_batches=full.apply_batches, repair=False)
    for position in [(0, 3), (0, 10**6), (0, 0), (7, 5), None]:
        t = OffsetTable()
        t.apply_batches([(b, r, 0, -1, -1) for b, r in recs[:3]])
        r = recover_partition(d, 0, apply_batches=t.apply_batches, repair=False, start_offset=3,
                              start_position=position)
        if position == (0, 10**6):  # past the end of the active segment: ahead of the log
            assert r.start_beyond_end
            continue
        assert t.as_dict() == full.as_dict() and r.records == 3, position


# -- the cleaner ---------------------------------------------------------------------------

def test_cleaner_keeps_tombstones_at_or_above_the_floor(tmp_path):
    d = str(tmp_path / "p")
    os.makedirs(d)
    seg0 = [(0, [offset_commit(0, "g", "t", 0, 1, commit_timestamp=1)]),
            (1, [offset_commit(0, "g", "t", 1, 1, commit_timestamp=1)]),
            (2, [offset_tombstone(0, "g", "t", 0)]), (3, [offset_tombstone(0, "g", "t", 1)])]
    _write(d, seg0)
    _write(d, [(4, [offset_commit(0, "g", "t", 2, 1, commit_timestamp=1)])])
    kw = dict(active_base=4, delete_retention_ms=0, segment_bytes=1 << 20)
    clean_partition(d, 0, now_ms=10, **kw)  # first cleaning stamps the delete horizon
    r = clean_partition(d, 0, now_ms=20, keep_tombstones_from=3, **kw)
    assert r.tombstones_dropped == 1  # the one at 2; the one at 3 is at the floor
    r = clean_partition(d, 0, now_ms=30, **kw)
    assert r.tombstones_dropped == 1


def test_store_cleaner_respects_the_snapshot_floor(tmp_path):
    clock = ManualClock()
    kw = dict(segment_bytes=1024, delete_retention_ms=0, clock=clock, partitions=1)
    with open_store(tmp_path, snapshot_on_close=False, **kw) as s:
        s.commit_sync("g", {TP("t", 0): 1, TP("t", 1): 1})
        s.snapshot()
        s.delete_offsets("g", [TP("t", 0)])  # a tombstone above the snapshot
        fill(s, 40, groups=3)  # roll segments past it
        for _ in range(3):
            clock.advance(10)
            s.compact()
        assert s.stats()[0]["snapshot_offset"] == 2
        live = tables(s)
    with open_store(tmp_path, partitions=1) as s:
        assert tables(s) == live
        assert s.committed("g", TP("t", 0)) is None


# -- options, stats, background ---------------------------------------------------------------

def test_snapshot_skips_unchanged_and_empty_partitions(tmp_path):
    with open_store(tmp_path) as s:
        assert s.snapshot() == []  # nothing committed yet
        s.commit_sync("g", {TP("t", 0): 1})
        p = s.partition_of("g")
        [r] = s.snapshot()
        assert (r.partition, r.offset, r.taken, r.keys) == (p, 1, True, 1) and r.bytes > 64
        [r] = s.snapshot()
        assert r.taken is False
        st = s.stats()[p]
        assert (st["snapshot_offset"], st["snapshot_failures"], st["snapshot_error"]) == (1, 0, None)
        assert st["snapshot_ms"] is not None


def test_background_snapshots_by_record_count_and_by_time(tmp_path):
    clock = ManualClock()
    with open_store(tmp_path, partitions=1, snapshot_interval_records=10,
                    snapshot_interval_ms=100, clock=clock, snapshot_on_close=False) as s:
        fill(s, 6)  # 12 records
        _wait(lambda: s.stats()[0]["snapshot_offset"] == 12)
        s.commit_sync("g", {TP("t", 0): 1})
        clock.advance(100)
        _wait(lambda: s.stats()[0]["snapshot_offset"] == 13)


def _wait(cond, timeout=10.0):
    import time
    deadline = time.monotonic() + timeout
    while not cond():
        assert time.monotonic() < deadline, "background snapshot did not happen"
        time.sleep(0.02)


def test_interval_fsync_snapshot_covers_only_durable_records(tmp_path, monkeypatch):
    """Under fsync="interval" the snapshot fsyncs the log first, so it never holds what a
    crash could take back."""
    from offsetlog.log import segment
    synced = []
    real = segment._sync
    monkeypatch.setattr(segment, "_sync", lambda fd: (synced.append(fd), real(fd)))
    with open_store(tmp_path, fsync="interval", fsync_interval_ms=3_600_000, partitions=1,
                    snapshot_on_close=False) as s:
        fill(s, 5)
        n = len(synced)
        s.snapshot()
        assert len(synced) > n  # the log was synced before the snapshot was taken
        assert not s._parts[0].log.dirty


def test_tombstone_floors_for_offline_tools(tmp_path):
    assert snap.tombstone_floors(naming.snapshot_dir(str(tmp_path))) == {}
    _store_with_snapshot(tmp_path)
    entries = raw_entries(tmp_path)
    floors = snap.tombstone_floors(naming.snapshot_dir(str(tmp_path)))
    assert floors == {p: snap.decode(d, p).offset for p, d in entries.items()}
    p = next(iter(entries))
    put_raw(tmp_path, p, b"OLSN\x09\x00" + bytes(100))  # a format this code cannot read
    assert snap.tombstone_floors(naming.snapshot_dir(str(tmp_path)))[p] == 0


def test_header_constants_match_the_doc():
    doc = open(os.path.join(os.path.dirname(__file__), "..", "..", "docs", "FORMAT.md"),
               encoding="utf-8").read().split("## Snapshot store", 1)[1]
    assert snap.HEADER.format == "<4sHHIqqqqqIII" and snap.HEADER_SIZE == 64
    assert snap.MAGIC == b"OLSN" and "`OLSN`" in doc and snap.VERSION == 1
    assert sorted(OffsetTable.SNAPSHOT_SECTIONS) == sorted(
        s for s in ("next_offset", "records_applied", "topics", "offsets", "group_metadata",
                    "transactions", "topic_registry", "consumer_groups",
                    "user_scram_credentials", "acls")
        if f"| `{s}` |" in doc)
