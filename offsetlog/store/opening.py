"""Opening a store directory: creating it, taking its lock, its meta.json (the partition count,
fixed at creation), the MANIFEST check and the recovery of every log partition, from its
snapshot where one is usable. ``OffsetStore.open`` calls ``open_directory`` and builds the store
on what it returns.
"""

from __future__ import annotations

import contextlib
import dataclasses
import gc
import logging
import os
import time
from typing import Iterator

from offsetlog.errors import (
    CorruptLogError,
    OffsetlogError,
    StoreConfigError,
    StoreIOError,
    StoreNotFoundError,
)
from offsetlog.log import dirlock, manifest, meta, naming, recovery_points, segment, write_ahead
from offsetlog.log.partition_log import PartitionLog
from offsetlog.recovery.replay import check_placement
from offsetlog.recovery.report import RecoveryReport
from offsetlog.recovery.snapshot import partition_key as snapshot_key
from offsetlog.recovery.swap import plan_swaps
from offsetlog.store import checkpoints
from offsetlog.store.commit_queue import PartitionWriter
from offsetlog.store.config import StoreConfig
from offsetlog.store.snapshots import (
    LoadedSnapshots,
    delete_discarded,
    open_snapshots,
    recover_with_snapshot,
)

log = logging.getLogger("offsetlog.store")


@contextlib.contextmanager
def io_errors(path: str) -> Iterator[None]:
    """Turn an ``OSError`` met while opening the store at ``path`` into a ``StoreIOError``
    naming the file (a read-only store, a permission, EIO): every failure the store meets on
    disk is an ``OffsetlogError``. (Still an ``OSError``, with its ``errno``.)"""
    try:
        yield
    except OffsetlogError:
        raise
    except OSError as e:
        where = e.filename or path
        raise StoreIOError(f"{where}: {e.strerror or e} (opening the store {path})",
                           path=where, errno=e.errno) from e


def open_directory(path: str, config: StoreConfig, requested_partitions: int | None, *,
                   create: bool = True, progress=None
                   ) -> tuple[int, StoreConfig, list[PartitionWriter], RecoveryReport,
                              LoadedSnapshots, object]:
    """Create ``path`` if needed (and ``create``), lock it and recover it: ``(lock fd, config
    with the stored partition count, partitions, report, snapshots, write-ahead file)``; the
    write-ahead file (``_native.WriteAhead``, under ``fsync="always"``, else None) is the
    store's to close. On failure the lock is released."""
    check_store_path(path, create=create)
    create_store_dir(path)
    lock_fd = dirlock.acquire(path)
    ahead = None
    try:
        stored = read_or_create_meta(path, requested_partitions, config.partitions)
        if stored != config.partitions:
            config = dataclasses.replace(config, partitions=stored)
        ahead, restored = open_write_ahead(path, config)
        parts, report, loaded = recover(path, config, progress=progress)
        report.write_ahead_restored = restored
        for part in parts:
            part.log.write_ahead = ahead
    except BaseException:
        if ahead is not None:
            write_ahead.close(ahead, path, config.partitions, empty=False)
        dirlock.release(path, lock_fd)
        raise
    return lock_fd, config, parts, report, loaded, ahead


def open_write_ahead(path: str, config: StoreConfig) -> tuple[object, int]:
    """Before anything reads a segment: write back what the store's WRITE-AHEAD file made
    durable there (``write_ahead.apply``); then, under ``fsync="always"``, open the file for
    its next generation (meta.json saying first that it may hold entries), else (another
    policy, or ``write_ahead=False``) remove it.
    ``(the open file or None, batches written back)``.

    Where the file cannot be opened (no space left for meta.json or the file: a store on a
    full disk must still open), the store goes without it, each batch synced in its segment
    as under the other policies' syncs, and says so in the log."""
    with io_errors(path):
        generation, restored = write_ahead.apply(path)
        if config.fsync != "always" or not config.write_ahead:
            write_ahead.remove(path)
            if generation:  # (the file is gone: older engines may open the store again)
                write_ahead.mark(path, config.partitions, holding=False)
            return None, restored
        try:
            write_ahead.mark(path, config.partitions, holding=True)
            return write_ahead.open_file(path, generation), restored
        except OSError as e:
            # (its entries are in their segments now, synced: gone, they can never be written
            # back later over what recovery cuts and new writes replace)
            write_ahead.remove(path)
            log.warning("%s: opening without the write-ahead file (%r): each commit is synced "
                        "in its segment", path, e)
            return None, restored


def check_store_path(path: str, *, create: bool) -> None:
    """Refuse, before anything is created or locked, a path that is a file, and without
    ``create`` a directory that holds no store (``offsetlog compact`` pointed at a fleet's root
    must not make it a store, hiding the stores below it)."""
    if os.path.exists(path) and not os.path.isdir(path):
        raise StoreConfigError(f"{path} is not a directory: a store is a directory")
    if not create and not os.path.isfile(naming.meta_path(path)):
        what = ("no such directory" if not os.path.isdir(path)
                else "not an offsetlog store (no meta.json)")
        raise StoreNotFoundError(f"{path}: {what}", path=path)


def create_store_dir(path: str) -> None:
    """Create the store directory (and missing parents) with ``segment.DIR_MODE``, never
    group- or world-writable whatever the umask. An existing directory is left as it is.

    :raises StoreFileError: ``path`` exists and is not a directory
    :raises StoreIOError: it cannot be created
    """
    with io_errors(path):
        if not os.path.isdir(path):
            segment.make_dirs(path)


def read_or_create_meta(path: str, requested: int | None, default: int) -> int:
    """The store's partition count: from meta.json, or written there for a new store (with
    an empty MANIFEST, written first: meta.json says the store keeps one)."""
    with io_errors(path):
        stored = meta.read(path)
        if stored is None:
            if naming.list_partition_dirs(path):
                raise StoreConfigError(
                    f"{path} holds log partitions but no {os.path.basename(naming.meta_path(path))}"
                    "; refusing to guess its partition count")
            manifest.write(path, {})
            meta.write(path, default)
            return default
    stored = stored.partitions
    if requested is not None and requested != stored:
        raise StoreConfigError(
            f"{path} was created with {stored} partitions, not {requested}: groups are placed "
            "by hash modulo the partition count, so it cannot change")
    return stored


def recover(path: str, config: StoreConfig, *, progress=None
            ) -> tuple[list[PartitionWriter], RecoveryReport, LoadedSnapshots]:
    """Recover every log partition of the (locked) store at ``path``; ``progress`` is called
    with the byte size of each segment as it is read."""
    started = time.perf_counter()
    # Replay allocates millions of small acyclic objects; with the cyclic GC on, every
    # collection re-scans the growing table, a sizeable share of replay time. Pause it for
    # the replay and restore the caller's setting after.
    gc_was_enabled = gc.isenabled()
    gc.disable()
    try:
        with io_errors(path):
            return _recover_all(path, config, started, progress)
    finally:
        if gc_was_enabled:
            gc.enable()


def _recover_all(path: str, config: StoreConfig, started: float, progress=None
                 ) -> tuple[list[PartitionWriter], RecoveryReport, LoadedSnapshots]:
    report = RecoveryReport()
    found = dict(naming.list_partition_dirs(path))
    extra = [p for p in found if p >= config.partitions]
    if extra:
        raise StoreConfigError(
            f"{path} has log partitions {extra} beyond its partition count {config.partitions}")
    stored = meta.read(path)
    entries = read_manifest(path, stored, config.partitions)
    snapshot_store, snapshots, discard = open_snapshots(path, config, report)
    points = recovery_points.read(path)  # (read once here for every partition)
    try:
        parts = []
        kept: dict[int, tuple[int, int]] = {}
        for p in range(config.partitions):
            directory = naming.partition_dir(path, p)
            snapshot = snapshots.get(p)
            check = None
            if entries is not None:
                plan = plan_swaps(directory)  # read-only; recovery finishes the swaps
                check = manifest.check_partition(directory, p, entries.get(p, []),
                                                 plan.segments, plan.swaps)
                for problem in check.problems:
                    if problem.listing:  # before recovery reads (or repairs) anything
                        raise problem.error()
            table, result, used = recover_with_snapshot(path, directory, p, p in found,
                                                        snapshot, report, progress=progress,
                                                        recovery_point=points.get(p))
            if check is not None:
                # After it: a closed segment cut inside a batch is recovery's error, naming
                # the batch; one cut at a batch boundary, or a short active segment, is this.
                lost = check.problems + [manifest.check_active_end(
                    check, result.segments if result is not None else [])]
                for problem in lost:
                    if problem is not None:
                        raise problem.error()
            check_placement(table, p, config.partitions, directory)
            if used:
                report.snapshots_loaded[p] = snapshot.offset
                kept[p] = (snapshot.offset, snapshot.created_ms)
            elif snapshot is not None:
                discard.append(snapshot_key(p))
            if result is not None:
                report.partitions[p] = result
                segments, next_offset = result.segments, result.next_offset
            else:
                segments, next_offset = [], 0
            plog = PartitionLog(directory, p, segments=segments, next_offset=next_offset,
                                segment_bytes=config.segment_bytes, keep_manifest=True)
            parts.append(PartitionWriter(p, plog, table))
        delete_discarded(snapshot_store, discard)
        settle(path, stored, entries,
               write_ahead=config.fsync == "always" and config.write_ahead)
        checkpoints.write_at_open(path, parts, points)
    except BaseException:
        if snapshot_store is not None:
            snapshot_store.close()
        raise
    report.duration_s = time.perf_counter() - started
    return parts, report, LoadedSnapshots(snapshot_store, kept)


def read_manifest(path: str, stored: meta.StoreMeta | None, partitions: int
                  ) -> manifest.Entries | None:
    """The store's MANIFEST, checked against meta.json; None for a store from before
    manifests (opening creates one).

    :raises CorruptLogError: it is missing although meta.json says the store keeps one, does
        not decode, or lists partitions the store does not have
    """
    entries = manifest.read(path)
    if entries is None:
        if stored is not None and stored.manifest:
            raise CorruptLogError(manifest.manifest_path(path), 0,
                                  "missing: meta.json says this store keeps a MANIFEST, so "
                                  "segments may be missing unnoticed (`offsetlog recover "
                                  "--salvage` rebuilds it from the directory)")
        return None
    extra = sorted(p for p in entries if p >= partitions)
    if extra:
        raise CorruptLogError(manifest.manifest_path(path), 0,
                              f"lists log partitions {extra} of a store with {partitions}")
    return entries


def settle(path: str, stored: meta.StoreMeta | None, entries: manifest.Entries | None, *,
           write_ahead: bool = False) -> None:
    """After recovery: record what the directory now holds in the MANIFEST (the active
    segments' recovered sizes, swaps finished, a store's first manifest) if it changed, then
    give an older meta.json its checksum and manifest flag (in that order: meta.json never
    promises a manifest that is not there), keeping its write-ahead format where the store's
    WRITE-AHEAD file is open (``write_ahead``)."""
    now = manifest.from_directory(path)
    try:
        if now != entries:
            manifest.write(path, now)
        if stored is not None and not (stored.manifest and stored.checksummed):
            meta.write(path, stored.partitions, write_ahead=write_ahead)
    except OSError as e:
        # Nothing here is needed to open safely: the manifest on disk is consistent (rolls and
        # swaps keep it so), only less informed; an old meta.json stays as it was. A store
        # opened on a full disk (repairing a torn tail needs no space) must still open.
        log.warning("%s: could not update MANIFEST / meta.json (%s); the store opens without "
                    "it", path, e)
