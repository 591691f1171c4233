"""Read-only views of a store directory for tools: never takes the lock, never repairs.

A store that is open elsewhere may be mid-write; what these functions see at its tail is
reported as a torn tail, exactly as recovery would see it after a crash at that moment.
"""

from __future__ import annotations

import os
import time
from dataclasses import dataclass
from typing import Callable, Iterator

import lmdb

from offsetlog.errors import CorruptLogError, StoreConfigError
from offsetlog.log import manifest, meta, naming, recovery_points, write_ahead
from offsetlog.log.framing import BatchReader
from offsetlog.log.segment import read_file
from offsetlog.recovery import snapshot
from offsetlog.recovery.replay import check_placement, recover_partition
from offsetlog.recovery.report import DroppedRange, PartitionRecovery, RecoveryReport
from offsetlog.recovery.swap import plan_swaps
from offsetlog.table import OffsetTable


def stored_partitions(path: str) -> int:
    """The store's partition count, from its meta.json, checked as open checks it.

    :raises StoreConfigError: no meta.json (``MetaFileError``: a malformed or damaged one)
    """
    stored = meta.read(path)
    if stored is None:
        raise StoreConfigError(f"{path} is not an offsetlog store (no meta.json)")
    return stored.partitions


def read_manifest(path: str) -> manifest.Entries | None:
    """The store's MANIFEST for a read-only check; None for a store from before manifests.

    :raises CorruptLogError: it is missing although meta.json says the store keeps one, or
        does not decode
    """
    entries = manifest.read(path)
    stored = meta.read(path)
    if entries is None and stored is not None and stored.manifest:
        raise CorruptLogError(manifest.manifest_path(path), 0,
                              "missing: meta.json says this store keeps a MANIFEST")
    return entries


def manifest_problems(directory: str, partition: int, rows: list, result: PartitionRecovery,
                      check: manifest.PartitionCheck) -> list[DroppedRange]:
    """What a read-only scan of ``directory`` (``result``) found missing against the
    manifest, as dropped ranges (``offsetlog verify`` fails on them)."""
    problems = list(check.problems)
    if result.segments:
        last = result.segments[-1][1]
        if result.truncated is not None:
            end = result.truncated.position
        else:
            end = os.lstat(last).st_size - result.preallocated
        problems.append(manifest.check_active_end(check, result.segments, end))
    return [DroppedRange(m.path, m.position, m.bytes_missing, m.reason)
            for m in problems if m is not None]


def data_size(segment_path: str) -> int:
    """Bytes of a segment file up to the end of its data: an active segment's preallocated
    reserve (zeros after its last batch) is not data, so its size on disk overstates what was
    written (docs/FORMAT.md, "Preallocated space")."""
    data = read_file(segment_path)
    reader = BatchReader(data)
    for _ in reader.raw():
        pass
    return len(data) - reader.zero_tail


def total_segment_bytes(path: str) -> int:
    total = 0
    for _, d in naming.list_partition_dirs(path):
        for _, seg in naming.list_segments(d):
            try:
                total += os.path.getsize(seg)
            except FileNotFoundError:  # a cleaner swap on a store open elsewhere
                pass
    return total


#: times a partition is scanned again when a segment vanished under the scan
SCAN_ATTEMPTS = 10
#: ... or when it differs from the manifest (which a live store rewrites as it rolls)
MANIFEST_ATTEMPTS = 3


def scan(path: str, *, salvage: bool = True, tables: bool = False, replay: bool = False,
         progress: Callable[[int], None] | None = None
         ) -> tuple[RecoveryReport, dict[int, OffsetTable]]:
    """Check every batch of every segment (read-only).

    :param tables: replay each partition into a table and return the tables
    :param replay: replay into a table that is dropped after each partition: what open would
        refuse in a record that decodes (an unknown type, a missing field) raises
        ``CorruptLogError`` here too, without holding every table at once
    """
    partitions = stored_partitions(path)
    entries = read_manifest(path)
    report = RecoveryReport()
    out: dict[int, OffsetTable] = {}
    dirs = dict(naming.list_partition_dirs(path))
    points = recovery_points.read(path)  # (read once here for every partition, as open does)
    # what opening writes back from the WRITE-AHEAD file first, laid over the segments read
    overlays = write_ahead.overlay(path)
    for p in sorted(set(dirs) | set(entries or ())):
        directory = dirs.get(p) or naming.partition_dir(path, p)
        for attempt in range(SCAN_ATTEMPTS):
            table = OffsetTable() if tables or replay else None
            try:
                check = None
                if entries is not None:
                    plan = plan_swaps(directory)
                    check = manifest.check_partition(directory, p, entries.get(p, []),
                                                     plan.segments, plan.swaps)
                segments = naming.list_segments(directory)
                result = recover_partition(
                    directory, p, apply_batches=table.apply_batches if table is not None else None,
                    repair=False, salvage=salvage, progress=progress,
                    recovery_point=points.get(p),
                    overlay=overlays.get(segments[-1][1], ()) if segments else ())
                if check is not None:
                    lost = manifest_problems(directory, p, entries.get(p, []), result, check)
                    if lost and attempt < MANIFEST_ATTEMPTS - 1:
                        # A store open elsewhere may have rolled or swapped between reading
                        # its manifest and its directory: look again before reporting.
                        time.sleep(0.05)
                        entries = read_manifest(path) or {}
                        continue
                    result.skipped += lost
                report.partitions[p] = result
                break
            except FileNotFoundError:
                # The store is open elsewhere and its cleaner swapped segments between the
                # listing and the read (recovery/swap.py): what was read is a mix of before
                # and after, so the partition is read again from its new listing.
                if attempt == SCAN_ATTEMPTS - 1:
                    raise
        if table is not None:
            check_placement(table, p, partitions, directory)
        if tables:
            out[p] = table
    return report, out


@dataclass
class SnapshotCheck:
    """What ``check_snapshots`` found for one stored snapshot."""

    partition: int
    offset: int | None = None
    created_ms: int | None = None
    keys: int | None = None
    bytes: int = 0
    problem: str | None = None  # why open would discard it; None: it would be loaded


def check_snapshots(path: str, log_ends: dict[int, int]) -> list[SnapshotCheck] | None:
    """Check every snapshot as open would (format, checksums, partition, sections, offset at
    or below the log's end), read-only. None when the store has no snapshot store.

    :param log_ends: partition -> next offset of its log (from ``scan``); absent = no log
    """
    partitions = stored_partitions(path)
    directory = naming.snapshot_dir(path)
    if not os.path.isdir(directory):
        return None
    try:
        store = snapshot.SnapshotStore(directory, readonly=True)
    except lmdb.Error as e:
        return [SnapshotCheck(-1, problem=f"the snapshot store does not open: {e}")]
    try:
        entries = store.read_all()
    except lmdb.Error as e:
        return [SnapshotCheck(-1, problem=f"the snapshot store is unreadable: {e}")]
    finally:
        store.close()
    out = []
    for p, data in sorted(entries.items()):
        check = SnapshotCheck(p, bytes=len(data))
        out.append(check)
        try:
            s = snapshot.decode(data, p, partitions=partitions)
            check.offset, check.created_ms = s.offset, s.created_ms
            check.keys = len(OffsetTable.from_snapshot_state(s.state))
            end = log_ends.get(p, 0)
            if s.offset > end:
                raise snapshot.SnapshotInvalid(f"ahead of the log: snapshot at offset "
                                               f"{s.offset}, log ends at offset {end}")
        except (snapshot.SnapshotInvalid, ValueError) as e:
            check.problem = str(e)
    return out


def iter_records(path: str, *, partition: int | None = None,
                 skipped: list[DroppedRange] | None = None) -> Iterator[tuple]:
    """(partition, segment_path, batch, log_offset, record) for every readable record, in
    log offset order.

    :param skipped: if given, every byte range that was not read is appended to it: corrupt
        regions, and a torn tail (reason ending in "(torn tail)") at the end of a partition's
        last segment
    """
    for p, directory in naming.list_partition_dirs(path):
        if partition is not None and p != partition:
            continue
        problems: dict[tuple[str, int], DroppedRange] = {}
        resume = 0  # every record below this log offset has been yielded
        for attempt in range(SCAN_ATTEMPTS):
            segments = plan_swaps(directory).segments
            try:
                for base, seg, limit in naming.with_limits(segments):
                    last = limit is None
                    if not last and limit <= resume:
                        continue  # read before a swap replaced it
                    data = read_file(seg)
                    reader = BatchReader(data, salvage=True, min_offset=base, zero_tail=last)
                    for batch in reader:
                        for record in batch.records():
                            offset = batch.base_offset + record[0]
                            if offset >= resume:
                                yield p, seg, batch, offset, record
                                resume = offset + 1
                    for q in reader.problems:
                        problems[seg, q.position] = DroppedRange(seg, q.position, q.dropped or 0,
                                                                 q.reason)
                    stop = reader.stop
                    if stop is not None:
                        torn = " (torn tail)" if stop.torn and last else ""
                        problems[seg, stop.position] = DroppedRange(
                            seg, stop.position, len(data) - stop.position, stop.reason + torn)
                break
            except FileNotFoundError:
                # A cleaner swap on a store open elsewhere removed a listed segment: list
                # again and go on after the last record given (offsets survive cleaning).
                if attempt == SCAN_ATTEMPTS - 1:
                    raise
        if skipped is not None:
            skipped += problems.values()


__all__ = ["PartitionRecovery", "SnapshotCheck", "check_snapshots", "iter_records", "scan", "stored_partitions",
           "total_segment_bytes"]
