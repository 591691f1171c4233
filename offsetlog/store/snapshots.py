"""The store's snapshots part (docs/DESIGN.md, "Snapshots"): loading them on open,
taking them (on demand, in the background, on close), and telling the cleaner which
tombstones it must keep.

The bytes and the LMDB environment are ``offsetlog.recovery.snapshot``'s; the table's state is
``OffsetTable.snapshot_state``. Everything here treats a snapshot as a cache: a failure to
take one is logged and counted and never touches the log or a commit, and a snapshot that
fails any check on open is discarded (deleted, so it can never be loaded later) and the
partition's log is replayed from the start.
"""

from __future__ import annotations

import logging
import os
import shutil
import threading
import time
from dataclasses import dataclass, field

import lmdb

from offsetlog.errors import SnapshotError
from offsetlog.log import naming
from offsetlog.recovery import snapshot as snap
from offsetlog.recovery.replay import recover_partition
from offsetlog.recovery.report import PartitionRecovery, RecoveryReport
from offsetlog.store import background
from offsetlog.store.config import StoreConfig
from offsetlog.store.part import StoreCore, StorePart
from offsetlog.table import OffsetTable
from offsetlog.validation import check_partition_numbers

log = logging.getLogger("offsetlog.snapshot")


@dataclass
class SnapshotResult:
    """What ``store.snapshot()`` did for one log partition."""

    partition: int
    offset: int  # the snapshot's log offset (the table is "as of" it)
    keys: int = 0
    bytes: int = 0
    duration_s: float = 0.0
    taken: bool = True  # False: the snapshot on disk was already at this offset


@dataclass
class PartitionSnapshots:
    """Per log partition: what is on disk, for stats and for the cleaner."""

    offset: int | None = None  # offset of the snapshot on disk, None if none
    created_ms: int | None = None  # its creation time (store clock)
    #: lowest offset any snapshot on disk may have (a failed write may or may not have
    #: landed); the cleaner keeps every tombstone at or above it
    floor: int | None = None
    failures: int = 0
    last_error: str | None = None
    since_ms: int = 0  # time of the last snapshot, or of the open: the interval counts from it
    #: held from capturing a partition's state until its LMDB write has ended, and by the
    #: cleaner while it reads ``floor``: a snapshot the cleaner did not see was captured
    #: after the cleaner fixed its segments, so it is above every record being cleaned
    lock: threading.Lock = field(default_factory=threading.Lock)


@dataclass
class LoadedSnapshots:
    store: snap.SnapshotStore | None
    offsets: dict[int, tuple[int, int]]  # partition -> (offset, created_ms) on disk


# -- opening --------------------------------------------------------------------------------

def open_snapshots(path: str, config: StoreConfig, report: RecoveryReport
                   ) -> tuple[snap.SnapshotStore | None, dict[int, snap.Snapshot], list[bytes]]:
    """The snapshot store, the snapshots that pass their own checks, and the keys of those
    that do not (already recorded in ``report``); the caller deletes them."""
    directory = naming.snapshot_dir(path)
    if not config.snapshots:
        if os.path.isdir(directory):
            # A store that does not keep its snapshots up to date lets them go stale (its
            # cleaner may drop tombstones they need), so they go now.
            _discard_environment(directory, "snapshots are disabled for this store")
        return None, {}, []
    try:
        store = snap.SnapshotStore(directory)
    except lmdb.Error as e:
        report.snapshot_store_discarded = f"the snapshot store does not open ({e})"
        _discard_environment(directory, f"the snapshot store does not open ({e})")
        try:
            store = snap.SnapshotStore(directory)
        except lmdb.Error as e2:
            raise SnapshotError(f"{directory}: cannot create the snapshot store: {e2}") from None
    try:
        raw = store.read_all()
    except lmdb.Error as e:
        store.close()
        report.snapshot_store_discarded = f"the snapshot store is unreadable ({e})"
        _discard_environment(directory, f"the snapshot store is unreadable ({e})")
        return snap.SnapshotStore(directory), {}, []
    good: dict[int, snap.Snapshot] = {}
    bad: list[bytes] = []
    for p, data in raw.items():
        if p < 0:
            log.warning("%s: discarding a snapshot entry with a malformed key", path)
            bad.append(store.keys()[-1 - p])
            continue
        try:
            good[p] = snap.decode(data, p, partitions=config.partitions)
        except snap.SnapshotInvalid as e:
            discarded(path, report, p, str(e))
            bad.append(snap.partition_key(p))
    return store, good, bad


def discarded(path: str, report: RecoveryReport, partition: int, reason: str) -> None:
    report.snapshots_discarded[partition] = reason
    log.warning("%s: discarded the snapshot of log partition %d (%s); its log is replayed "
                "from the start", path, partition, reason)


def _discard_environment(directory: str, reason: str) -> None:
    log.warning("%s: discarding every snapshot: %s", directory, reason)
    try:
        shutil.rmtree(directory)
    except OSError as e:
        raise SnapshotError(
            f"{directory}: cannot discard the snapshots ({e}); they could be loaded later "
            "over a log that moved on. Delete the directory and open the store again"
        ) from None


def recover_with_snapshot(path: str, directory: str, partition: int, has_log: bool,
                          snapshot: snap.Snapshot | None, report: RecoveryReport, *,
                          progress=None, recovery_point: int | None = None
                          ) -> tuple[OffsetTable, PartitionRecovery | None, bool]:
    """The partition's table: its snapshot plus the log after it, or a full replay
    (``recovery_point``: the partition's, from the store's RECOVERY-POINTS; None if none).

    :return: (table, what recovery read, whether the snapshot was used)
    """
    table = None
    if snapshot is not None:
        try:
            table = OffsetTable.from_snapshot_state(snapshot.state)
        except ValueError as e:
            discarded(path, report, partition, str(e))
    first = None
    if table is not None:
        if not has_log:
            if snapshot.offset == 0:
                return table, None, True
            discarded(path, report, partition, f"ahead of the log: snapshot at offset "
                                               f"{snapshot.offset}, the partition has no log")
            return OffsetTable(), None, False
        first = recover_partition(directory, partition, table=table,
                                  start_offset=snapshot.offset,
                                  start_position=snapshot.position, progress=progress,
                                  recovery_point=recovery_point)
        if not first.start_beyond_end:
            return table, first, True
    if not has_log:
        return OffsetTable(), None, False
    table = OffsetTable()
    result = recover_partition(directory, partition, table=table, progress=progress,
                               recovery_point=recovery_point)
    if first is not None:
        discarded(path, report, partition, f"ahead of the log: snapshot at offset "
                                           f"{snapshot.offset}, log ends at offset "
                                           f"{result.next_offset}")
        result.truncated = result.truncated or first.truncated
    return table, result, False


def delete_discarded(store: snap.SnapshotStore | None, keys: list[bytes]) -> None:
    """Delete discarded entries before anything is written to the log: a snapshot ahead of
    the log would otherwise look valid once the log has grown past it."""
    if store is None or not keys:
        return
    try:
        store.delete(keys)
    except lmdb.Error as e:
        raise SnapshotError(
            f"{store.path}: cannot delete discarded snapshots ({e}); they could be loaded "
            "later over a log that moved on. Delete the directory and open the store again"
        ) from None


# -- the store's part ---------------------------------------------------------------------------

class Snapshots(StorePart):
    """The store's part for snapshots: ``snapshot()``, the background snapshotter, close-time
    snapshots and the cleaner's tombstone floor. Owns the LMDB environment and what it knows
    of each partition's snapshot; reads a table only while holding its partition's
    leadership (``GroupCommitter.exclusive``)."""

    #: tests set this to a callable(step) to fail or kill a snapshot write at a chosen step
    #: (offsetlog.recovery.snapshot.STEPS)
    fault_hook = None

    def __init__(self, core: StoreCore, loaded: LoadedSnapshots, stop: threading.Event) -> None:
        super().__init__(core)
        self._db = loaded.store
        now = self._clock()
        self._snap = []
        for part in self._parts:
            on_disk = loaded.offsets.get(part.index)
            info = PartitionSnapshots(since_ms=now)
            if on_disk is not None:
                info.offset, info.created_ms = on_disk
                info.floor = info.offset
            self._snap.append(info)
        self.thread: threading.Thread | None = None
        c = self.config
        if self._db is not None and (c.snapshot_interval_records or c.snapshot_interval_ms):
            # Wake often enough to see a count crossed soon after it is; the interval itself
            # is judged with the store's clock.
            period = min(1.0, c.snapshot_interval_ms / 1000.0) if c.snapshot_interval_ms else 1.0
            self.thread = background.start(
                "offsetlog-snapshots", lambda: background.every(
                    stop, period, self._pass, f"{self.path}: snapshot pass", log))

    def snapshot(self, partitions=None) -> list[SnapshotResult]:
        """``OffsetStore.snapshot``: each partition in one LMDB transaction, covering only
        what is durable in its log; failures gathered into one ``SnapshotError``."""
        self._check_open()
        if self._db is None:
            raise SnapshotError(f"{self.path}: snapshots are disabled for this store")
        wanted = check_partition_numbers(partitions, len(self._parts))
        results, failures = [], {}
        for p in wanted:
            try:
                r = self._snapshot_partition(self._parts[p])
            except SnapshotError as e:
                failures[p] = e
                continue
            if r is not None:
                results.append(r)
        if failures:
            raise SnapshotError(
                f"{self.path}: snapshots of partitions {sorted(failures)} failed: "
                + "; ".join(f"{p}: {e}" for p, e in sorted(failures.items())),
                failures=failures)
        return results

    def _snapshot_partition(self, part) -> SnapshotResult | None:
        """Capture the partition's table as of a durable offset and write it. Failures are
        logged, counted and raised as ``SnapshotError``; None if the table is empty."""
        info = self._snap[part.index]
        started = time.perf_counter()
        with info.lock:
            try:
                with self._writer.exclusive(part):
                    # Holding the partition's leadership: no round runs, so the table (which
                    # only a leader changes) stands still and matches the log's end.
                    if self._writer.failure is not None:
                        raise SnapshotError(f"the store failed earlier ({self._writer.failure!r})")
                    plog, table = part.log, part.table
                    offset = table.next_offset
                    if offset == 0:
                        return None
                    if offset == info.offset:
                        return SnapshotResult(part.index, offset, taken=False)
                    if plog.dirty:
                        # Never cover what a crash could still take from the log: such a
                        # snapshot would be ahead of the log and discarded on open.
                        try:
                            plog.sync()
                        except OSError as e:
                            self._writer.poison(e)  # the log's own failure, as sync_all does
                            raise SnapshotError(f"fsync of the log failed: {e!r}") from None
                    position = plog.end_position() if offset == plog.next_offset else None
                    state = table.snapshot_state()
                    keys = len(table)
                created = self._clock()
                data = snap.encode(part.index, state, created_ms=created, position=position)
                del state
                try:
                    self._db.put(part.index, data, self.fault_hook)
                except BaseException:
                    # It may or may not have landed: the cleaner must respect either.
                    info.floor = offset if info.floor is None else min(info.floor, offset)
                    raise
            except SnapshotError as e:
                self._snapshot_failed(part.index, info, e)
                raise
            except Exception as e:
                self._snapshot_failed(part.index, info, e)
                raise SnapshotError(f"snapshot of partition {part.index} failed: {e!r}") from e
            info.offset, info.created_ms, info.floor = offset, created, offset
            info.since_ms = created
            info.last_error = None
        return SnapshotResult(part.index, offset, keys, len(data),
                              time.perf_counter() - started)

    def _snapshot_failed(self, partition: int, info: PartitionSnapshots, e: BaseException) -> None:
        info.failures += 1
        info.last_error = f"{type(e).__name__}: {e}"
        log.error("%s: snapshot of log partition %d failed (the log is unaffected): %s",
                  self.path, partition, info.last_error)

    def _snapshot_due(self, part, now: int) -> bool:
        info = self._snap[part.index]
        offset = part.table.next_offset
        if offset == (info.offset or 0):
            return False
        c = self.config
        if c.snapshot_interval_records and offset - (info.offset or 0) >= c.snapshot_interval_records:
            return True
        return bool(c.snapshot_interval_ms) and now - info.since_ms >= c.snapshot_interval_ms

    def _pass(self) -> None:
        """Snapshot every partition that is due."""
        for part in self._parts:
            self._check_open()
            if self._snapshot_due(part, self._clock()):
                try:
                    self._snapshot_partition(part)
                except SnapshotError:
                    pass  # logged and counted; the next due time tries again

    def on_close(self) -> None:
        """After the final drain and fsync: snapshot every partition that changed."""
        if self._db is None or not self.config.snapshot_on_close:
            return
        for part in self._parts:
            if part.log.dirty:
                # Its fsync on close failed: retrying it could "succeed" over lost pages
                # (DESIGN.md, "Group commit"), so nothing of it is snapshotted.
                continue
            if part.table.next_offset != (self._snap[part.index].offset or 0):
                try:
                    self._snapshot_partition(part)
                except SnapshotError:
                    pass  # logged and counted; the next open replays more of the log

    def close(self) -> None:
        if self._db is not None:
            self._db.close()
            self._db = None

    def tombstone_floor(self, partition: int) -> int | None:
        """For the cleaner, after it fixed ``active_base``: keep tombstones from here on."""
        info = self._snap[partition]
        with info.lock:
            return info.floor

    def stats(self, partition: int) -> dict:
        """The log offset and creation time (epoch ms) of the partition's snapshot on disk
        (None without one), how many snapshots of it failed, and the last failure (or None)."""
        info = self._snap[partition]
        return {"snapshot_offset": info.offset, "snapshot_ms": info.created_ms,
                "snapshot_failures": info.failures, "snapshot_error": info.last_error}
