"""Recovery points (``<store>/RECOVERY-POINTS``): a hole that a power cut left in writes that
were never durable, followed by valid batches persisted out of order, is a torn tail past the
partition's recovery point and corruption below it.

The stores are built one commit per batch (``CommitLog``: boundaries from file sizes); a
commit of ``k`` offsets is ``k`` records, so the log offset after commit ``i`` is the count of
offsets committed so far, known without the reader under test.
"""

from __future__ import annotations

import logging
import os
import shutil
import struct
import zlib

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from offsetlog.errors import CorruptLogError
from offsetlog.log import recovery_points
from offsetlog.log.format import HEADER_SIZE
from offsetlog.recovery.replay import recover_partition
from support.durability_helpers import (
    TP,
    CommitLog,
    Seeded,
    copy_store,
    data_size,
    open_store,
    rebase,
    store_state,
)


def build(root, rng: Seeded, n: int = 8) -> CommitLog:
    """A closed one-partition store of ``n`` commits, a batch each."""
    store = open_store(root, partitions=1)
    log = CommitLog(store)
    for i in range(n):
        log.commit(f"group-{rng.randrange(3)}",
                   {TP("orders", p): 100 * i + p for p in range(rng.randrange(1, 4))})
    store.close()
    return log


def offset_after(log: CommitLog, commits: int) -> int:
    """The log offset after the first ``commits`` commits (one record per offset)."""
    return sum(len(offsets) for _, offsets in log.commits[:commits])


def zero(path: str, start: int, end: int) -> None:
    with open(path, "r+b") as f:
        f.seek(start)
        f.write(bytes(end - start))


def damaged_copy(tmp_path, src, log: CommitLog, name: str, k: int, start: int, end: int,
                 point: int | None) -> tuple[str, str]:
    """A copy of ``src`` with bytes [start, end) of batch ``k``'s segment zeroed and the
    recovery point ``point`` (None: no RECOVERY-POINTS file)."""
    work = copy_store(src, tmp_path / name)
    seg = rebase(log.spans[k][0], src, work)
    zero(seg, start, end)
    if point is None:
        os.unlink(recovery_points.points_path(work))
    else:
        recovery_points.write(work, {0: point})
    return work, seg


def batch_zeroed(tmp_path, k: int, point=lambda log, k: offset_after(log, k)):
    """A built store and a copy whose batch ``k`` is all zeros, with recovery point
    ``point(log, k)`` (None: no file): ``(rng, log, copy, its segment, the batch's start)``."""
    rng = Seeded()
    src = tmp_path / "src"
    log = build(src, rng)
    _, start, end = log.spans[k]
    work, seg = damaged_copy(tmp_path, src, log, "hole", k, start, end, point=point(log, k))
    return rng, log, work, seg, start


@pytest.mark.parametrize("hole", ["whole batch", "header", "payload"])
def test_a_hole_past_the_recovery_point_is_a_torn_tail_even_with_valid_batches_after_it(
        tmp_path, hole, caplog):
    rng = Seeded()
    src = tmp_path / "src"
    log = build(src, rng)
    k = 3
    _, start, end = log.spans[k]
    first, last = {"whole batch": (start, end), "header": (start, start + 8),
                   "payload": (start + HEADER_SIZE, end - 1)}[hole]
    work, seg = damaged_copy(tmp_path, src, log, "hole", k, first, last,
                             point=offset_after(log, k))
    size = data_size(seg)
    with caplog.at_level(logging.WARNING, logger="offsetlog.recovery"):
        store = open_store(work)
    try:
        torn = store.recovery_report.partitions[0].truncated
        assert torn is not None and (torn.path, torn.position) == (seg, start), rng.why()
        assert torn.bytes_dropped == size - start, rng.why("the valid batches after the hole go too")
        assert os.path.getsize(seg) == start
        assert store_state(store) == log.model(upto=k), rng.why()
        assert "recovery point" in caplog.text
        # Appends resume where the hole began, and the next open finds nothing wrong.
        store.commit_sync("group-0", {TP("orders", 9): 1})
    finally:
        store.close()
    again = open_store(work)
    try:
        assert again.recovery_report.partitions[0].truncated is None
        assert store_state(again)["group-0"][TP("orders", 9)].offset == 1
    finally:
        again.close()


@pytest.mark.parametrize("point", ["past the batch's start", "absent"])
def test_a_hole_below_the_recovery_point_or_without_one_is_still_corruption(tmp_path, point):
    rng, log, work, seg, start = batch_zeroed(
        tmp_path, 3, lambda log, k: offset_after(log, k) + 1 if point != "absent" else None)
    before = os.path.getsize(seg)
    with pytest.raises(CorruptLogError) as err:
        open_store(work).close()
    assert (err.value.path, err.value.position) == (seg, start), rng.why(str(err.value))
    assert os.path.getsize(seg) == before, "corruption must not be 'repaired'"


def test_a_cleanly_closed_store_records_its_end_so_damage_there_stays_corruption(tmp_path):
    rng = Seeded()
    src = tmp_path / "src"
    log = build(src, rng)
    assert recovery_points.read(str(src)) == {0: offset_after(log, len(log.commits))}


def test_the_read_only_scan_calls_a_hole_past_the_point_a_torn_tail(tmp_path):
    """``offsetlog verify`` and the crash harness read with ``repair=False``: they must see
    what open will do, and change nothing."""
    rng, log, work, seg, start = batch_zeroed(tmp_path, 2)
    size = os.path.getsize(seg)
    directory = os.path.dirname(seg)
    result = recover_partition(directory, 0, repair=False)
    assert result.truncated is not None and result.truncated.position == start
    assert result.next_offset == offset_after(log, 2)
    assert os.path.getsize(seg) == size
    os.unlink(recovery_points.points_path(work))
    with pytest.raises(CorruptLogError):
        recover_partition(directory, 0, repair=False)


# -- what the store writes ---------------------------------------------------------------------

def points_of(store) -> dict:
    return recovery_points.read(store.path)


@pytest.mark.parametrize("fsync", ["always", "interval", "never"])
def test_the_points_follow_what_is_durable(tmp_path, fsync):
    store = open_store(tmp_path / "s", partitions=1, fsync=fsync, fsync_interval_ms=3_600_000)
    try:
        assert points_of(store) == {0: 0}  # a new store: nothing yet
        store.commit_sync("g", {TP("t", 0): 1, TP("t", 1): 1})
        store._recovery_points.checkpoint()  # the background pass, now
        # Acknowledged under "always" means durable; otherwise not until a sync.
        assert points_of(store) == {0: 2 if fsync == "always" else 0}
        if fsync != "always":
            store._writer.sync_all()  # the interval loop's sync (and a roll's, a snapshot's)
            store._recovery_points.checkpoint()
            assert points_of(store) == {0: 2}
        store.commit_sync("g", {TP("t", 0): 2})
    finally:
        store.close()
    assert recovery_points.read(str(tmp_path / "s")) == {0: 3}  # close syncs, then writes


def test_an_append_is_not_durable_until_its_sync(tmp_path):
    store = open_store(tmp_path / "s", partitions=1, fsync="never")
    try:
        plog = store._parts[0].log
        assert plog.durable_offset() == 0
        store.commit_sync("g", {TP("t", 0): 1})
        assert plog.next_offset == 1 and plog.dirty and plog.durable_offset() == 0
        plog.sync()
        assert plog.durable_offset() == 1
    finally:
        store.close()


def test_a_damaged_points_file_is_ignored_and_recovery_is_strict(tmp_path, caplog):
    rng, log, work, seg, start = batch_zeroed(tmp_path, 3)
    path = recovery_points.points_path(work)
    data = bytearray(open(path, "rb").read())
    data[12] ^= 0x01  # the partition field of the one entry: the CRC no longer matches
    open(path, "wb").write(bytes(data))
    with caplog.at_level(logging.WARNING, logger="offsetlog.log.recovery_points"):
        with pytest.raises(CorruptLogError):
            open_store(work).close()
    assert "checksum mismatch" in caplog.text
    shutil.rmtree(work)


# -- the file's codec (FORMAT.md, "RECOVERY-POINTS") ----------------------------------------------

points_strategy = st.dictionaries(st.integers(0, 2**32 - 1), st.integers(0, 2**63 - 1),
                                  max_size=60)


@given(points_strategy)
def test_encode_decode_round_trip(points):
    assert recovery_points.decode(recovery_points.encode(points), "p") == points


def test_the_layout():
    """(The bytes of FORMAT.md's example are tests/log/test_format_doc.py's.)"""
    data = recovery_points.encode({7: 18, 2: 5})
    assert data[:12] == b"OLRP" + struct.pack("<HHI", 1, 0, 2)
    assert data[12:36] == struct.pack("<Iq", 2, 5) + struct.pack("<Iq", 7, 18)
    assert data[36:] == struct.pack("<I", zlib.crc32(data[:36]))
    assert len(data) == 16 + 12 * 2


@settings(suppress_health_check=[HealthCheck.too_slow])
@given(points_strategy, st.data())
def test_any_damage_is_refused_never_misread(points, data):
    """Every single-byte change, cut or extension of a valid file is refused (the CRC covers
    every byte before it; the length is fixed by the count)."""
    good = recovery_points.encode(points)
    how = data.draw(st.sampled_from(["flip", "cut", "extend"]))
    if how == "flip":
        i = data.draw(st.integers(0, len(good) - 1))
        bad = bytearray(good)
        bad[i] ^= data.draw(st.integers(1, 255))
        bad = bytes(bad)
    elif how == "cut":
        bad = good[:data.draw(st.integers(0, len(good) - 1))]
    else:
        bad = good + data.draw(st.binary(min_size=1, max_size=16))
    with pytest.raises(CorruptLogError):
        recovery_points.decode(bad, "p")


@given(st.one_of(st.binary(max_size=200), st.binary(max_size=64).map(lambda b: b"OLRP" + b)))
def test_arbitrary_bytes_decode_or_raise_corrupt_log_error(data):
    """(Half the inputs carry the magic, to get past the first check.)"""
    try:
        points = recovery_points.decode(data, "p")
    except CorruptLogError:
        return
    assert recovery_points.encode(points) == data
