"""Replay a log partition from its segments: check every batch, repair a torn tail.

Policy (docs/FORMAT.md, "Recovery"): a batch that fails its checks at the very end of the last
segment is a torn tail: it is truncated (when ``repair``) and reported. Any other failure is
corruption: ``CorruptLogError`` naming file and position, unless ``salvage`` asks to skip it,
in which case every skipped range is reported.
"""

from __future__ import annotations

import logging
from typing import Callable

import msgpack

from offsetlog import naming, segment
from offsetlog.errors import CorruptLogError
from offsetlog.framing import BatchReader
from recovery.report import DroppedRange, PartitionRecovery
from recovery.swap import finish_swaps, plan_swaps

log = logging.getLogger("offsetlog.recovery")

#: apply_batches([(base_offset, records, attributes, producer_id, producer_epoch), ...])
ApplyBatches = Callable[[list], None]

#: batches handed to apply_batches at once: large enough to amortise the call, small enough
#: that decoded records do not pile up in memory
CHUNK = 512


def check_limit(path: str, position: int, last_offset: int, limit: int | None) -> None:
    if limit is not None and last_offset >= limit:
        raise CorruptLogError(path, position, f"batch reaches offset {last_offset}, past the "
                                              f"next segment's base offset {limit}")


def recover_partition(directory: str, partition: int, *,
                      apply_batches: ApplyBatches | None = None, repair: bool = True,
                      salvage: bool = False, progress: Callable[[int], None] | None = None
                      ) -> PartitionRecovery:
    """Read every segment of one partition, handing valid batches, in order and in chunks,
    to ``apply_batches`` (``OffsetTable.apply_batches``).

    :param repair: truncate a torn tail on disk (False for read-only tools)
    :param salvage: skip corrupt regions (reported in ``skipped``) instead of raising
    :param progress: called with the byte size of each segment once it has been read
    """
    apply = apply_batches
    result = PartitionRecovery(partition=partition, directory=directory)
    # A cleaner's swap interrupted by a crash is finished first (read-only callers only
    # plan it), so what is read is what the log will be.
    segments = finish_swaps(directory) if repair else plan_swaps(directory).segments
    result.segments = segments
    min_offset = 0
    for i, (base, path) in enumerate(segments):
        last = i == len(segments) - 1
        limit = segments[i + 1][0] if not last else None
        if base < min_offset:
            raise CorruptLogError(path, 0, f"segment base offset {base} overlaps the previous "
                                           f"segment, which reaches offset {min_offset - 1}")
        data = segment.read_file(path)
        result.bytes_read += len(data)
        # Only the active segment may end in preallocated (zero) space: closed ones are cut to
        # their last batch before the roll, so zeros there are damage.
        reader = BatchReader(data, salvage=salvage, min_offset=base, zero_tail=last)
        if apply is None:
            for pos, stop, h in reader.raw():  # h: offsetlog.format.BATCH_HEADER fields
                check_limit(path, pos, h[5] + h[6], limit)
                result.batches += 1
                result.records += h[7]
        else:
            try:
                for chunk in reader.decoded_chunks(CHUNK):
                    check_limit(path, reader.end, chunk[-1][0] + chunk[-1][1][-1][0], limit)
                    apply(chunk)
            except (ValueError, msgpack.UnpackException, TypeError) as e:
                raise CorruptLogError(path, reader.end, f"undecodable payload ({e})") from None
            result.batches += reader.batches
            result.records += reader.records
        for p in reader.problems:
            dropped = DroppedRange(path, p.position, p.dropped or 0, p.reason)
            log.warning("salvage: skipped corrupt region %s", dropped)
            result.skipped.append(dropped)
        stop = reader.stop
        if reader.zero_tail:
            result.preallocated = reader.zero_tail
            if repair:  # cut the unused reserve: appends resume at the end of the data
                segment.truncate_file(path, len(data) - reader.zero_tail)
        if last and repair and (stop is None or not stop.torn):
            # What was written before a crash but never synced is loaded (and served) now:
            # make it durable, so a later power loss cannot take back what readers saw.
            segment.fsync_file(path)
        if stop is not None:
            if stop.torn and last:
                # Everything from the torn batch on is cut, including any zero reserve after it
                # (which bytes of a torn write were zeros and which were never written cannot
                # be told apart).
                torn = DroppedRange(path, stop.position, len(data) - stop.position, stop.reason)
                result.truncated = torn
                if repair:
                    segment.truncate_file(path, stop.position)
                    log.warning("truncated torn tail: %s", torn)
            elif salvage:
                dropped = DroppedRange(path, stop.position, len(data) - stop.position,
                                       stop.reason)
                log.warning("salvage: skipped the rest of a closed segment: %s", dropped)
                result.skipped.append(dropped)
            else:
                reason = stop.reason if not stop.torn else f"{stop.reason} in a closed segment"
                raise CorruptLogError(path, stop.position, reason)
        min_offset = max(reader.min_offset, base)
        if progress is not None:
            progress(len(data))
    result.next_offset = min_offset
    return result
