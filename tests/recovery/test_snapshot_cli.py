"""``offsetlog snapshot DIR`` and the snapshot part of ``offsetlog verify DIR``."""

from __future__ import annotations

import pytest

from offsetlog import OffsetStore, TopicPartition
from offsetlog.cli import main
from offsetlog.log.naming import list_segments, partition_dir, snapshot_dir
from offsetlog.recovery import snapshot as snap


@pytest.fixture
def store(store_dir, monkeypatch):
    monkeypatch.setenv("COLUMNS", "200")
    with OffsetStore.open(store_dir, partitions=3, snapshot_on_close=False) as s:
        for i in range(20):
            s.commit_sync(f"g{i % 4}", {TopicPartition("orders", i % 3): i})
    return store_dir


def entries(path):
    s = snap.SnapshotStore(snapshot_dir(path))
    try:
        return s.read_all()
    finally:
        s.close()


def test_snapshot_takes_one_per_partition_and_verify_checks_them(store, capsys):
    assert main(["verify", store]) == 0
    assert "snapshots: none stored" in capsys.readouterr().out
    assert main(["snapshot", store]) == 0
    out = capsys.readouterr().out
    stored = entries(store)
    assert stored and out.count("written") == len(stored)
    assert main(["snapshot", store]) == 0  # nothing changed since
    assert "up to date" in capsys.readouterr().out
    assert main(["verify", store]) == 0
    assert f"snapshots: {len(stored)} ok" in capsys.readouterr().out


def test_verify_warns_about_a_bad_snapshot_without_failing(store, capsys):
    main(["snapshot", store])
    p, data = next(iter(entries(store).items()))
    s = snap.SnapshotStore(snapshot_dir(store))
    s.put(p, data[:-1] + bytes([data[-1] ^ 1]))
    s.close()
    capsys.readouterr()
    assert main(["verify", store]) == 0  # a snapshot is a cache: a warning, not a failure
    out = capsys.readouterr().out
    assert "body checksum mismatch" in out and "WARNING" in out and "would be discarded" in out


def test_verify_and_open_refuse_a_snapshot_of_a_partition_the_store_lacks(store, capsys):
    """One rule for both: ``verify`` warns about it and open discards it, for one reason."""
    from offsetlog.table import OffsetTable
    s = snap.SnapshotStore(snapshot_dir(store))
    s.put(7, snap.encode(7, OffsetTable().snapshot_state(), created_ms=0))  # a well-formed one
    s.close()
    capsys.readouterr()
    assert main(["verify", store]) == 0
    out = capsys.readouterr().out
    reason = "no such partition (the store has 3)"
    assert reason in out and "would be discarded" in out
    with OffsetStore.open(store, snapshot_on_close=False) as opened:
        assert opened.recovery_report.snapshots_discarded == {7: reason}
    assert 7 not in entries(store)


def test_verify_fails_on_log_corruption_and_still_reports_snapshots(store, capsys):
    main(["snapshot", store])
    seg = next(list_segments(partition_dir(store, p))[0][1] for p in range(3)
               if list_segments(partition_dir(store, p)))
    with open(seg, "r+b") as f:
        f.seek(60)
        b = f.read(1)
        f.seek(60)
        f.write(bytes([b[0] ^ 0xFF]))
    capsys.readouterr()
    # byte 60 is in the first batch's payload, and valid batches follow: corruption
    assert main(["verify", store]) == 1
    out = capsys.readouterr().out
    assert "CORRUPT" in out and "snapshots:" in out
