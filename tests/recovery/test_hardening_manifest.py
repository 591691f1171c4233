"""Issue 17, defect 4: a lost segment never goes unnoticed.

The MANIFEST (offsetlog/log/manifest.py, docs/FORMAT.md "MANIFEST") records every segment
and its size; open, ``offsetlog verify`` and ``offsetlog recover`` compare the directory with
it. A closed segment deleted, renamed away, emptied or shortened, or an emptied active
segment, is a ``CorruptLogError`` naming the file; ``recover --salvage`` reports it and goes
on; the manifest stays consistent through every step of a roll and of a cleaner swap."""

from __future__ import annotations

import os
import shutil

import pytest

from offsetlog import OffsetAndMetadata as OAM
from offsetlog import TopicPartition as TP
from offsetlog.cli.main import main as cli
from offsetlog.compaction import cleaner
from offsetlog.errors import CorruptLogError
from offsetlog.log import manifest, meta, naming
from offsetlog.partitioner import partition_for
from offsetlog.recovery import swap as swap_mod
from offsetlog.recovery.tools import inspect, salvage
from support.durability_helpers import segment_files, store_state, truncate
from support.stores import open_log_store


def rolled_store(path, *, segments=4, partitions=1):
    """A store whose partition 0 has ``segments`` segments, every key committed once per
    segment (so compaction has something to drop)."""
    store = open_log_store(path, partitions=partitions, segment_bytes=1024)
    i = 0
    log = store._parts[store.partition_of("g")].log
    while len(log.segments) < segments:
        store.commit_sync("g", {TP("t", i % 7): OAM(i, "m" * 40)})
        i += 1
    store.commit_sync("g", {TP("last", 0): i})
    expected = store_state(store)
    store.close()
    return str(path), expected


def test_the_manifest_lists_every_segment_with_its_size(tmp_path):
    path, _ = rolled_store(tmp_path / "s")
    assert manifest.read(path)[0][-1][1] == 0  # the roll knew the new segment was empty
    open_log_store(path).close()  # an open learns the active segment holds data
    entries = manifest.read(path)
    segs = segment_files(path)[0]
    assert [b for b, _ in entries[0]] == [naming.parse_segment_name(os.path.basename(s))
                                          for s in segs]
    assert [n for _, n in entries[0][:-1]] == [os.path.getsize(s) for s in segs[:-1]]
    assert 0 < entries[0][-1][1] <= os.path.getsize(segs[-1])  # the active: a lower bound
    assert meta.read(path).manifest and meta.read(path).checksummed


@pytest.mark.parametrize("damage", ["delete", "rename away", "empty", "shorten at a batch"])
def test_a_lost_closed_segment_is_corruption_naming_it(tmp_path, damage):
    path, _ = rolled_store(tmp_path / "s")
    victim = segment_files(path)[0][1]
    if damage == "delete":
        os.unlink(victim)
    elif damage == "rename away":
        os.rename(victim, victim + ".bak")
    elif damage == "empty":
        truncate(victim, 0)
    else:  # cut exactly after its first batch: every batch left is whole
        data = open(victim, "rb").read()
        truncate(victim, 4 + int.from_bytes(data[:4], "little"))
    with pytest.raises(CorruptLogError) as err:
        open_log_store(path).close()
    assert err.value.path == victim, err.value
    report, _ = inspect.scan(path)
    assert any(s.path == victim for s in report.skipped)
    assert cli(["verify", path]) == 1


def test_an_emptied_active_segment_is_corruption(tmp_path):
    path, _ = rolled_store(tmp_path / "s")
    open_log_store(path).close()  # an open after the data was written: it now knows
    active = segment_files(path)[0][-1]
    truncate(active, 0)
    with pytest.raises(CorruptLogError) as err:
        open_log_store(path).close()
    assert err.value.path == active
    assert cli(["verify", path]) == 1


def test_a_deleted_partition_directory_is_corruption(tmp_path):
    path, _ = rolled_store(tmp_path / "s", partitions=2)
    shutil.rmtree(naming.partition_dir(path, partition_for("g", 2)))
    with pytest.raises(CorruptLogError):
        open_log_store(path).close()


def test_a_deleted_manifest_is_noticed(tmp_path):
    path, _ = rolled_store(tmp_path / "s")
    os.unlink(manifest.manifest_path(path))
    with pytest.raises(CorruptLogError) as err:
        open_log_store(path).close()
    assert err.value.path == manifest.manifest_path(path)


def test_a_planted_segment_the_manifest_does_not_list_is_corruption(tmp_path):
    path, _ = rolled_store(tmp_path / "s")
    segs = segment_files(path)[0]
    shutil.copy(segs[1], naming.segment_path(naming.partition_dir(path, 0), 10 ** 9))
    with pytest.raises(CorruptLogError):
        open_log_store(path).close()


def test_salvage_goes_on_past_a_missing_segment_and_rebuilds_the_manifest(tmp_path):
    path, expected = rolled_store(tmp_path / "s")
    victim = segment_files(path)[0][1]
    os.unlink(victim)
    with pytest.raises(CorruptLogError):
        salvage.recover_store(path)  # without --salvage: the same error as open
    report = salvage.recover_store(path, salvage=True)
    assert any(r.path == victim and r.action == "missing" for r in report.regions), report
    with open_log_store(path) as store:  # opens now, with what survived
        assert store.recovery_report.clean
        assert store.committed("g", TP("last", 0)) == expected["g"][TP("last", 0)]
    assert cli(["verify", path]) == 0


def test_a_store_without_a_manifest_still_opens_and_gets_one(tmp_path):
    path, expected = rolled_store(tmp_path / "s")
    os.unlink(manifest.manifest_path(path))
    # an older store's meta.json: no checksum, no manifest flag
    with open(naming.meta_path(path), "w") as f:
        f.write('{"format": "offsetlog", "version": 1, "partitions": 1}\n')
    with open_log_store(path) as store:
        assert store_state(store) == expected
    assert manifest.read(path) is not None
    assert meta.read(path).manifest and meta.read(path).checksummed
    os.unlink(segment_files(path)[0][1])
    with pytest.raises(CorruptLogError):
        open_log_store(path).close()


def test_a_roll_cut_short_before_its_file_exists_still_opens(tmp_path):
    path, expected = rolled_store(tmp_path / "s")
    entries = manifest.read(path)
    entries[0].append((10 ** 6, 0))  # what a kill between the manifest write and the create leaves
    manifest.write(path, entries)
    with open_log_store(path) as store:
        assert store_state(store) == expected and store.recovery_report.clean
    assert manifest.read(path)[0][-1][0] != 10 ** 6


class Crash(Exception):
    pass


@pytest.mark.parametrize("step", ["before-manifest", *cleaner.STEPS])
def test_the_manifest_is_consistent_at_every_step_of_a_swap(tmp_path, monkeypatch, step):
    path, expected = rolled_store(tmp_path / "s", segments=5)
    store = open_log_store(path)

    def hook(name):
        if name == step:
            raise Crash(name)

    if step == "before-manifest":
        def fail(*args):
            raise Crash("before the manifest update")
        monkeypatch.setattr(swap_mod.manifest, "swapped", fail)
    else:
        store._cleaning.fault_hook = hook
    with pytest.raises(Crash):
        store.compact()
    monkeypatch.undo()
    store._cleaning.fault_hook = None
    # what a kill -9 here leaves: the files as they are (close() writes nothing to them)
    crashed = tmp_path / "crashed"
    shutil.copytree(path, crashed)
    store.close()
    with open_log_store(crashed) as again:
        assert store_state(again) == expected
        assert again.recovery_report.clean
        again.compact()
        assert store_state(again) == expected
    assert cli(["verify", str(crashed)]) == 0
