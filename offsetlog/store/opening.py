"""Opening a store directory: creating it, taking its lock, its meta.json (the partition count,
fixed at creation) and the recovery of every log partition, from its snapshot where one is
usable. ``OffsetStore.open`` calls ``open_directory`` and builds the store on what it returns.
"""

from __future__ import annotations

import dataclasses
import gc
import json
import os
import time

from offsetlog.errors import StoreConfigError, StoreNotFoundError, UnsupportedVersionError
from offsetlog.log import dirlock, naming, segment
from offsetlog.log.format import STORE_FORMAT_VERSION
from offsetlog.log.partition_log import PartitionLog
from offsetlog.recovery.report import RecoveryReport
from offsetlog.recovery.snapshot import partition_key as snapshot_key
from offsetlog.store.commit_queue import PartitionWriter
from offsetlog.store.config import StoreConfig
from offsetlog.store.snapshots import (
    LoadedSnapshots,
    delete_discarded,
    open_snapshots,
    recover_with_snapshot,
)


def open_directory(path: str, config: StoreConfig, requested_partitions: int | None, *,
                   create: bool = True, progress=None
                   ) -> tuple[int, StoreConfig, list[PartitionWriter], RecoveryReport,
                              LoadedSnapshots]:
    """Create ``path`` if needed (and ``create``), lock it and recover it: ``(lock fd, config
    with the stored partition count, partitions, report, snapshots)``. On failure the lock is
    released."""
    check_store_path(path, create=create)
    if not os.path.isdir(path):
        os.makedirs(path, exist_ok=True)
        segment.fsync_dir(os.path.dirname(path))
    lock_fd = dirlock.acquire(path)
    try:
        stored = read_or_create_meta(path, requested_partitions, config.partitions)
        if stored != config.partitions:
            config = dataclasses.replace(config, partitions=stored)
        parts, report, loaded = recover(path, config, progress=progress)
    except BaseException:
        dirlock.release(path, lock_fd)
        raise
    return lock_fd, config, parts, report, loaded


def check_store_path(path: str, *, create: bool) -> None:
    """Refuse, before anything is created or locked, a path that is a file, and without
    ``create`` a directory that holds no store (``offsetlog compact`` pointed at a fleet's root
    must not make it a store, hiding the stores below it)."""
    if os.path.exists(path) and not os.path.isdir(path):
        raise StoreConfigError(f"{path} is not a directory: a store is a directory")
    if not create and not os.path.isfile(naming.meta_path(path)):
        what = "no such directory" if not os.path.isdir(path) else "not an offsetlog store (no meta.json)"
        raise StoreNotFoundError(f"{path}: {what}", path=path)


def read_or_create_meta(path: str, requested: int | None, default: int) -> int:
    """The store's partition count: from meta.json, or written there for a new store."""
    meta_file = naming.meta_path(path)
    try:
        with open(meta_file, "rb") as f:
            meta = json.load(f)
    except FileNotFoundError:
        if naming.list_partition_dirs(path):
            raise StoreConfigError(
                f"{path} holds log partitions but no {os.path.basename(meta_file)}; refusing "
                "to guess its partition count") from None
        meta = {"format": "offsetlog", "version": STORE_FORMAT_VERSION, "partitions": default}
        segment.atomic_write(meta_file, (json.dumps(meta, indent=2) + "\n").encode())
        return default
    except (ValueError, OSError) as e:
        raise StoreConfigError(f"{meta_file} is unreadable: {e}") from None
    if meta.get("format") != "offsetlog":
        raise StoreConfigError(f"{meta_file} does not describe an offsetlog store")
    if meta.get("version", 0) > STORE_FORMAT_VERSION:
        raise UnsupportedVersionError(
            f"{path} is store format {meta['version']}, newer than this offsetlog reads "
            f"({STORE_FORMAT_VERSION})")
    stored = meta.get("partitions")
    if not isinstance(stored, int) or stored < 1:
        raise StoreConfigError(f"{meta_file} has no valid partition count")
    if requested is not None and requested != stored:
        raise StoreConfigError(
            f"{path} was created with {stored} partitions, not {requested}: groups are placed "
            "by hash modulo the partition count, so it cannot change")
    return stored


def recover(path: str, config: StoreConfig, *, progress=None
             ) -> tuple[list[PartitionWriter], RecoveryReport, LoadedSnapshots]:
    started = time.perf_counter()
    # Replay allocates millions of small acyclic objects; with the cyclic GC on, every
    # collection re-scans the growing table (measured: ~15% of replay time at 1M records).
    # Pause it for the replay and restore the caller's setting after.
    gc_was_enabled = gc.isenabled()
    gc.disable()
    try:
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
    snapshot_store, snapshots, discard = open_snapshots(path, config, report)
    try:
        parts = []
        kept: dict[int, tuple[int, int]] = {}
        for p in range(config.partitions):
            directory = naming.partition_dir(path, p)
            snapshot = snapshots.get(p)
            table, result, used = recover_with_snapshot(path, directory, p, p in found,
                                                        snapshot, report, progress=progress)
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
                                segment_bytes=config.segment_bytes)
            parts.append(PartitionWriter(p, plog, table))
        delete_discarded(snapshot_store, discard)
    except BaseException:
        if snapshot_store is not None:
            snapshot_store.close()
        raise
    report.duration_s = time.perf_counter() - started
    return parts, report, LoadedSnapshots(snapshot_store, kept)
