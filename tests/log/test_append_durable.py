"""The durable write of a group-commit round: one ``pwritev(RWF_DSYNC)`` (``segment._write_dsync``)
in place of ``write`` + ``fdatasync``, and its fallback where the flag is refused.

What must hold either way: the round's bytes, and every byte appended before them, are durable
when the call returns; they land once, at the end of the data; ``size`` and the file position
are what ``append`` keeps. Durability is observed through ``SyncTracker`` (what a power cut
would keep), never by replaying the log with the code under test.
"""

from __future__ import annotations

import errno
import logging
import os

import pytest

from offsetlog.errors import StoreFailedError
from offsetlog.log import segment
from offsetlog.log.partition_log import PartitionLog
from support.durability_helpers import (
    OAM,
    TP,
    SyncTracker,
    data_size,
    open_store,
    segment_files,
    store_state,
)

needs_dsync = pytest.mark.skipif(segment._write_dsync is None, reason="no pwritev/RWF_DSYNC here")


class Counted:
    """Calls ``real`` and remembers the arguments of every call."""

    def __init__(self, real) -> None:
        self.real = real
        self.calls: list[tuple] = []

    def __call__(self, *args):
        self.calls.append(args)
        return self.real(*args)


def commit_n(store, n: int, start: int = 0) -> dict:
    for i in range(start, start + n):
        store.commit_sync("g", {TP("t", i % 3): i, TP("u", 0): OAM(i, "m" * (i % 7))})
    return store_state(store)


@needs_dsync
def test_a_durable_round_is_one_pwritev_with_rwf_dsync_at_the_end_of_the_data(
        tmp_path, monkeypatch):
    store = open_store(tmp_path, partitions=1)
    pwritev = Counted(segment._write_dsync)  # the native pwritev2(RWF_DSYNC)
    writes, syncs = Counted(segment._write), Counted(segment._sync)
    monkeypatch.setattr(segment, "_write_dsync", pwritev)
    monkeypatch.setattr(segment, "_write", writes)
    monkeypatch.setattr(segment, "_sync", syncs)
    expected = commit_n(store, 12)
    [seg] = segment_files(tmp_path)[0]
    assert len(pwritev.calls) == 12 and not writes.calls and not syncs.calls
    end = 0
    for fd, data, offset in pwritev.calls:
        assert offset == end
        end += len(data)
    assert end == data_size(seg)
    store.close()
    with open_store(tmp_path) as again:
        assert store_state(again) == expected and again.recovery_report.clean


@needs_dsync
def test_every_acknowledged_round_is_durable_across_rolls(tmp_path, monkeypatch):
    """Drop what no sync covered (a power cut): nothing is lost, with rounds written by the
    combined call and segments rolled (the roll syncs the old one) in between."""
    store = open_store(tmp_path, partitions=2, segment_bytes=1024)
    tracker = SyncTracker(monkeypatch, tmp_path)
    expected = commit_n(store, 60)
    assert tracker.combined == 60
    assert len(segment_files(tmp_path)[store.partition_of("g")]) > 3
    assert tracker.drop_unsynced() == {}
    store.close()
    with open_store(tmp_path) as again:
        assert store_state(again) == expected and again.recovery_report.clean


def refusing(error, *, writes_first: bool = False):
    """A ``_write_dsync`` that refuses the flag (after writing the bytes, if asked: EINVAL
    from a filesystem without fsync comes after the page cache took them)."""
    calls = []

    def write_dsync(fd, data, offset):
        calls.append(offset)
        if writes_first:
            os.pwrite(fd, data, offset)
        if isinstance(error, int):
            raise OSError(error, os.strerror(error))
        raise error

    write_dsync.calls = calls
    return write_dsync


@pytest.mark.parametrize("error,writes_first", [
    (errno.EOPNOTSUPP, False), (errno.ENOSYS, False), (errno.EINVAL, False),
    (errno.EINVAL, True), (NotImplementedError("pwritev2 flags"), False)])
def test_a_refused_flag_falls_back_to_write_and_fdatasync_once_per_segment(
        tmp_path, monkeypatch, caplog, error, writes_first):
    store = open_store(tmp_path, partitions=1, segment_bytes=1024)
    tracker = SyncTracker(monkeypatch, tmp_path)
    refuse = refusing(error, writes_first=writes_first)
    tracker._real_dsync = refuse
    monkeypatch.setattr(segment, "_write_dsync", tracker._write_dsync)  # (also where None)
    with caplog.at_level(logging.DEBUG, logger="offsetlog.log.segment"):
        expected = commit_n(store, 40)
    segments = segment_files(tmp_path)[0]
    assert len(segments) > 2
    # tried once per segment, at its start, and never again on it
    assert len(refuse.calls) == len(segments) and refuse.calls[0] == 0
    assert tracker.combined == 0 and tracker.syncs >= 40
    refused = [r for r in caplog.records if "RWF_DSYNC refused" in r.getMessage()]
    assert len(refused) == len(segments) and all(r.levelno == logging.DEBUG for r in refused)
    assert tracker.drop_unsynced() == {}  # every acknowledged round was fdatasynced
    store.close()
    with open_store(tmp_path) as again:  # nothing written twice, nothing missing
        assert store_state(again) == expected and again.recovery_report.clean


@needs_dsync
@pytest.mark.parametrize("code", [errno.EINVAL, errno.EOPNOTSUPP])
def test_a_refusal_after_the_flag_worked_is_a_real_error(tmp_path, monkeypatch, code):
    store = open_store(tmp_path, partitions=1)
    before = commit_n(store, 3)
    monkeypatch.setattr(segment, "_write_dsync", refusing(code))
    with pytest.raises(StoreFailedError) as err:
        store.commit_sync("g", {TP("t", 0): 99})
    assert err.value.cause.errno == code
    assert store_state(store) == before
    monkeypatch.undo()
    with pytest.raises(StoreFailedError):  # poisoned
        store.commit_sync("g", {TP("t", 0): 100})
    store.close()
    with open_store(tmp_path) as again:
        assert store_state(again) == before


@needs_dsync
def test_log_syncs_earlier_unsynced_appends_and_keeps_its_position(tmp_path, monkeypatch):
    """``PartitionLog.append_durable`` after an unsynced ``append`` (fsync="interval") must
    sync that too, so it takes ``append`` + ``sync``; with nothing pending it is one combined
    call, after which plain appends still land at the end of the data."""
    log = PartitionLog(str(tmp_path / "p0"), 0, segments=[], next_offset=0, segment_bytes=1 << 20)
    tracker = SyncTracker(monkeypatch, tmp_path)
    log.append(b"a" * 100, 1)
    log.append_durable(b"b" * 50, 2)
    assert (tracker.combined, tracker.syncs) == (0, 1) and not log.dirty
    log.append_durable(b"c" * 10, 3)
    assert (tracker.combined, tracker.syncs) == (1, 2)
    log.append(b"d" * 5, 4)  # the fd's position was left behind by pwritev: seek first
    log.append_durable(b"", 4)  # nothing new: just the sync of what is pending
    assert (tracker.combined, tracker.syncs) == (1, 3) and not log.dirty
    log.append_durable(b"e" * 3, 5)
    [path] = [p for _, p in log.segments]
    assert tracker.durable_size(path) == 168 == log.end_position()[1]
    assert tracker.drop_unsynced() == {}
    log.close()
    assert segment.read_file(path) == b"a" * 100 + b"b" * 50 + b"c" * 10 + b"d" * 5 + b"e" * 3


@needs_dsync
def test_a_short_combined_write_is_finished_and_synced(tmp_path, monkeypatch):
    f = segment.SegmentFile.create(str(tmp_path / "s.log"), 0, limit=1 << 20)
    tracker = SyncTracker(monkeypatch, tmp_path)
    real = tracker._real_dsync
    tracker._real_dsync = lambda fd, data, offset: real(fd, bytes(data[:3]), offset)
    f.append_durable(b"0123456789")
    f.append_durable(b"abcdef")
    assert f.size == 16 and tracker.combined == 2 and tracker.syncs == 4
    assert tracker.durable_size(f.path) == 16
    assert os.lseek(f.fd, 0, os.SEEK_CUR) == 16  # the fallback leaves it positioned
    f.trim()
    f.close()
    assert segment.read_file(f.path) == b"0123456789abcdef"


def test_the_crash_childs_sync_log_counts_a_combined_write_as_synced(tmp_path, monkeypatch):
    """The power-loss simulation keeps only bytes the child logged as synced: a durable write
    a segment made itself (a first try in Python, or a lone commit's own write in the native
    core) must be logged with the range it wrote, or an acknowledged round is cut; the usual
    writes made durable in the WRITE-AHEAD file are not logged (a power cut may take them from
    the segment), and the file holds each of them."""
    from offsetlog.log import write_ahead
    from offsetlog.recovery.crashtest import child as crash_child
    from support import write_ahead_ref

    if segment._write_dsync is None:
        pytest.skip("no RWF_DSYNC here: every write is a write and an fdatasync")
    for name in ("_sync", "_durable_observer"):  # restored after the test
        monkeypatch.setattr(segment, name, getattr(segment, name))
    for name in ("append_durable", "end_durable", "sync"):
        monkeypatch.setattr(segment.SegmentFile, name, getattr(segment.SegmentFile, name))
    sync_log = tmp_path / "sync-log"
    crash_child._install_sync_log(str(sync_log), delay_ms=0.1)
    store = open_store(tmp_path / "store", partitions=1)
    ends = []

    def commit(i):
        store.commit_sync("g", {TP("t", 0): i})
        [seg] = segment_files(tmp_path / "store")[0]
        ends.append(data_size(seg))
        return seg

    for i in range(4):  # one committer: each write alone, its segment's own
        seg = commit(i)
    logged = {(kind, path, int(start), int(end))
              for kind, path, start, end in (line.split() for line in
                                             sync_log.read_text().splitlines())}
    # (a first try logged once or twice: its append_durable ends in end_durable)
    assert logged == {("DSYNC", seg, a, b) for a, b in zip([0] + ends[:-1], ends)}
    store._write_ahead.alone_limit = 0  # the rest through the file: entries, not logged
    for i in range(4, 8):
        commit(i)
    again = {tuple(line.split()) for line in sync_log.read_text().splitlines()}
    assert len(again) == len(logged)
    with open(write_ahead.path_of(str(tmp_path / "store")), "rb") as f:
        _, entries = write_ahead_ref.read(f.read())
    assert [(position, position + len(data)) for _, _, position, data in entries] == list(
        zip(ends[3:-1], ends[4:]))
    store.close()


@needs_dsync
def test_the_native_write_raises_oserror_with_its_errno(tmp_path):
    """``pwrite_dsync``'s failures are ``OSError``s with ``errno`` set, as ``os.pwritev``'s
    are: ``end_durable`` tells a refused ``RWF_DSYNC`` (EOPNOTSUPP, ENOSYS, EINVAL: fall back
    to write + fdatasync) from a failed write (poison the store) by it."""
    path = tmp_path / "f"
    path.write_bytes(b"")
    fd = os.open(path, os.O_RDONLY)
    try:
        with pytest.raises(OSError) as err:
            segment._write_dsync(fd, b"data", 0)
        assert err.value.errno == errno.EBADF and err.value.strerror
    finally:
        os.close(fd)
    fd = os.open(path, os.O_WRONLY)
    try:  # (an offset below -1 is invalid: -1 would mean the file position)
        with pytest.raises(OSError) as err:
            segment._write_dsync(fd, b"data", -2)
        assert err.value.errno == errno.EINVAL and segment._refused(err.value)
    finally:
        os.close(fd)
