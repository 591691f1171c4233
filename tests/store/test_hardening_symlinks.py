"""Issue 17, defect 1: no file inside a store is opened through a symbolic link, and the
directories a store creates are never group- or world-writable, whatever the umask.

Every link planted here points at a decoy file or directory in the test's own temporary
directory; the decoy's bytes must come out untouched and the error must name the link."""

from __future__ import annotations

import os
import stat

import pytest

from offsetlog import TopicPartition as TP
from offsetlog.errors import OffsetlogError, StoreFileError, SymlinkError
from offsetlog.log import naming
from offsetlog.recovery.tools import inspect, salvage
from support.durability_helpers import segment_files
from support.stores import open_log_store

DECOY = b"precious bytes that are not a segment\n" * 8


def decoy(tmp_path, name="decoy") -> str:
    path = tmp_path / name
    path.write_bytes(DECOY)
    return str(path)


def small_store(path, **options):
    store = open_log_store(path, partitions=1, **options)
    for i in range(5):
        store.commit_sync("g", {TP("t", i): i})
    store.close()
    return str(path)


def assert_untouched(path: str) -> None:
    with open(path, "rb") as f:
        assert f.read() == DECOY, "the link's target was written"


def test_a_symlink_named_like_the_next_segment_is_refused_and_its_target_untouched(tmp_path):
    store_dir = small_store(tmp_path / "s")
    target = decoy(tmp_path)
    link = naming.segment_path(naming.partition_dir(store_dir, 0), 10 ** 6)
    os.symlink(target, link)  # looks like the active segment: recovery would "repair" it
    with pytest.raises(SymlinkError) as err:
        open_log_store(store_dir).close()
    assert err.value.path == link and link in str(err.value)
    assert_untouched(target)
    with pytest.raises(SymlinkError):  # the operator's tools refuse it too
        salvage.recover_store(store_dir, salvage=True)
    assert_untouched(target)


def test_an_existing_segment_replaced_by_a_symlink_is_refused(tmp_path):
    store_dir = small_store(tmp_path / "s")
    [seg] = segment_files(store_dir)[0]
    os.unlink(seg)
    target = decoy(tmp_path)
    os.symlink(target, seg)
    with pytest.raises(SymlinkError) as err:
        open_log_store(store_dir).close()
    assert err.value.path == seg
    assert_untouched(target)
    with pytest.raises(SymlinkError):
        inspect.scan(store_dir)


def test_a_symlink_at_lock_is_refused_and_its_target_not_truncated(tmp_path):
    store_dir = small_store(tmp_path / "s")
    lock = naming.lock_path(store_dir)
    os.unlink(lock)
    target = decoy(tmp_path)
    os.symlink(target, lock)
    with pytest.raises(SymlinkError) as err:
        open_log_store(store_dir).close()
    assert err.value.path == lock
    assert_untouched(target)
    with pytest.raises(SymlinkError):
        salvage.recover_store(store_dir)
    assert_untouched(target)


@pytest.mark.parametrize("name", ["meta.json", "MANIFEST", "meta.json.tmp", "MANIFEST.tmp"])
def test_symlinks_at_the_store_files_are_never_written_through(tmp_path, name):
    store_dir = small_store(tmp_path / "s")
    # make the next open rewrite both files (an older meta.json; the active segment's data)
    with open(naming.meta_path(store_dir), "w") as f:
        f.write('{"format": "offsetlog", "version": 1, "partitions": 1}')
    path = os.path.join(store_dir, name)
    if os.path.exists(path):
        os.unlink(path)
    target = decoy(tmp_path)
    os.symlink(target, path)
    try:
        open_log_store(store_dir).close()
    except SymlinkError as e:
        assert e.path == path
    else:  # a leftover temporary file is removed (the link, not its target)
        assert name.endswith(".tmp") and not os.path.lexists(path)
    assert_untouched(target)


@pytest.mark.parametrize("name", ["RECOVERY-POINTS", "RECOVERY-POINTS.tmp"])
def test_symlinks_at_the_recovery_points_are_never_followed(tmp_path, name):
    store_dir = small_store(tmp_path / "s")
    os.unlink(os.path.join(store_dir, "RECOVERY-POINTS"))  # the next open writes it again
    path = os.path.join(store_dir, name)
    target = decoy(tmp_path)
    os.symlink(target, path)
    if name.endswith(".tmp"):  # removed (the link, not its target), the file written anew
        open_log_store(store_dir).close()
        assert not os.path.lexists(path)
        assert not os.path.islink(os.path.join(store_dir, "RECOVERY-POINTS"))
    else:  # neither read through (recovery) nor written through
        with pytest.raises(SymlinkError) as err:
            open_log_store(store_dir).close()
        assert err.value.path == path
    assert_untouched(target)


def test_a_symlinked_partition_directory_is_refused(tmp_path):
    store_dir = small_store(tmp_path / "s")
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    victim = elsewhere / naming.segment_name(0)
    victim.write_bytes(DECOY)
    link = naming.partition_dir(store_dir, 0)
    os.rename(link, tmp_path / "moved")
    os.symlink(elsewhere, link)
    with pytest.raises(SymlinkError) as err:
        open_log_store(store_dir).close()
    assert err.value.path == link
    assert_untouched(str(victim))


def test_a_symlink_named_like_a_swap_or_cleaned_file_is_refused(tmp_path):
    store_dir = small_store(tmp_path / "s")
    directory = naming.partition_dir(store_dir, 0)
    [seg] = segment_files(store_dir)[0]
    swap = naming.swap_path(directory, 0, 5)  # would replace (and delete) the real segment
    os.symlink(decoy(tmp_path), swap)
    with pytest.raises(SymlinkError):
        open_log_store(store_dir).close()
    assert os.path.exists(seg), "a planted swap link made recovery delete a segment"


def test_a_directory_named_like_a_segment_is_an_error_naming_it(tmp_path):
    store_dir = small_store(tmp_path / "s")
    bogus = naming.segment_path(naming.partition_dir(store_dir, 0), 10 ** 6)
    os.mkdir(bogus)
    with pytest.raises(StoreFileError) as err:
        open_log_store(store_dir).close()
    assert err.value.path == bogus
    with pytest.raises(OffsetlogError):
        inspect.scan(store_dir)


@pytest.mark.parametrize("umask", [0o000, 0o002, 0o022])
def test_directories_the_store_creates_are_never_group_or_world_writable(tmp_path, umask):
    old = os.umask(umask)
    try:
        root = tmp_path / "a" / "b" / "store"  # the missing parents are the store's doing too
        store = open_log_store(root, partitions=2)
        store.commit_sync("g", {TP("t", 0): 1})
        store.snapshot()
        store.close()
    finally:
        os.umask(old)
    created = [tmp_path / "a", tmp_path / "a" / "b", root, naming.snapshot_dir(str(root)),
               *(d for _, d in naming.list_partition_dirs(str(root)))]
    for d in created:
        mode = stat.S_IMODE(os.lstat(d).st_mode)
        assert mode & 0o022 == 0, f"{d} is mode {mode:o} under umask {umask:o}"
