"""The local log cleaner: keep only what ``rules`` keeps of a partition's closed segments.

It reads the closed segments twice, without any lock: pass 1 feeds every batch to
``rules.LatestScan`` (cut before the first undecided transaction, and scanned again if that
moved the end); pass 2 rewrites each batch with the records that survive. Every surviving
record keeps its log offset and every batch its base offset and offset range, so offsets are
never reused or shifted; a batch that loses nothing is copied byte for byte. Output is grouped
into files of at most ``segment_bytes`` of *input*, each named after its first input segment,
and swapped in with the crash-safe protocol of ``offsetlog.recovery.swap``; only the swap
(renames) needs the partition's writer to stand still, which the caller arranges through
``swap_lock``.
"""

from __future__ import annotations

import contextlib
import logging
import os
import time
from dataclasses import dataclass, field
from typing import Callable, ContextManager

from offsetlog.compaction.rules import LatestScan, horizon_passed, is_commit_marker, record_key
from offsetlog.errors import CorruptLogError
from offsetlog.log import naming, segment
from offsetlog.log.format import Attribute
from offsetlog.log.framing import BatchReader, encode_payload, frame_payload
from offsetlog.recovery.swap import commit_swap, finish_swaps, plan_swaps, write_cleaned

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
    markers_dropped: int = 0
    #: first offset of a transaction undecided in the closed segments: cleaning stopped
    #: before the segment holding it (None: nothing undecided)
    first_unstable_offset: int | None = None
    duration_s: float = 0.0
    swapped: list[tuple[int, int]] = field(default_factory=list)  # [base, end) replaced

    @property
    def ratio(self) -> float:
        """bytes after / bytes before (1.0 when nothing was cleaned)."""
        return self.bytes_after / self.bytes_before if self.bytes_before else 1.0


def _read_closed(path: str, base: int):
    """(batch, its bytes) of every batch of a closed segment."""
    data = segment.read_file(path)
    reader = BatchReader(data, min_offset=base, zero_tail=False)  # closed: no reserve
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
    hook = fault_hook or (lambda step: None)
    swap_lock = swap_lock or contextlib.nullcontext
    _finish_leftovers(directory, swap_lock, on_swapped)
    closed = [(b, p) for b, p in naming.list_segments(directory) if b < active_base]
    if not closed:
        return result

    # Pass 1: the latest offset of every key in the closed segments, and the transactions.
    scan = _scan(closed)
    clean_end = active_base  # base of the segment after the last one cleaned: the last swap's end
    while scan.first_unstable is not None:
        # Clean only what lies wholly before the first undecided transaction, and scan that
        # again: what is "latest" depends on the range, and a transaction decided by a marker
        # beyond the new end is undecided within it (so this may shrink the range again).
        if result.first_unstable_offset is None:
            result.first_unstable_offset = scan.first_unstable
        ends = [b for b, _ in closed[1:]] + [clean_end]
        kept = [(seg, end) for seg, end in zip(closed, ends) if end <= scan.first_unstable]
        closed, clean_end = [seg for seg, _ in kept], kept[-1][1] if kept else clean_end
        if not closed:
            result.duration_s = time.perf_counter() - started
            return result
        scan = _scan(closed)
    latest = scan.latest

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
        end = groups[gi + 1][0][0] if gi + 1 < len(groups) else clean_end
        first_base = group[0][0]

        def cleaned(group=group):
            for base, path in group:
                result.bytes_before += os.path.getsize(path)
                for batch, original in _read_closed(path, base):
                    result.records_before += batch.record_count
                    if batch.attributes & Attribute.SEMANTIC:
                        data, kept, markers = _clean_txn_batch(
                            batch, original, scan, now_ms, delete_retention_ms,
                            keep_markers_from=keep_tombstones_from)
                        result.markers_dropped += markers
                    else:
                        data, kept, tombstones = _clean_batch(
                            batch, original, latest, now_ms, delete_retention_ms,
                            keep_tombstones_from)
                        result.tombstones_dropped += tombstones
                    result.records_after += kept
                    yield data

        out_path, written = write_cleaned(directory, first_base, cleaned())
        result.bytes_after += written
        hook("cleaned-written")
        with swap_lock():
            commit_swap(directory, out_path, first_base, end, [p for _, p in group],
                        hook=hook)
            if on_swapped is not None:
                on_swapped(naming.list_segments(directory))
        result.swapped.append((first_base, end))
    result.segments_after = len([b for b, _ in naming.list_segments(directory)
                                 if b < active_base])
    result.duration_s = time.perf_counter() - started
    return result


def _finish_leftovers(directory: str, swap_lock, on_swapped) -> bool:
    """Finish or discard a swap an earlier, failed cleaning left behind (as recovery would on
    open) before starting a new one. Cleaning around a committed ``.swap`` would write a second
    swap over the same offsets, and recovery would then let the stale one replace the newer
    segment. True if anything was done."""
    plan = plan_swaps(directory)
    if not (plan.discard or plan.renames):
        return False
    with swap_lock():
        finish_swaps(directory)
        if on_swapped is not None:
            on_swapped(naming.list_segments(directory))
    return True


def _scan(closed) -> LatestScan:
    scan = LatestScan()
    for base, path in closed:
        for batch, _ in _read_closed(path, base):
            records = batch.records()
            b = batch.base_offset
            writes = [(k, b + r[0]) for r in records if (k := record_key(r)) is not None]
            if not batch.attributes & Attribute.SEMANTIC:
                scan.plain(writes)
            elif batch.attributes & Attribute.CONTROL:
                scan.control(batch.producer_id, b, any(is_commit_marker(r) for r in records))
            else:
                scan.transactional(batch.producer_id, b, writes, len(records))
    return scan


def _clean_txn_batch(batch, original: bytes, scan: LatestScan, now_ms: int,
                     delete_retention_ms: int, keep_markers_from: int | None = None
                     ) -> tuple[bytes, int, int]:
    """(framed bytes or b"", records kept, markers dropped) for a transactional or control
    batch of a decided transaction.

    :param keep_markers_from: never drop a marker at this log offset or above (a snapshot
        taken below it may hold the transaction's offsets as pending: its replay needs the
        marker), like tombstones
    """
    txn = scan.txn_of[batch.base_offset]
    records = batch.records()
    base = batch.base_offset
    attributes, timestamp = batch.attributes, batch.timestamp
    if attributes & Attribute.CONTROL:
        if scan.survivors(txn):
            return original, len(records), 0
        if attributes & Attribute.DELETE_HORIZON:
            if horizon_passed(attributes, timestamp, base, now_ms, keep_markers_from):
                return b"", 0, len(records)
            return original, len(records), 0
        kept = records
        attributes |= Attribute.DELETE_HORIZON
        timestamp = now_ms + delete_retention_ms
    else:
        kept = [r for r in records if scan.survives(txn, record_key(r), base + r[0])]
        if not kept:
            return b"", 0, 0
        if len(kept) == len(records):
            return original, len(kept), 0
    return _reframe(batch, kept, attributes, timestamp), len(kept), 0


def _clean_batch(batch, original: bytes, latest: dict, now_ms: int, delete_retention_ms: int,
                 keep_tombstones_from: int | None = None) -> tuple[bytes, int, int]:
    """(framed bytes or b"", records kept, tombstones dropped) for one input batch."""
    records = batch.records()
    base = batch.base_offset
    stamped = bool(batch.attributes & Attribute.DELETE_HORIZON)
    kept = []
    dropped_tombstones = 0
    has_tombstone = False
    for record in records:
        k = record_key(record)
        if k is not None and latest.get(k) != base + record[0]:
            continue  # superseded by a later record of the same key
        if record[4] is None and k is not None:
            if horizon_passed(batch.attributes, batch.timestamp, base + record[0], now_ms,
                              keep_tombstones_from):
                dropped_tombstones += 1
                continue
            has_tombstone = True
        kept.append(record)
    if not kept:
        return b"", 0, dropped_tombstones
    attributes = batch.attributes
    timestamp = batch.timestamp
    if has_tombstone and not stamped:
        attributes |= Attribute.DELETE_HORIZON
        timestamp = now_ms + delete_retention_ms
    if len(kept) == len(records) and attributes == batch.attributes:
        return original, len(kept), dropped_tombstones  # unchanged: copy it as it is
    return _reframe(batch, kept, attributes, timestamp), len(kept), dropped_tombstones


def _reframe(batch, kept: list, attributes: int, timestamp: int) -> bytes:
    """``batch`` with only the ``kept`` records, at its own base offset and last offset delta
    (so the offsets of what follows stay where they were), its producer and the given
    attributes and timestamp."""
    return frame_payload(batch.base_offset, encode_payload(kept), record_count=len(kept),
                         last_offset_delta=batch.last_offset_delta, timestamp=timestamp,
                         attributes=attributes, producer_id=batch.producer_id,
                         producer_epoch=batch.producer_epoch)
