"""Recovery of real store directories: torn tails, corruption on disk, config and locking.

Each damage test builds a store once, then works on copies of its directory. The expected
state comes from what the test committed (``CommitLog``) and the batch boundaries from file
sizes seen after each commit, never from the reader under test.
"""

from __future__ import annotations

import itertools
import os
import shutil
import subprocess
import sys

import pytest

from offsetlog.errors import CorruptLogError, StoreConfigError, StoreLockedError
from offsetlog.log.format import HEADER_SIZE
from offsetlog.log.framing import frame_payload
from offsetlog.partitioner import partition_for
from support.durability_helpers import (
    OAM,
    TP,
    CommitLog,
    Seeded,
    copy_store,
    file_sizes,
    flip_byte,
    last_segment,
    open_store,
    rebase,
    segment_files,
    store_state,
    truncate,
)


def groups_on(partitions: int, n: int, partition: int | None = None) -> list[str]:
    """``n`` group names, all on ``partition`` if given."""
    out = []
    for i in itertools.count():
        g = f"group-{i}"
        if partition is None or partition_for(g, partitions) == partition:
            out.append(g)
            if len(out) == n:
                return out


def build(root, rng: Seeded, *, n: int, partitions: int = 1, segment_bytes: int = 1 << 20,
          groups: list[str] | None = None) -> CommitLog:
    """A closed store with ``n`` commits, one batch each; returns what was committed where."""
    groups = groups or groups_on(partitions, 3)
    store = open_store(root, partitions=partitions, segment_bytes=segment_bytes)
    log = CommitLog(store)
    for i in range(n):
        offsets = {TP(rng.choice(["orders", "payments"]), rng.randrange(4)): 100 * i + j
                   for j in range(rng.randrange(1, 4))}
        if rng.random() < 0.3:
            tp = next(iter(offsets))
            offsets[tp] = OAM(offsets[tp], f"meta-{i}", rng.choice([None, 3]))
        log.commit(rng.choice(groups), offsets)
    store.close()
    return log


def expected_after_cut(log: CommitLog, path: str, cut: int) -> tuple[dict, int | None]:
    """(model state, start of the torn batch or None) when segment ``path`` is cut at ``cut``."""
    survives = [not (p == path and end > cut) for p, _, end in log.spans]
    torn = [start for p, start, end in log.spans if p == path and start < cut < end]
    return log.model(keep=lambda i: survives[i]), (torn[0] if torn else None)


# -- torn tails -------------------------------------------------------------------------

@pytest.mark.parametrize("partitions,segment_bytes", [(1, 1 << 20), (1, 1024), (3, 2048)])
def test_last_segment_cut_at_every_byte_recovers_exactly_the_complete_batches(
        tmp_path, partitions, segment_bytes):
    rng = Seeded()
    src = tmp_path / "src"
    log = build(src, rng, n=40, partitions=partitions, segment_bytes=segment_bytes)
    target = rng.randrange(partitions) if partitions > 1 else 0
    segments = segment_files(src)
    if target not in segments:
        target = next(iter(segments))
    seg = segments[target][-1]
    if partitions == 1 and segment_bytes == 1024:
        assert len(segments[0]) >= 3, "the test wants several segments"
    mine = [(s, e) for p, s, e in log.spans if p == seg]
    first = mine[max(0, len(mine) - 3)][0]  # every byte of the last three batches
    boundaries = {s for s, _ in mine} | {e for _, e in mine}
    for cut in range(first, mine[-1][1] + 1):
        where = rng.why(f"{os.path.basename(seg)} cut at {cut}")
        work = copy_store(src, tmp_path / f"cut-{cut}")
        work_seg = rebase(seg, src, work)
        truncate(work_seg, cut)
        expected, torn_at = expected_after_cut(log, seg, cut)
        store = open_store(work)
        try:
            assert store_state(store) == expected, where
            report = store.recovery_report
            if cut in boundaries:
                assert report.truncations == [], where
            else:
                assert len(report.truncations) == 1, where
                t = report.truncations[0]
                assert (t.path, t.position, t.bytes_dropped) == (work_seg, torn_at,
                                                                 cut - torn_at), where
                assert t.reason in ("truncated header", "truncated batch"), where
        finally:
            store.close()
        # The truncation was persisted: the next open is clean and sees the same state.
        assert os.path.getsize(work_seg) == (cut if torn_at is None else torn_at), where
        store = open_store(work)
        try:
            assert store.recovery_report.truncations == [], where
            assert store_state(store) == expected, where
        finally:
            store.close()
        shutil.rmtree(work)


def test_commits_after_a_repaired_tail_survive_the_next_reopen(tmp_path):
    rng = Seeded()
    log = build(tmp_path, rng, n=10)
    seg = last_segment(tmp_path, 0)
    _, start, end = log.spans[-1]
    truncate(seg, (start + end) // 2)
    store = open_store(tmp_path)
    assert len(store.recovery_report.truncations) == 1
    store.commit_sync("after", {TP("t", 0): 7})
    expected = log.model(upto=len(log.commits) - 1)
    expected["after"] = {TP("t", 0): OAM(7)}
    store.close()
    with open_store(tmp_path) as store:
        assert store.recovery_report.truncations == []
        assert store_state(store) == expected, rng.why()


def test_garbage_appended_after_the_last_batch_is_truncated(tmp_path):
    rng = Seeded()
    log = build(tmp_path, rng, n=5)
    seg = last_segment(tmp_path, 0)
    size = os.path.getsize(seg)
    with open(seg, "ab") as f:
        f.write(bytes(17) + rng.randbytes(50))
    with open_store(tmp_path) as store:
        assert store_state(store) == log.model(), rng.why()
        [t] = store.recovery_report.truncations
        assert (t.path, t.position, t.bytes_dropped) == (seg, size, 67)
    assert os.path.getsize(seg) == size


@pytest.mark.parametrize("mask", [0x01, 0xFF])
def test_flipped_header_byte_of_last_batch_is_a_torn_tail(tmp_path, mask):
    rng = Seeded()
    src = tmp_path / "src"
    log = build(src, rng, n=6)
    seg, start, end = log.spans[-1]
    for offset in range(HEADER_SIZE):
        work = copy_store(src, tmp_path / f"flip-{offset}")
        flip_byte(rebase(seg, src, work), start + offset, mask)
        with open_store(work) as store:
            assert store_state(store) == log.model(upto=5), rng.why(f"header byte {offset}")
            [t] = store.recovery_report.truncations
            assert (t.position, t.bytes_dropped) == (start, end - start)
        shutil.rmtree(work)


# -- corruption before the tail ---------------------------------------------------------

@pytest.mark.parametrize("mask", [0x01, 0x80, 0xFF])
def test_flipped_header_byte_of_middle_batch_is_corruption_naming_file_and_position(
        tmp_path, mask):
    rng = Seeded()
    src = tmp_path / "src"
    log = build(src, rng, n=8)
    seg, start, _ = log.spans[3]
    for offset in range(HEADER_SIZE):
        work = copy_store(src, tmp_path / f"flip-{offset}")
        work_seg = rebase(seg, src, work)
        flip_byte(work_seg, start + offset, mask)
        before = os.path.getsize(work_seg)
        with pytest.raises(CorruptLogError) as err:
            open_store(work).close()
        where = rng.why(f"header byte {offset} ^ {mask:#x}: {err.value}")
        assert (err.value.path, err.value.position) == (work_seg, start), where
        assert work_seg in str(err.value) and str(start) in str(err.value), where
        assert os.path.getsize(work_seg) == before, "corruption must not be 'repaired'"
        # The failed open released the directory: asking again gives the same answer.
        with pytest.raises(CorruptLogError):
            open_store(work).close()
        shutil.rmtree(work)


def test_flipped_payload_byte_of_middle_batch_is_corruption(tmp_path):
    rng = Seeded()
    src = tmp_path / "src"
    log = build(src, rng, n=8)
    seg, start, end = log.spans[2]
    for position in sorted(rng.sample(range(start + HEADER_SIZE, end), 12)):
        work = copy_store(src, tmp_path / f"flip-{position}")
        flip_byte(rebase(seg, src, work), position, 1 << rng.randrange(8))
        with pytest.raises(CorruptLogError) as err:
            open_store(work).close()
        assert err.value.position == start, rng.why(str(err.value))
        assert err.value.reason == "checksum mismatch", rng.why(str(err.value))
        shutil.rmtree(work)


def test_torn_tail_in_a_closed_segment_is_corruption(tmp_path):
    rng = Seeded()
    src = tmp_path / "src"
    log = build(src, rng, n=40, segment_bytes=1024)
    segments = segment_files(src)[0]
    assert len(segments) >= 3, "the test wants several segments"
    closed = segments[-2]
    mine = [(s, e) for p, s, e in log.spans if p == closed]
    start, end = mine[-1]
    for cut in range(start + 1, end):  # every cut inside the closed segment's last batch
        work = copy_store(src, tmp_path / f"cut-{cut}")
        work_seg = rebase(closed, src, work)
        truncate(work_seg, cut)
        with pytest.raises(CorruptLogError) as err:
            open_store(work).close()
        where = rng.why(f"cut at {cut}: {err.value}")
        assert (err.value.path, err.value.position) == (work_seg, start), where
        assert "closed segment" in err.value.reason, where
        assert os.path.getsize(work_seg) == cut, "a closed segment must never be truncated"
        shutil.rmtree(work)


def test_torn_tail_holding_batch_bytes_in_metadata_is_still_repaired(tmp_path):
    log = build(tmp_path, Seeded(), n=3)
    store = open_store(tmp_path)
    next_offset = store.stats()[0]["next_offset"]
    for i in itertools.count():  # a valid batch whose bytes are also valid UTF-8
        # the timestamp (ASCII digits) varies so the header checksum changes per attempt
        timestamp = int.from_bytes(b"%08d" % (i % 10 ** 8), "little")
        data = frame_payload(next_offset, b"p%08d" % i, record_count=1, last_offset_delta=0,
                             timestamp=timestamp, producer_id=0, producer_epoch=0)
        try:
            embedded = data.decode("utf-8")
            break
        except UnicodeDecodeError:
            continue
    # leader_epoch is written after metadata, so the cut below leaves the embedded bytes whole
    store.commit_sync("group-0", {TP("t", 0): OAM(1, embedded, 5)})
    store.close()
    seg = last_segment(tmp_path, 0)
    truncate(seg, os.path.getsize(seg) - 1)  # the crash tore the last batch
    with open_store(tmp_path) as store:
        assert len(store.recovery_report.truncations) == 1
        assert store_state(store) == log.model()


# -- configuration and locking -----------------------------------------------------------

def test_opening_with_other_partition_count_is_a_config_error(tmp_path):
    with open_store(tmp_path, partitions=3) as store:
        store.commit_sync("g", {TP("t", 0): 1})
    for wrong in (1, 2, 50):
        with pytest.raises(StoreConfigError, match="3 partitions"):
            open_store(tmp_path, partitions=wrong)
    # Nothing was changed and the directory was not left locked.
    with open_store(tmp_path) as store:
        assert store.partitions == 3
        assert store.fetch("g") == {TP("t", 0): OAM(1)}
    with open_store(tmp_path, partitions=3) as store:
        assert store.fetch("g") == {TP("t", 0): OAM(1)}


def test_partition_directory_beyond_the_count_is_a_config_error(tmp_path):
    with open_store(tmp_path, partitions=3) as store:
        store.commit_sync("g", {TP("t", 0): 1})
    os.mkdir(tmp_path / "__consumer_offsets-7")
    with pytest.raises(StoreConfigError):
        open_store(tmp_path)


_CHILD_OPEN = """
import sys
from offsetlog import OffsetStore
from offsetlog.errors import StoreLockedError
try:
    OffsetStore.open(sys.argv[1], retention_check_interval_ms=0).close()
except StoreLockedError as e:
    print("LOCKED", e.path)
else:
    print("OPENED")
"""


def _open_in_child(path) -> str:
    out = subprocess.run([sys.executable, "-c", _CHILD_OPEN, str(path)], capture_output=True,
                         text=True, timeout=60)
    assert out.returncode == 0, out.stderr
    return out.stdout.strip()


def test_second_open_is_locked_in_this_process_and_in_another(tmp_path):
    store = open_store(tmp_path)
    try:
        with pytest.raises(StoreLockedError) as err:
            open_store(tmp_path)
        assert err.value.path == str(tmp_path)
        # Another spelling of the same directory is the same store.
        with pytest.raises(StoreLockedError):
            open_store(str(tmp_path) + "/./")
        assert _open_in_child(tmp_path) == f"LOCKED {tmp_path}"
        store.commit_sync("g", {TP("t", 0): 5})  # the refused opens did not disturb it
    finally:
        store.close()
    assert _open_in_child(tmp_path) == "OPENED"
    with open_store(tmp_path) as again:
        assert again.fetch("g") == {TP("t", 0): OAM(5)}
    store.close()  # idempotent, and does not release someone else's lock
    with open_store(tmp_path):
        with pytest.raises(StoreLockedError):
            open_store(tmp_path)


def test_lock_held_by_a_child_process_refuses_the_parent(tmp_path):
    open_store(tmp_path).close()
    child = subprocess.Popen(
        [sys.executable, "-c",
         "import sys; from offsetlog import OffsetStore\n"
         "s = OffsetStore.open(sys.argv[1], retention_check_interval_ms=0)\n"
         "print('READY', flush=True); sys.stdin.read(); s.close()", str(tmp_path)],
        stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True)
    try:
        assert child.stdout.readline().strip() == "READY"
        with pytest.raises(StoreLockedError) as err:
            open_store(tmp_path)
        assert err.value.path == str(tmp_path)
    finally:
        child.stdin.close()
        child.wait(timeout=60)
    open_store(tmp_path).close()


def test_lock_of_a_killed_process_is_released(tmp_path):
    child = subprocess.Popen(
        [sys.executable, "-c",
         "import sys, time; from offsetlog import OffsetStore\n"
         "s = OffsetStore.open(sys.argv[1], retention_check_interval_ms=0)\n"
         "print('READY', flush=True); time.sleep(600)", str(tmp_path)],
        stdout=subprocess.PIPE, text=True)
    try:
        assert child.stdout.readline().strip() == "READY"
    finally:
        child.kill()
        child.wait(timeout=60)
    with open_store(tmp_path) as store:
        assert store.recovery_report.truncations == []


def test_file_sizes_match_the_segments(tmp_path):
    """Sanity check of the helpers the tests above rely on."""
    log = build(tmp_path, Seeded(), n=5)
    sizes = file_sizes(tmp_path)
    assert sizes == {log.spans[-1][0]: log.spans[-1][2]}
    assert [s for _, s, _ in log.spans] == [0] + [e for _, _, e in log.spans[:-1]]


# -- preallocated space (docs/FORMAT.md, "Preallocated space") ------------------------------

def test_reserve_left_by_a_crash_is_cut_on_open_and_appends_resume_at_the_data(tmp_path):
    """A crash leaves the active segment longer than its data (the zero reserve). Reopen must
    treat the zeros as the end, not as a torn tail, cut them, and append right after the data:
    zeros left between two writes would read as a torn tail and lose the second."""
    src = tmp_path / "live"
    store = open_store(src, partitions=1)
    store.commit_sync("g", {TP("t", 0): 1})
    store.commit_sync("g", {TP("t", 1): 2})
    [seg] = segment_files(src)[0]
    data = file_sizes(src)[seg]
    assert os.path.getsize(seg) > data, "the active segment should hold a reserve"
    crashed = copy_store(src, tmp_path / "crashed")  # the files as a SIGKILL would leave them
    store.close()
    assert os.path.getsize(seg) == data, "a clean close gives the reserve back"
    with open_store(crashed, partitions=1) as again:
        report = again.recovery_report
        assert report.truncations == [] and report.partitions[0].preallocated > 0
        again.commit_sync("g", {TP("t", 2): 3})
    with open_store(crashed, partitions=1) as again:
        assert again.fetch("g") == {TP("t", 0): OAM(1), TP("t", 1): OAM(2), TP("t", 2): OAM(3)}
        assert again.recovery_report.partitions[0].preallocated == 0


def test_rolled_segments_hold_no_reserve(tmp_path):
    root = tmp_path / "s"
    with open_store(root, partitions=1, segment_bytes=1024) as store:
        for i in range(60):
            store.commit_sync("g", {TP("t", i % 3): i})
        paths = segment_files(root)[0]
        assert len(paths) > 3
        for path in paths[:-1]:  # closed while the store is open: exactly their batches
            assert os.path.getsize(path) == file_sizes(root)[path] <= 1024


def test_last_batch_torn_at_every_byte_with_the_reserve_after_it(tmp_path):
    """With preallocation a torn write is followed by zeros, not by the end of the file: the
    bytes of the last batch from ``cut`` on, and the reserve after it, read as zeros. Every
    cut recovers exactly the batches before it: a cut at the batch's start is the clean end
    (nothing torn, the zeros are reserve); any other cut is a torn tail reaching to the end of
    the file; either way the file is cut to the data and the next commit lands right after."""
    rng = Seeded()
    src = tmp_path / "src"
    log = build(src, rng, n=6)
    seg, start, end = log.spans[-1]
    with open(seg, "rb") as f:
        data = f.read()
    assert len(data) == end
    size = end + 4096  # the reserve past the batch
    expected = log.model(upto=len(log.commits) - 1)
    for cut in range(start, end):
        where = rng.why(f"last batch [{start}, {end}) zeroed from {cut}")
        with open(seg, "wb") as f:
            f.write(data[:cut] + bytes(size - cut))
        with open_store(src) as store:
            assert store_state(store) == expected, where
            report = store.recovery_report
            if cut == start:
                assert report.truncations == [], where
                assert report.partitions[0].preallocated == size - start, where
            else:
                [t] = report.truncations
                assert (t.path, t.position, t.bytes_dropped) == (seg, start, size - start), where
            assert os.path.getsize(seg) == start, where
            if cut % 16 == 0:  # appends resume at the data: the next open sees them whole
                store.commit_sync("after", {TP("x", 0): cut})
        if cut % 16 == 0:
            with open_store(src) as store:
                assert store.recovery_report.clean, where
                assert store.committed("after", TP("x", 0)) == OAM(cut), where
