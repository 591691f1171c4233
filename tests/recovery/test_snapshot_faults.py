"""Snapshot failures never corrupt the log or poison commits (item 10), and a SIGKILL while
snapshotting leaves a store whose reopen equals its durable commits.

The tests run as root on CI, so a read-only or full snapshot directory is simulated by the
store's fault hook raising what LMDB raises then (``ReadonlyError``, ``DiskError`` for
ENOSPC) at each step of a write.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import lmdb
import pytest

from offsetlog import OffsetStore, TopicPartition
from offsetlog.errors import SnapshotError, StoreFailedError
from offsetlog.log import naming, segment
from offsetlog.recovery import snapshot as snap
from offsetlog.recovery.tools import inspect
from offsetlog.table import OffsetTable
from support.durability_helpers import Seeded, file_sizes, replace_sync
from support.snapshots import open_store, tables

TP = TopicPartition
ERRORS = [lmdb.ReadonlyError("mdb_txn_begin: Permission denied"),
          lmdb.DiskError("mdb_txn_commit: No space left on device"), OSError(28, "ENOSPC")]


def failing(step, error):
    def hook(at):
        if at == step:
            raise error
    return hook


@pytest.mark.parametrize("step", snap.STEPS)
@pytest.mark.parametrize("error", ERRORS, ids=lambda e: type(e).__name__)
def test_failed_snapshot_write_touches_nothing_and_commits_go_on(tmp_path, step, error):
    with open_store(tmp_path, partitions=1, snapshot_on_close=False) as s:
        s.commit_sync("g", {TP("t", 0): 1})
        [first] = s.snapshot()
        s.commit_sync("g", {TP("t", 0): 2, TP("t", 1): 2})
        before = file_sizes(tmp_path)
        s._snapshots.fault_hook = failing(step, error)
        with pytest.raises(SnapshotError) as err:
            s.snapshot()
        assert 0 in err.value.failures
        assert file_sizes(tmp_path) == before  # the log is untouched
        st = s.stats()[0]
        assert st["snapshot_failures"] == 1 and type(error).__name__ in st["snapshot_error"]
        assert st["snapshot_offset"] == first.offset  # the old snapshot is still the one
        s.commit_sync("g", {TP("t", 0): 3})  # commits are not poisoned
        live = tables(s)
    with open_store(tmp_path, partitions=1) as s:
        # the aborted transaction left the old snapshot whole: it is loaded, plus the tail
        assert s.recovery_report.snapshots_loaded == {0: first.offset}
        assert tables(s) == live


def test_background_and_close_snapshots_that_fail_are_logged_and_counted(tmp_path, caplog):
    s = open_store(tmp_path, partitions=1, snapshot_interval_records=3)
    s._snapshots.fault_hook = failing("in-transaction", lmdb.DiskError("No space left"))
    for i in range(10):
        s.commit_sync("g", {TP("t", i % 2): i})
    deadline = time.monotonic() + 10
    while s.stats()[0]["snapshot_failures"] == 0:
        assert time.monotonic() < deadline
        time.sleep(0.02)
    s.commit_sync("g", {TP("t", 0): 100})
    live = tables(s)
    s.close()  # its snapshot fails too; close still completes and releases the directory
    assert any("snapshot of log partition 0 failed" in m for m in caplog.messages)
    with open_store(tmp_path, partitions=1) as s:
        assert tables(s) == live and not s.recovery_report.snapshots_loaded


def test_a_poisoned_store_takes_no_snapshot(tmp_path, monkeypatch):
    with open_store(tmp_path, partitions=1, snapshot_on_close=False) as s:
        s.commit_sync("g", {TP("t", 0): 1})
        replace_sync(monkeypatch, lambda fd: (_ for _ in ()).throw(OSError(5, "EIO")))
        with pytest.raises(StoreFailedError):
            s.commit_sync("g", {TP("t", 0): 2})
        monkeypatch.undo()
        with pytest.raises(SnapshotError, match="failed earlier"):
            s.snapshot()
    ro = snap.SnapshotStore(naming.snapshot_dir(str(tmp_path)), readonly=True)
    try:
        assert ro.read_all() == {}  # neither snapshot() nor close() wrote one
    finally:
        ro.close()


def test_full_map_grows(tmp_path):
    store = snap.SnapshotStore(str(tmp_path / "env"), map_size=64 * 1024)
    try:
        big = os.urandom(1 << 20)
        store.put(0, big)
        store.put(1, big)
        assert store.read_all() == {0: big, 1: big}
        assert store.env.info()["map_size"] >= 2 << 20
    finally:
        store.close()


# -- SIGKILL while snapshotting --------------------------------------------------------------

CHILD = r"""
import json, os, random, sys, threading, time
from offsetlog import OffsetStore, TopicPartition
cfg = json.loads(sys.argv[1])
rng = random.Random(cfg["seed"])
store = OffsetStore.open(cfg["dir"], partitions=2, segment_bytes=2048, fsync="always",
                         retention_check_interval_ms=0, cleaner_backoff_ms=0,
                         snapshot_interval_records=0, snapshot_interval_ms=0)
# widen the window in which a kill lands inside an LMDB write transaction
store._snapshots.fault_hook = lambda step: time.sleep(rng.random() * 0.004)
ack = os.open(cfg["acks"], os.O_WRONLY | os.O_CREAT | os.O_APPEND)
os.write(ack, b"READY\n")

def snapshots():
    while True:
        store.snapshot()
        if rng.random() < 0.3:
            store.compact()

threading.Thread(target=snapshots, daemon=True).start()
seq = cfg["start"]
while True:
    seq += 1
    g = f"g{seq % 3}"
    store.commit_sync(g, {TopicPartition("t", seq % 4): seq, TopicPartition("p", 0): seq})
    os.write(ack, f"ACK {g} {seq % 4} {seq}\n".encode())
"""


def test_sigkill_while_snapshotting_loses_no_durable_commit(tmp_path):
    rng = Seeded()
    cycles = int(os.environ.get("OFFSETLOG_SNAPSHOT_CRASH_CYCLES", "3"))
    d = str(tmp_path / "store")
    expected: dict[tuple, int] = {}  # (group, topic, partition) -> highest acked offset
    loaded = 0
    for cycle in range(cycles):
        acks = str(tmp_path / f"acks-{cycle}")
        cfg = {"dir": d, "acks": acks, "seed": rng.randrange(1 << 30),
               "start": (cycle + 1) * 1_000_000}
        child = subprocess.Popen([sys.executable, "-c", CHILD, json.dumps(cfg)],
                                 env={**os.environ, "PYTHONPATH": os.pathsep.join(sys.path)})
        deadline = time.monotonic() + 30
        while not (os.path.exists(acks) and b"READY" in Path(acks).read_bytes()):
            assert time.monotonic() < deadline and child.poll() is None, rng.why("no READY")
            time.sleep(0.01)
        time.sleep(0.2 + rng.random() * 0.6)
        child.send_signal(signal.SIGKILL)
        child.wait()
        for line in Path(acks).read_bytes().splitlines():
            if line.startswith(b"ACK "):
                _, g, p, seq = line.decode().split()
                for key in ((g, "t", int(p)), (g, "p", 0)):
                    expected[key] = max(expected.get(key, 0), int(seq))
        with OffsetStore.open(d, partitions=2, snapshot_on_close=False,
                              retention_check_interval_ms=0, cleaner_backoff_ms=0) as s:
            report = s.recovery_report
            assert not report.snapshots_discarded, rng.why(str(report))
            loaded += bool(report.snapshots_loaded)
            got = {(g, t, p): e[0] for part in s._parts for (g, t, p), e in part.table.items()}
            for key, seq in expected.items():
                assert got.get(key, 0) >= seq, rng.why(f"lost acked commit {key}={seq}")
            _, full = inspect.scan(d, salvage=False, tables=True)
            assert tables(s) == {p: (full[p] if p in full else OffsetTable()).as_dict()
                                 for p in range(2)}, rng.why("replay")
    assert loaded, rng.why("no reopen used a snapshot")


def test_close_does_not_snapshot_a_partition_whose_final_fsync_failed(tmp_path, monkeypatch):
    s = open_store(tmp_path, partitions=1, fsync="never")
    s.commit_sync("g", {TP("t", 0): 1})
    calls = []

    def fails_once(fd):  # as Linux may: EIO once, then "success" over dropped pages
        calls.append(fd)
        if len(calls) == 1:
            raise OSError(5, "EIO")

    monkeypatch.setattr(segment, "_sync", fails_once)
    s.close()  # logs the failed fsync; a retry could falsely succeed, so no snapshot either
    monkeypatch.undo()
    with open_store(tmp_path, partitions=1) as s:
        assert not s.recovery_report.snapshots_loaded
        assert s.committed("g", TP("t", 0)).offset == 1  # (the page cache still has it)
