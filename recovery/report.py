"""What recovery found: per partition counts, torn tails it truncated, regions it skipped."""

from __future__ import annotations

from dataclasses import dataclass, field


@dataclass(frozen=True)
class DroppedRange:
    """Bytes recovery did not load: a torn tail it truncated, or a corrupt region it skipped."""

    path: str
    position: int  # byte position in the file where the dropped range starts
    bytes_dropped: int
    reason: str  # stable reason string: "truncated batch", "checksum mismatch", ...

    def __str__(self) -> str:
        return f"{self.path} @ {self.position}: dropped {self.bytes_dropped} bytes ({self.reason})"


@dataclass
class PartitionRecovery:
    partition: int
    directory: str
    segments: list[tuple[int, str]] = field(default_factory=list)
    next_offset: int = 0
    batches: int = 0
    records: int = 0
    bytes_read: int = 0
    truncated: DroppedRange | None = None  # the torn tail, if there was one
    #: unused preallocated bytes found after the active segment's last batch (not data)
    preallocated: int = 0
    skipped: list[DroppedRange] = field(default_factory=list)  # salvage only
    start_offset: int = 0  # replay started here (a snapshot held everything below it)
    segments_skipped: int = 0  # segments not read because they end at or before start_offset
    start_beyond_end: bool = False  # the log ends before start_offset (snapshot ahead of it)


@dataclass
class RecoveryReport:
    partitions: dict[int, PartitionRecovery] = field(default_factory=dict)
    duration_s: float = 0.0
    #: partition -> the log offset of the snapshot its table was loaded from
    snapshots_loaded: dict[int, int] = field(default_factory=dict)
    #: partition -> why its snapshot was discarded (the log was replayed from the start)
    snapshots_discarded: dict[int, str] = field(default_factory=dict)
    #: why the whole snapshot store (``<store>/snapshots``) was found damaged and discarded
    #: (it did not open, was unreadable, or its data.mdb was empty); None if it was not
    snapshot_store_discarded: str | None = None
    #: batches the store's WRITE-AHEAD file held that a segment lacked, written back into it
    #: before the segments were read (offsetlog.log.write_ahead): a power cut's loss, undone
    write_ahead_restored: int = 0

    @property
    def records(self) -> int:
        return sum(p.records for p in self.partitions.values())

    @property
    def batches(self) -> int:
        return sum(p.batches for p in self.partitions.values())

    @property
    def bytes_read(self) -> int:
        return sum(p.bytes_read for p in self.partitions.values())

    @property
    def truncations(self) -> list[DroppedRange]:
        return [p.truncated for p in self.partitions.values() if p.truncated is not None]

    @property
    def skipped(self) -> list[DroppedRange]:
        return [s for p in self.partitions.values() for s in p.skipped]

    @property
    def clean(self) -> bool:
        """Nothing was truncated, skipped or found damaged (a damaged snapshot store is a
        damaged file, though the log alone brought every table back)."""
        return (not self.truncations and not self.skipped
                and self.snapshot_store_discarded is None)

    def __str__(self) -> str:
        lines = [f"recovered {self.records} records in {self.batches} batches "
                 f"({self.bytes_read} bytes, {len(self.partitions)} partitions) "
                 f"in {self.duration_s:.3f}s"]
        if self.write_ahead_restored:
            lines.append(f"wrote {self.write_ahead_restored} batches back from the write-ahead "
                         "file")
        if self.snapshots_loaded:
            lines.append(f"loaded {len(self.snapshots_loaded)} snapshots")
        if self.snapshot_store_discarded is not None:
            lines.append(f"discarded every snapshot: {self.snapshot_store_discarded}")
        lines += [f"discarded the snapshot of partition {p}: {why}"
                  for p, why in sorted(self.snapshots_discarded.items())]
        lines += [f"truncated torn tail: {t}" for t in self.truncations]
        lines += [f"skipped corrupt region: {s}" for s in self.skipped]
        return "\n".join(lines)
