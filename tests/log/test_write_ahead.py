"""The store's WRITE-AHEAD file (docs/FORMAT.md, "WRITE-AHEAD"): its reader against the
format's plain reading, what a store writes there, and what opening writes back into the
segments after their unsynced bytes were lost."""

from __future__ import annotations

import json
import os
import shutil
import signal
import subprocess
import sys
import textwrap

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from offsetlog import OffsetStore, TopicPartition
from offsetlog.errors import CorruptLogError, UnsupportedVersionError
from offsetlog.log import _native, meta, naming, write_ahead
from offsetlog.partitioner import partition_for
from support import write_ahead_ref as ref

# -- the reader --------------------------------------------------------------------------


def _native_read(data: bytes):
    generation, entries, end, short = _native.read_write_ahead(data)
    return generation, [tuple(e) for e in entries]


entries_st = st.lists(st.tuples(st.integers(0, 3), st.integers(0, 100), st.integers(0, 10**9),
                                st.integers(0, 10**9), st.binary(max_size=40)), max_size=6)


@settings(max_examples=300, deadline=None)
@given(generation=st.integers(0, 3), entries=entries_st, cut=st.integers(0, 600),
       flips=st.lists(st.tuples(st.integers(0, 599), st.integers(0, 7)), max_size=3),
       tail=st.binary(max_size=40))
def test_the_native_reader_reads_what_the_format_says(generation, entries, cut, flips, tail):
    data = bytearray(ref.marker(generation))
    for g, p, base, pos, payload in entries:
        data += ref.entry(g, p, base, pos, payload)
    data += tail
    whole = bytes(data)
    assert _native_read(whole) == ref.read(whole)
    for i, bit in flips:
        if i < len(data):
            data[i] ^= 1 << bit
    damaged = bytes(data[:cut])
    assert _native_read(damaged) == ref.read(damaged)


def test_the_reader_says_when_more_bytes_may_complete_an_entry():
    data = ref.marker(4) + ref.entry(4, 1, 0, 0, b"x" * 100)
    generation, entries, end, short = _native.read_write_ahead(data[:-1])
    assert (generation, entries, end, short) == (4, [], len(ref.marker(4)), True)
    generation, entries, end, short = _native.read_write_ahead(data + bytes(64))
    assert (len(entries), end, short) == (1, len(data), False)


# -- what a store writes -------------------------------------------------------------------

TP = TopicPartition("orders", 0)


def _groups(n: int, partitions: int = 50) -> list[str]:
    """``n`` groups in ``n`` different log partitions."""
    seen, out = set(), []
    i = 0
    while len(out) < n:
        g = f"g{i}"
        i += 1
        if partition_for(g, partitions) not in seen:
            seen.add(partition_for(g, partitions))
            out.append(g)
    return out


def _segment_bytes(root: str, partition: int, base: int, position: int, n: int) -> bytes:
    path = naming.segment_path(naming.partition_dir(root, partition), base)
    with open(path, "rb") as f:
        f.seek(position)
        return f.read(n)


def _version(root: str) -> int:
    with open(naming.meta_path(root)) as f:
        return json.load(f)["version"]


def _read_file(root: str):
    with open(write_ahead.path_of(root), "rb") as f:
        return ref.read(f.read())


def test_usual_commits_become_durable_as_entries_that_hold_their_segment_bytes(tmp_path):
    root = str(tmp_path / "s")
    groups = _groups(4)
    with OffsetStore.open(root, snapshots=False) as store:
        store._write_ahead.alone_limit = 0  # (every usual write through the file)
        assert _version(root) == 2  # an older engine refuses it while entries may be there
        for offset in range(5):
            for g in groups:
                store.commit_sync(g, {TP: offset})
        generation, entries = _read_file(root)
        assert generation is not None
        # (each partition's first write is synced in its segment: a first RWF_DSYNC try)
        assert len(entries) == 4 * 4
        assert {p for p, *_ in entries} == {partition_for(g, 50) for g in groups}
        for partition, base, position, data in entries:
            assert _segment_bytes(root, partition, base, position, len(data)) == data
    # a clean close synced the segments and began a generation without entries
    assert _read_file(root) == (generation + 1, [])
    assert _version(root) == 1
    with OffsetStore.open(root, snapshots=False) as store:
        assert store.recovery_report.write_ahead_restored == 0
        assert all(store.fetch(g)[TP].offset == 4 for g in groups)


def test_without_fsync_always_there_is_no_file_and_opening_removes_one(tmp_path):
    root = str(tmp_path / "s")
    with OffsetStore.open(root, fsync="never", snapshots=False) as store:
        store.commit_sync("g", {TP: 1})
        assert not os.path.exists(write_ahead.path_of(root))
    with OffsetStore.open(root, snapshots=False):
        assert os.path.exists(write_ahead.path_of(root))
    with OffsetStore.open(root, fsync="interval", snapshots=False):
        assert not os.path.exists(write_ahead.path_of(root))
        assert _version(root) == 1


def test_an_engine_that_reads_only_format_1_refuses_a_store_whose_file_is_open(tmp_path,
                                                                                 monkeypatch):
    root = str(tmp_path / "s")
    store = OffsetStore.open(root, snapshots=False)
    try:
        monkeypatch.setattr(meta, "WRITE_AHEAD_FORMAT_VERSION", 1)
        with pytest.raises(UnsupportedVersionError):
            meta.read(root)
    finally:
        monkeypatch.undo()
        store.close()
    monkeypatch.setattr(meta, "WRITE_AHEAD_FORMAT_VERSION", 1)
    assert meta.read(root).partitions == 50


# -- what opening writes back ----------------------------------------------------------------

def _lose_unsynced(root: str) -> int:
    """What a power cut may do to the segments: every byte an entry of the live generation
    made durable in a partition's active (last) segment, and everything after the last of
    them, gone (zeros). (An older segment was synced at its roll.) Returns those entries."""
    generation, entries = _read_file(root)
    ends: dict[tuple[int, int], int] = {}
    active = {}
    for partition, *_ in entries:
        segments = naming.list_segments(naming.partition_dir(root, partition))
        active[partition] = segments[-1][0]
    entries = [e for e in entries if active[e[0]] == e[1]]
    for partition, base, position, data in entries:
        path = naming.segment_path(naming.partition_dir(root, partition), base)
        with open(path, "r+b") as f:
            f.seek(position)
            f.write(bytes(len(data)))
        ends[(partition, base)] = max(ends.get((partition, base), 0), position + len(data))
    for (partition, base), end in ends.items():
        path = naming.segment_path(naming.partition_dir(root, partition), base)
        size = os.path.getsize(path)
        with open(path, "r+b") as f:
            f.seek(end)
            f.write(bytes(size - end))
    return len(entries)


CHILD = textwrap.dedent(r"""
    import os, sys, threading
    from offsetlog import OffsetStore, TopicPartition
    root, groups = sys.argv[1], sys.argv[2].split(",")
    store = OffsetStore.open(root, snapshots=False, segment_bytes=int(sys.argv[3]))
    store._write_ahead.alone_limit = 0  # (every usual write through the file)
    tp = TopicPartition("orders", 0)
    def run(g):
        for offset in range(1_000_000):
            store.commit_sync(g, {tp: offset})
            os.write(1, f"{g} {offset}\n".encode())
    for g in groups:
        threading.Thread(target=run, args=(g,), daemon=True).start()
    threading.Event().wait()
""")


def _kill_after(root: str, groups: list[str], acks: int, segment_bytes: int = 100 << 20
                ) -> dict[str, int]:
    """Run the child committing ``groups`` side by side, SIGKILL it after ``acks``
    acknowledgements, and return each group's last acknowledged offset."""
    child = subprocess.Popen([sys.executable, "-c", CHILD, root, ",".join(groups),
                              str(segment_bytes)], stdout=subprocess.PIPE)
    acked: dict[str, int] = {}
    try:
        for n, line in enumerate(child.stdout):
            g, offset = line.decode().split()
            acked[g] = max(acked.get(g, -1), int(offset))
            if n + 1 >= acks:
                break
    finally:
        child.send_signal(signal.SIGKILL)
        child.wait()
    return acked


@pytest.mark.parametrize("segment_bytes", [100 << 20, 4096])
def test_after_a_kill_and_a_power_cut_every_acknowledged_commit_is_back(tmp_path, segment_bytes):
    """SIGKILL mid-commit, then every segment byte the file made durable destroyed (a power
    cut may lose them all: they were never synced in their segments): opening writes them
    back and every acknowledged offset is there. With rolls (4 KiB segments) the entries of
    older segments, synced at their roll, are left alone."""
    root = str(tmp_path / "s")
    groups = _groups(8)
    acked = _kill_after(root, groups, 2000, segment_bytes)
    assert _version(root) == 2
    lost = _lose_unsynced(root)
    assert lost > 0, acked
    control = str(tmp_path / "control")
    shutil.copytree(root, control)
    with OffsetStore.open(root, snapshots=False) as store:
        assert store.recovery_report.write_ahead_restored > 0
        for g, offset in acked.items():
            assert store.fetch(g)[TP].offset >= offset, (g, store.recovery_report)
    # the same damage without the file loses acknowledged commits (or, where the damage
    # lies below a recovery point already written, is refused as corruption): the file is
    # what kept them
    os.unlink(write_ahead.path_of(control))
    try:
        with OffsetStore.open(control, snapshots=False) as store:
            behind = [g for g, offset in acked.items()
                      if store.fetch(g).get(TP) is None or store.fetch(g)[TP].offset < offset]
    except CorruptLogError:
        behind = ["(refused)"]
    assert behind, (lost, acked)


def test_a_torn_last_round_keeps_the_entries_before_it(tmp_path):
    """The file cut at every byte of its last entries (a crash inside the round's write),
    with the segment bytes they made durable lost: opening brings back exactly the commits
    whose entries are whole, and the others were never acknowledged."""
    root = str(tmp_path / "s")
    crashed = str(tmp_path / "crashed")
    groups = _groups(3)
    with OffsetStore.open(root, snapshots=False) as store:
        store._write_ahead.alone_limit = 0  # (every usual write through the file)
        for g in groups:
            store.commit_sync(g, {TP: 0})  # (each partition's first write: in its segment)
        for offset in (1, 2):
            for g in groups:
                store.commit_sync(g, {TP: offset})
        shutil.copytree(root, crashed)  # what a kill leaves (the page cache kept)
        store.close()
    with open(write_ahead.path_of(crashed), "rb") as f:
        whole = f.read()
    generation, entries = ref.read(whole)
    assert len(entries) == 6
    starts, pos = [], len(ref.marker(generation))
    for e in entries:
        starts.append(pos)
        pos += ref.HEADER.size + len(e[3])
    end = pos
    group_of = {partition_for(g, 50): g for g in groups}
    for cut in range(starts[-3], end + 1):
        trial = str(tmp_path / f"cut-{cut}")
        shutil.copytree(crashed, trial)
        _lose_unsynced(trial)
        with open(write_ahead.path_of(trial), "r+b") as f:
            f.truncate(cut)
        whole_entries = [e for s, e in zip(starts, entries) if s + ref.HEADER.size + len(e[3]) <= cut]
        want = {g: 0 for g in groups}
        for partition, *_ in whole_entries:
            want[group_of[partition]] += 1
        with OffsetStore.open(trial, snapshots=False) as store:
            got = {g: store.fetch(g)[TP].offset for g in groups}
        assert got == want, cut
        shutil.rmtree(trial)


def test_a_full_file_checkpoints_and_begins_again(tmp_path, monkeypatch):
    """A file too small for the rounds: each time it fills, the segments are synced and a
    new generation begins at its start; what the live one holds still comes back."""
    monkeypatch.setattr(write_ahead, "CAPACITY", 2048)
    root = str(tmp_path / "s")
    crashed = str(tmp_path / "crashed")
    groups = _groups(4)
    with OffsetStore.open(root, snapshots=False) as store:
        store._write_ahead.alone_limit = 0  # (every usual write through the file)
        first = None
        for offset in range(60):
            for g in groups:
                store.commit_sync(g, {TP: offset})
            generation, _ = _read_file(root)
            first = generation if first is None else first
        assert generation > first + 3
        shutil.copytree(root, crashed)
    _lose_unsynced(crashed)
    with OffsetStore.open(crashed, snapshots=False) as store:
        assert store.recovery_report.write_ahead_restored > 0
        assert all(store.fetch(g)[TP].offset == 59 for g in groups)


def test_an_entry_for_a_segment_that_is_no_longer_the_last_is_left_alone(tmp_path):
    """A roll syncs the old segment before the next exists, so an entry for it is already
    there; writing it could only undo what a cleaner did since. Opening leaves it alone."""
    root = str(tmp_path / "s")
    with OffsetStore.open(root, snapshots=False, segment_bytes=4096) as store:
        for offset in range(200):
            store.commit_sync("g", {TP: offset})
    directory = naming.partition_dir(root, partition_for("g", 50))
    segments = naming.list_segments(directory)
    assert len(segments) > 2
    old_base, old_path = segments[0]
    before = open(old_path, "rb").read()
    with open(write_ahead.path_of(root), "r+b") as f:
        generation = ref.read(f.read())[0]
        f.seek(0)
        f.write(ref.marker(generation) + ref.entry(generation, partition_for("g", 50), old_base,
                                                   0, b"\xff" * 64))
    with OffsetStore.open(root, snapshots=False) as store:
        assert store.recovery_report.write_ahead_restored == 0
        assert store.fetch("g")[TP].offset == 199
    assert open(old_path, "rb").read() == before


def test_verify_sees_and_recover_writes_back_what_the_file_holds(tmp_path):
    """The read-only scan (``offsetlog verify``) reads the segments with the file's batches
    laid over them, as opening will write them; ``offsetlog recover`` writes them back, then
    removes the file (salvage may rewrite the segments its entries point into)."""
    from offsetlog.recovery.tools.inspect import scan
    from offsetlog.recovery.tools.salvage import recover_store

    root = str(tmp_path / "s")
    crashed = str(tmp_path / "crashed")
    groups = _groups(3)
    with OffsetStore.open(root, snapshots=False) as store:
        store._write_ahead.alone_limit = 0  # (every usual write through the file)
        for offset in range(4):
            for g in groups:
                store.commit_sync(g, {TP: offset})
        shutil.copytree(root, crashed)
    assert _lose_unsynced(crashed) == 9
    report, tables = scan(crashed, salvage=False, tables=True)
    assert not report.truncations
    for g in groups:
        assert tables[partition_for(g, 50)].get(g, TP.topic, TP.partition)[0] == 3
    recovered = recover_store(crashed)
    assert recovered.recovery.write_ahead_restored == 9
    assert not os.path.exists(write_ahead.path_of(crashed)) and _version(crashed) == 1
    with OffsetStore.open(crashed, snapshots=False) as store:
        assert store.recovery_report.clean
        assert all(store.fetch(g)[TP].offset == 3 for g in groups)



def test_a_commit_with_nobody_to_share_a_round_with_is_its_segments_own_write(tmp_path,
                                                                             monkeypatch):
    """One committer: each usual write is alone, its segment's own RWF_DSYNC write with no
    entry (a system call fewer), told to ``segment._durable_observer``; with the limit at 0
    the same commits go through the file."""
    from offsetlog.log import segment

    if segment._write_dsync is None:
        pytest.skip("no RWF_DSYNC here: no usual write")
    seen = []
    monkeypatch.setattr(segment, "_durable_observer", lambda fd, start, end: seen.append(
        (start, end)))
    root = str(tmp_path / "s")
    with OffsetStore.open(root, snapshots=False) as store:
        assert store._write_ahead.alone_limit >= 4
        for offset in range(5):
            store.commit_sync("g", {TP: offset})
        assert _read_file(root)[1] == []
        # (the first write is the segment's first RWF_DSYNC try, made in Python)
        assert len(seen) == 4 and all(a < b for a, b in seen)
        assert [a for a, _ in seen[1:]] == [b for _, b in seen[:-1]]
        store._write_ahead.alone_limit = 0
        for offset in range(5, 8):
            store.commit_sync("g", {TP: offset})
        assert len(seen) == 4 and len(_read_file(root)[1]) == 3
