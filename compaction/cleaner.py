"""The log cleaner: keep only the latest record per key in a partition's closed segments.

Kafka's rules (LogCleaner), for one log partition:

* only closed segments are cleaned; the active segment is never touched;
* a record survives if it is the latest one for its key among the segments being cleaned
  (a later record in the active segment supersedes it only at a later cleaning);
* every surviving record keeps its log offset, and every batch keeps its base offset and its
  offset range, so offsets are never reused or shifted;
* a tombstone survives its first cleaning and is then kept for ``delete_retention_ms``: the
  first cleaning stamps its batch with a delete horizon (KIP-534) and a cleaning at or after
  the horizon drops it. Consumers that read the log late still see the delete in time;
* expired offsets disappear only through the tombstones expiry wrote: the cleaner has no
  notion of time beyond the horizon.

Output is grouped into files of at most ``segment_bytes`` of *input*, each named after its
first input segment, and swapped in with the crash-safe protocol in recovery/swap.py. Reading
and writing happen without any lock; only the swap (renames) needs the partition's writer to
stand still, which the caller arranges through ``swap_lock``.
"""

from __future__ import annotations

import contextlib
import logging
import os
import time
from dataclasses import dataclass, field
from typing import Callable, ContextManager

from offsetlog import naming, segment
from offsetlog.errors import CorruptLogError
from offsetlog.format import Attribute
from offsetlog.framing import BatchReader, encode_payload, frame
from offsetlog.records import GROUP_METADATA, OFFSET_COMMIT

log = logging.getLogger("offsetlog.cleaner")

#: Called at each step of a swap with the step's name; tests raise or kill there to prove
#: that recovery finishes or discards the swap whatever the step.
FaultHook = Callable[[str], None]
STEPS = ("cleaned-written", "swap-renamed", "sources-deleted", "swap-finished")


@dataclass
class CleanResult:
    partition: int
    segments_before: int = 0
    segments_after: int = 0
    bytes_before: int = 0  # of the closed segments that were cleaned
    bytes_after: int = 0
    records_before: int = 0
    records_after: int = 0
    tombstones_dropped: int = 0
    duration_s: float = 0.0
    swapped: list[tuple[int, int]] = field(default_factory=list)  # [base, end) replaced

    @property
    def ratio(self) -> float:
        """bytes after / bytes before (1.0 when nothing was cleaned)."""
        return self.bytes_after / self.bytes_before if self.bytes_before else 1.0


def _key(record) -> tuple | None:
    """The compaction key of a record, or None for records compaction must always keep."""
    rtype, key = record[1], record[3]
    if rtype == OFFSET_COMMIT:
        return (OFFSET_COMMIT, key["group"], key["topic"], key["partition"])
    if rtype == GROUP_METADATA:
        return (GROUP_METADATA, key["group"])
    return None  # unknown or future types (transaction markers): never dropped here


def _read_closed(path: str, base: int):
    """(batch, its bytes) of every batch of a closed segment."""
    data = segment.read_file(path)
    reader = BatchReader(data, min_offset=base)
    for batch in reader:
        yield batch, data[batch.position:batch.position + batch.size]
    if reader.stop is not None:
        # Closed segments were checked by recovery when the store opened; damage now means
        # the disk changed under us. Refuse to clean rather than rewrite it.
        raise CorruptLogError(path, reader.stop.position, reader.stop.reason)


def clean_partition(directory: str, partition: int, *, active_base: int, now_ms: int,
                    delete_retention_ms: int, segment_bytes: int,
                    swap_lock: Callable[[], ContextManager] | None = None,
                    on_swapped: Callable[[list[tuple[int, str]]], None] | None = None,
                    fault_hook: FaultHook | None = None,
                    keep_tombstones_from: int | None = None) -> CleanResult:
    """Clean the closed segments (base < ``active_base``) of one partition directory.

    :param keep_tombstones_from: never drop a tombstone at this log offset or above. The
        store passes the lowest offset of its snapshots of the partition: such a snapshot
        still holds the key the tombstone deletes, and replaying it plus the log after it
        without the tombstone would bring the key back (docs/DESIGN.md, "Snapshots")
    :param swap_lock: context manager factory held around each swap (the store passes one
        that pauses its writer for this partition); None for an offline directory
    :param on_swapped: called, under ``swap_lock``, with the directory's segment list after
        each swap so the caller can update its view
    :return: what was cleaned
    """
    started = time.perf_counter()
    result = CleanResult(partition)
    closed = [(b, p) for b, p in naming.list_segments(directory) if b < active_base]
    if not closed:
        return result
    hook = fault_hook or (lambda step: None)
    swap_lock = swap_lock or contextlib.nullcontext

    # Pass 1: the latest offset of every key in the closed segments.
    latest: dict[tuple, int] = {}
    for base, path in closed:
        for batch, _ in _read_closed(path, base):
            for record in batch.records():
                k = _key(record)
                if k is not None:
                    latest[k] = batch.base_offset + record[0]

    # Group inputs so an output file holds at most segment_bytes of input.
    groups: list[list[tuple[int, str]]] = []
    size = 0
    for base, path in closed:
        n = os.path.getsize(path)
        if groups and size + n <= segment_bytes:
            groups[-1].append((base, path))
            size += n
        else:
            groups.append([(base, path)])
            size = n
    result.segments_before = len(closed)

    for gi, group in enumerate(groups):
        end = groups[gi + 1][0][0] if gi + 1 < len(groups) else active_base
        first_base = group[0][0]
        out_path = naming.cleaned_path(directory, first_base)
        fd = os.open(out_path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o644)
        written = 0
        try:
            for base, path in group:
                result.bytes_before += os.path.getsize(path)
                for batch, original in _read_closed(path, base):
                    data, kept, dropped_tombstones = _clean_batch(
                        batch, original, latest, now_ms, delete_retention_ms,
                        keep_tombstones_from)
                    result.records_before += batch.record_count
                    result.records_after += kept
                    result.tombstones_dropped += dropped_tombstones
                    if data:
                        segment.write_all(fd, data)
                        written += len(data)
            segment.sync_fd(fd)
        finally:
            os.close(fd)
        result.bytes_after += written
        hook("cleaned-written")
        swap = naming.swap_path(directory, first_base, end)
        with swap_lock():
            os.replace(out_path, swap)
            segment.fsync_dir(directory)
            hook("swap-renamed")
            for _, path in group:
                os.unlink(path)
            hook("sources-deleted")
            os.replace(swap, naming.segment_path(directory, first_base))
            segment.fsync_dir(directory)
            hook("swap-finished")
            if on_swapped is not None:
                on_swapped(naming.list_segments(directory))
        result.swapped.append((first_base, end))
    result.segments_after = len([b for b, _ in naming.list_segments(directory)
                                 if b < active_base])
    result.duration_s = time.perf_counter() - started
    return result


def _clean_batch(batch, original: bytes, latest: dict, now_ms: int, delete_retention_ms: int,
                 keep_tombstones_from: int | None = None) -> tuple[bytes, int, int]:
    """(framed bytes or b"", records kept, tombstones dropped) for one input batch."""
    records = batch.records()
    base = batch.base_offset
    horizon = batch.timestamp if batch.attributes & Attribute.DELETE_HORIZON else None
    kept = []
    dropped_tombstones = 0
    has_tombstone = False
    for record in records:
        k = _key(record)
        if k is not None and latest.get(k) != base + record[0]:
            continue  # superseded by a later record of the same key
        if record[4] is None and k is not None:
            if horizon is not None and now_ms >= horizon and (
                    keep_tombstones_from is None or base + record[0] < keep_tombstones_from):
                dropped_tombstones += 1
                continue
            has_tombstone = True
        kept.append(record)
    if not kept:
        return b"", 0, dropped_tombstones
    attributes = batch.attributes
    timestamp = batch.timestamp
    if has_tombstone and horizon is None:
        attributes |= Attribute.DELETE_HORIZON
        timestamp = now_ms + delete_retention_ms
    if len(kept) == len(records) and attributes == batch.attributes:
        return original, len(kept), dropped_tombstones  # unchanged: copy it as it is
    data = frame(base, encode_payload(kept), record_count=len(kept),
                 last_offset_delta=batch.last_offset_delta, timestamp=timestamp,
                 attributes=attributes, producer_id=batch.producer_id,
                 producer_epoch=batch.producer_epoch)
    return data, len(kept), dropped_tombstones
