"""``offsetlog recover [--salvage]``: recover a closed store now, optionally cutting out corruption.

Without salvage this is what ``OffsetStore.open`` does to the log (finish interrupted cleaner
swaps, truncate a torn tail, fsync), and corruption before the tail stays an error
(``CorruptLogError`` naming file and position), as docs/FORMAT.md requires.

With salvage, every segment that holds corrupt regions is rewritten to hold only its valid
batches, byte for byte and at their original offsets (nothing is renumbered), through the
cleaner's crash-safe swap (recovery/swap.py): a crash during salvage leaves each segment old
or new, and the next open or salvage finishes the job. Every dropped byte range is reported
with its reason and, where the surrounding batches tell, the log offsets it held. A valid
batch is dropped too when it reaches past the next segment's base offset or its payload does
not decode, since recovery would refuse it.

Snapshots (``<store>/snapshots``, LMDB, a cache of the replay) describe the log as it was: a
salvage that rewrote anything removes that directory *before* touching a segment, so no open
can pair a snapshot with the changed log.
"""

from __future__ import annotations

import os
import shutil
from dataclasses import dataclass, field
from typing import Callable

from offsetlog.errors import CorruptLogError
from offsetlog.log import dirlock, manifest, meta, naming, recovery_points, segment, write_ahead
from offsetlog.log.format import HEADER_SIZE
from offsetlog.log.framing import BatchReader, decode_payload
from offsetlog.recovery.replay import UNDECODABLE, check_placement, recover_partition
from offsetlog.recovery.report import RecoveryReport
from offsetlog.recovery.swap import commit_swap, finish_swaps, write_cleaned
from offsetlog.recovery.tools.inspect import stored_partitions
from offsetlog.table import OffsetTable


@dataclass(frozen=True)
class SalvagedRegion:
    """A byte range of a segment that is not in the log any more."""

    path: str
    position: int
    bytes_dropped: int
    reason: str
    #: (first, last) log offsets the range held, inclusive, when the batches around it tell
    offsets_lost: tuple[int, int] | None
    action: str  # "dropped" (salvage) or "truncated" (a torn tail)

    def __str__(self) -> str:
        lost = "" if self.offsets_lost is None else (
            f", offsets {self.offsets_lost[0]}..{self.offsets_lost[1]}")
        return (f"{self.path} @ {self.position}: {self.action} {self.bytes_dropped} bytes "
                f"({self.reason}{lost})")


@dataclass
class SalvageReport:
    regions: list[SalvagedRegion] = field(default_factory=list)
    rewritten: list[str] = field(default_factory=list)  # segments rewritten by salvage
    snapshots_removed: str | None = None  # the snapshot directory removed, if any
    recovery: RecoveryReport = field(default_factory=RecoveryReport)  # the log afterwards

    @property
    def bytes_dropped(self) -> int:
        return sum(r.bytes_dropped for r in self.regions)

    @property
    def records(self) -> int:
        return self.recovery.records

    @property
    def batches(self) -> int:
        return self.recovery.batches

    def __str__(self) -> str:
        lines = [f"kept {self.records} records in {self.batches} batches; dropped "
                 f"{self.bytes_dropped} bytes in {len(self.regions)} regions"]
        lines += [str(r) for r in self.regions]
        if self.snapshots_removed:
            lines.append(f"removed stale snapshots: {self.snapshots_removed}")
        return "\n".join(lines)


def salvage_store(path: str | os.PathLike) -> SalvageReport:
    """Rewrite every corrupt segment of the closed store at ``path`` without its corrupt
    regions; afterwards ``OffsetStore.open`` succeeds.

    :raises StoreLockedError: the store is open elsewhere
    :raises CorruptLogError: damage salvage cannot cut out (overlapping segment files)
    """
    return recover_store(path, salvage=True)


def recover_store(path: str | os.PathLike, *, salvage: bool = False,
                  progress: Callable[[int], None] | None = None) -> SalvageReport:
    """Recover the closed store at ``path`` as opening it would, under its lock.

    :param salvage: cut out corrupt regions instead of raising ``CorruptLogError``
    :param progress: called with the byte size of each segment as the final replay reads it
    :return: what was dropped, rewritten and kept
    """
    path = os.path.abspath(os.fspath(path))
    count = stored_partitions(path)  # refuses a directory that is not a store
    report = SalvageReport()
    with dirlock.held(path):
        # What the write-ahead file made durable goes back into the segments first, as on
        # open; then the file goes (salvage may rewrite the segments its entries point into).
        report.recovery.write_ahead_restored = write_ahead.apply(path)[1]
        write_ahead.remove(path)
        write_ahead.mark(path, count, holding=False)
        partitions = naming.list_partition_dirs(path)
        for p, directory in partitions:
            finish_swaps(directory)  # (updates the manifest for the swaps it completes)
        entries = _manifest_or_region(path, salvage, report)
        # Segments missing from (or unknown to) the manifest: an error as on open; salvage
        # reports them and goes on (the manifest is rebuilt from the directory at the end).
        _check_manifest(path, entries, partitions, salvage, report, listing=True)
        plans = {}
        for p, directory in partitions:
            if salvage:
                plans[p] = plan_salvage(directory)
        if any(rewrites for rewrites, _ in plans.values()):
            report.snapshots_removed = remove_snapshots(path)
        for p, (rewrites, regions) in sorted(plans.items()):
            report.regions += regions
            for base, end, source, spans in rewrites:
                _rewrite(naming.partition_dir(path, p), base, end, source, spans)
                report.rewritten.append(source)
        points = recovery_points.read(path)  # (once for every partition, as open does)
        for p, directory in partitions:
            # Replayed into a table, as open does: what open refuses is refused here too.
            table = OffsetTable()
            result = recover_partition(directory, p, repair=True,
                                       apply_batches=table.apply_batches,
                                       progress=progress, recovery_point=points.get(p))
            check_placement(table, p, count, directory)
            report.recovery.partitions[p] = result
            t = result.truncated
            if t is not None:
                report.regions.append(SalvagedRegion(t.path, t.position, t.bytes_dropped,
                                                      t.reason, None, "truncated"))
        if entries is not None:  # re-read: salvage's rewrites (swaps) updated it
            _check_manifest(path, manifest.read_quietly(path) or {}, partitions, salvage,
                            report, listing=False)
        _settle(path)
    return report


def _manifest_or_region(path: str, salvage: bool, report: SalvageReport):
    """The store's MANIFEST; None for a store without one. A missing (where meta.json says
    there is one) or damaged manifest is an error, or with salvage a region, and then {}:
    every segment of the directory is taken as it is, and the manifest rebuilt."""
    stored = meta.read(path)
    where = manifest.manifest_path(path)
    try:
        entries = manifest.read(path)
    except CorruptLogError as e:
        if not salvage:
            raise
        report.regions.append(SalvagedRegion(where, 0, 0, e.reason, None, "rebuilt"))
        return None
    if entries is None and stored is not None and stored.manifest:
        if not salvage:
            raise CorruptLogError(where, 0, "missing: meta.json says this store keeps a "
                                            "MANIFEST (`offsetlog recover --salvage` rebuilds it)")
        report.regions.append(SalvagedRegion(where, 0, 0, "MANIFEST missing", None, "rebuilt"))
    return entries


def _check_manifest(path: str, entries, partitions, salvage: bool, report: SalvageReport, *,
                    listing: bool) -> None:
    """Compare each partition with the manifest: before salvage's rewrites the listing
    (missing and unknown segments), after recovery the sizes. Without salvage the first
    difference is raised (``CorruptLogError``, as open raises it); with salvage each is a
    region of the report."""
    if entries is None:
        return
    dirs = dict(partitions)
    for p in sorted(set(dirs) | set(entries)):
        directory = dirs.get(p) or naming.partition_dir(path, p)
        plan_segments = naming.list_segments(directory)
        check = manifest.check_partition(directory, p, entries.get(p, []), plan_segments, [])
        found = [m for m in check.problems if m.listing == listing]
        if not listing:
            found.append(manifest.check_active_end(check, plan_segments))
        for m in found:
            if m is None:
                continue
            if not salvage:
                raise m.error()
            action = {"missing": "missing", "unlisted": "kept"}.get(m.kind, "dropped")
            report.regions.append(SalvagedRegion(m.path, m.position, m.bytes_missing, m.reason,
                                                 None, action))


def _settle(path: str) -> None:
    """Record the directory as recovery left it in the MANIFEST, and give an older
    meta.json its checksum and manifest flag (as opening the store does)."""
    now = manifest.from_directory(path)
    if manifest.read_quietly(path) != now:
        manifest.write(path, now)
    stored = meta.read(path)
    if stored is not None and not (stored.manifest and stored.checksummed):
        meta.write(path, stored.partitions)


def remove_snapshots(path: str) -> str | None:
    """Remove ``<store>/snapshots`` (a cache) if it exists; returns what was removed."""
    snapshots = naming.snapshot_dir(path)
    if not os.path.exists(snapshots):
        return None
    shutil.rmtree(snapshots)
    segment.fsync_dir(path)
    return snapshots


#: (base, end, source segment, [(start, stop) byte spans to keep])
Rewrite = tuple[int, int, str, list[tuple[int, int]]]


def plan_salvage(directory: str) -> tuple[list[Rewrite], list[SalvagedRegion]]:
    """Which segments of one partition need rewriting, what each keeps and what it drops.

    Reads only; a torn tail alone (end of the last segment) is left to the normal truncation.
    """
    segments = naming.list_segments(directory)
    rewrites: list[Rewrite] = []
    regions: list[SalvagedRegion] = []
    min_offset = 0
    for base, path, limit in naming.with_limits(segments):
        last = limit is None
        if base < min_offset:
            raise CorruptLogError(path, 0, f"segment base offset {base} overlaps the previous "
                                           f"segment, which reaches offset {min_offset - 1}; "
                                           "salvage cannot choose between them")
        data = segment.read_file(path)
        reader = BatchReader(data, salvage=True, min_offset=base, zero_tail=last)
        reasons: dict[int, str] = {}
        kept: list[tuple[int, int, int, int]] = []  # (start, stop, first offset, last offset)
        for pos, stop, h in reader.raw():
            first, last_offset = h.base_offset, h.base_offset + h.last_offset_delta
            if limit is not None and last_offset >= limit:
                reasons[pos] = (f"batch reaches offset {last_offset}, past the next "
                                f"segment's base offset {limit}")
                continue
            try:
                decode_payload(data[pos + HEADER_SIZE:stop])
            except UNDECODABLE as e:
                reasons[pos] = f"undecodable payload ({type(e).__name__})"
                continue
            kept.append((pos, stop, first, last_offset))
        reasons.update((p.position, p.reason) for p in reader.problems)
        if reader.stop is not None:
            reasons[reader.stop.position] = reader.stop.reason
        # The active segment's unused reserve (zeros after its last batch) is not damage:
        # recovery cuts it as it does on every open (docs/FORMAT.md, "Preallocated space").
        found = _gaps(path, len(data) - reader.zero_tail, kept, reasons, base, limit)
        torn_tail_only = (last and len(found) == 1 and reader.stop is not None
                          and found[0].position == reader.stop.position
                          and found[0].position + found[0].bytes_dropped == len(data)
                          and reader.stop.torn)
        if found and not torn_tail_only:
            regions += found
            end = limit if limit is not None else max(base + 1, kept[-1][3] + 1 if kept
                                                      else base + 1)
            rewrites.append((base, end, path, [(a, b) for a, b, _, _ in kept]))
        min_offset = kept[-1][3] + 1 if kept else base
    return rewrites, regions


def _gaps(path: str, size: int, kept, reasons: dict[int, str], base: int,
          limit: int | None) -> list[SalvagedRegion]:
    """The byte ranges of a segment outside its kept batches, split at every known problem.

    The offsets a gap held are those between the batches around it (the segment's base
    before the first, the next segment's base after the last); they are given on the gap's
    first region, and unknown at the end of the last segment.
    """
    out = []
    cursor, next_offset = 0, base
    for start, stop, first, last in [*kept, (size, size, None, None)]:
        if start > cursor:
            hi = first - 1 if first is not None else (None if limit is None else limit - 1)
            lost = (next_offset, hi) if hi is not None and hi >= next_offset else None
            cuts = sorted({cursor, *(p for p in reasons if cursor < p < start)})
            for j, a in enumerate(cuts):
                b = cuts[j + 1] if j + 1 < len(cuts) else start
                out.append(SalvagedRegion(path, a, b - a, reasons.get(a, "unreadable bytes"),
                                          lost if j == 0 else None, "dropped"))
        if first is not None:
            next_offset = last + 1
        cursor = max(cursor, stop)
    return out


def _rewrite(directory: str, base: int, end: int, source: str,
             spans: list[tuple[int, int]]) -> None:
    """Write the kept batches to ``<base>.log.cleaned`` and swap it in for ``source``."""
    data = segment.read_file(source)
    cleaned, _ = write_cleaned(directory, base, (data[a:b] for a, b in spans))
    commit_swap(directory, cleaned, base, end, [source], hook=_fault_hook)


#: tests set this to a callable(step) to crash a salvage at a swap step (as the cleaner's)
_fault_hook = None


__all__ = ["SalvageReport", "SalvagedRegion", "plan_salvage", "recover_store",
           "remove_snapshots", "salvage_store"]
