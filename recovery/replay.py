"""Replay a log partition from its segments: check every batch, repair a torn tail.

Policy (docs/FORMAT.md, "Recovery"): a batch that fails its checks at the very end of the last
segment is a torn tail: it is truncated (when ``repair``) and reported; so is one in the last
segment whose offsets lie at or past the partition's recovery point (``RECOVERY-POINTS``:
never durable), whatever follows it. Any other failure is corruption: ``CorruptLogError``
naming file and position, unless ``salvage`` asks to skip it, in which case every skipped
range is reported.
"""

from __future__ import annotations

import logging
import os
from types import EllipsisType
from typing import Callable, Sequence

from offsetlog.errors import CorruptLogError, PartitionMismatchError
from offsetlog.log import naming, recovery_points, segment
from offsetlog.log.format import HEADER_SIZE, LENGTH_SIZE, MAX_BATCH_BYTES
from offsetlog.log.framing import BatchReader, decode_payload
from offsetlog.partitioner import partition_for
from offsetlog.recovery.report import DroppedRange, PartitionRecovery
from offsetlog.recovery.swap import finish_swaps, plan_swaps

log = logging.getLogger("offsetlog.recovery")

#: apply_batches([(base_offset, records, attributes, producer_id, producer_epoch), ...])
ApplyBatches = Callable[[list], None]

#: what the payload decoder (ValueError), and the table given what it decoded, raise for a payload that is not records
#: (a record short of a field is a KeyError or IndexError: corruption too, not a crash)
UNDECODABLE = (ValueError, TypeError, KeyError, IndexError)

#: batches handed to apply_batches at once: large enough to amortise the call, small enough
#: that decoded records do not pile up in memory
CHUNK = 512


def _replay_natively(reader: BatchReader, table, path: str, shift: int,
                     limit: int | None) -> None:
    """Plain commits straight from their bytes into ``table`` (``BatchReader.replay_into``),
    every other batch through its ``apply_batches``."""
    for applied, next_offset, batches in reader.replay_into(table.offsets, CHUNK, table.plain):
        check_limit(path, shift + reader.end, reader.min_offset - 1, limit)
        table.applied_natively(applied, next_offset)
        if batches:
            table.apply_batches(batches)


def _replay_decoded(reader: BatchReader, apply: ApplyBatches, path: str, shift: int,
                    limit: int | None, start_offset: int) -> None:
    """Decoded chunks of batches to ``apply``, records below ``start_offset`` left out."""
    for chunk in reader.decoded_chunks(CHUNK):
        check_limit(path, shift + reader.end, chunk[-1][0] + chunk[-1][1][-1][0], limit)
        if chunk[0][0] < start_offset:
            chunk = _from_offset(chunk, start_offset)
            if not chunk:
                continue
        apply(chunk)


def _overlaid(data: bytes, shift: int, overlay: Sequence[tuple[int, bytes]]) -> bytes:
    """``data`` (a segment's bytes from ``shift``) with each ``(position, bytes)`` of
    ``overlay`` written over it, past its end too (the gap zeros), as opening would write
    them."""
    out = bytearray(data)
    for position, piece in overlay:
        at = position - shift
        if at < 0:  # (read from a snapshot's position on: only what lies past it)
            piece, at = piece[-at:], 0
        if at + len(piece) > len(out):
            out.extend(bytes(at + len(piece) - len(out)))
        out[at:at + len(piece)] = piece
    return bytes(out)


def check_limit(path: str, position: int, last_offset: int, limit: int | None) -> None:
    if limit is not None and last_offset >= limit:
        raise CorruptLogError(path, position, f"batch reaches offset {last_offset}, past the "
                                              f"next segment's base offset {limit}")


def recover_partition(directory: str, partition: int, *,
                      apply_batches: ApplyBatches | None = None, table=None, repair: bool = True,
                      salvage: bool = False, progress: Callable[[int], None] | None = None,
                      start_offset: int = 0,
                      start_position: tuple[int, int] | None = None,
                      recovery_point: int | None | EllipsisType = ...,
                      overlay: Sequence[tuple[int, bytes]] = ()) -> PartitionRecovery:
    """Read every segment of one partition, handing valid batches, in order and in chunks,
    to ``apply_batches`` (``OffsetTable.apply_batches``).

    :param table: the ``OffsetTable`` to replay into, instead of ``apply_batches``: plain
        offset commits then go from their bytes into it natively (``BatchReader.replay_into``)
        wherever no snapshot offset is to be skipped; every other batch reaches its
        ``apply_batches`` as before
    :param repair: truncate a torn tail on disk (False for read-only tools)
    :param salvage: skip corrupt regions (reported in ``skipped``) instead of raising
    :param progress: called with the byte size of each segment once it has been read
    :param start_offset: the table already holds every record below this log offset (it was
        loaded from a snapshot). Segments that end at or before it are not read at all, batches
        below it are skipped, and of a batch that straddles it (the cleaner keeps batch ranges
        while dropping records) only the records at or above it are applied. If the log ends
        before it, ``result.start_beyond_end`` is set and nothing has been applied.
    :param start_position: ``(segment base, byte position)`` of the batch at ``start_offset``
        as the snapshot recorded it; used only where it can be checked (``_trusted_start``),
        otherwise the segment is scanned from its start
    :param recovery_point: the partition's recovery point (None: it has none), for a caller
        that read the store's RECOVERY-POINTS once for every partition; by default it is
        read here
    :param overlay: ``(position, data)`` the store's WRITE-AHEAD file would write into the
        last segment on open (``write_ahead.overlay``), laid over its bytes as read, for a
        read-only caller to see what opening will
    """
    apply = apply_batches if table is None else table.apply_batches
    result = PartitionRecovery(partition=partition, directory=directory,
                               start_offset=start_offset)
    # A cleaner's swap interrupted by a crash is finished first (read-only callers only
    # plan it), so what is read is what the log will be.
    segments = finish_swaps(directory) if repair else plan_swaps(directory).segments
    result.segments = segments
    # Past it nothing was durable: a failed batch there is a torn tail whatever follows.
    point = (recovery_points.recovery_point(directory) if recovery_point is ...
             else recovery_point)
    min_offset = 0
    for base, path, limit in naming.with_limits(segments):
        last = limit is None
        if base < min_offset:
            raise CorruptLogError(path, 0, f"segment base offset {base} overlaps the previous "
                                           f"segment, which reaches offset {min_offset - 1}")
        if limit is not None and limit <= start_offset:
            # Everything in it is below start_offset: the snapshot holds its effect.
            result.segments_skipped += 1
            min_offset = base
            continue
        shift = 0  # byte position in the file where ``data`` starts
        if start_offset > base:
            shift = _trusted_start(path, base, last, start_offset, start_position)
            if shift is None:
                result.start_beyond_end = True  # the file ends before the snapshot's position
                return result
        data = segment.read_file(path, shift)
        if last and overlay:
            data = _overlaid(data, shift, overlay)
        result.bytes_read += len(data)
        first, floor = 0, base
        if start_offset > base and shift == 0:
            # No trusted position: find the first batch that reaches start_offset.
            skipper = BatchReader(data, min_offset=base)
            first = None
            for pos, _, h in skipper.raw():
                if h.base_offset + h.last_offset_delta >= start_offset:
                    first = pos
                    break
                floor = h.base_offset + h.last_offset_delta + 1
            if first is None:  # none: reading resumes where the skipper stopped
                first, floor = skipper.end, skipper.min_offset
        elif shift:
            floor = start_offset
        # Only the active segment may end in preallocated (zero) space: closed ones are cut to
        # their last batch before the roll, so zeros there are damage.
        reader = BatchReader(data, start=first, salvage=salvage, min_offset=floor,
                             zero_tail=last, recovery_point=point if last else None)
        if apply is None:
            view = memoryview(data)
            for pos, stop, h in reader.raw():
                check_limit(path, shift + pos, h.base_offset + h.last_offset_delta, limit)
                # Decoded as a replay would: a payload that passes its CRC but does not decode
                # makes open fail, so the tools that answer for open (verify, recover) see it.
                try:
                    decode_payload(view[pos + HEADER_SIZE:stop])
                except UNDECODABLE as e:
                    if not salvage:
                        raise CorruptLogError(path, shift + pos,
                                              f"undecodable payload ({e})") from None
                    dropped = DroppedRange(path, shift + pos, stop - pos, "undecodable payload")
                    log.warning("salvage: skipped a batch that does not decode: %s", dropped)
                    result.skipped.append(dropped)
                    continue
                result.batches += 1
                result.records += h.record_count
        else:
            try:
                if table is not None and floor >= start_offset:
                    # no batch of this segment lies below start_offset: the native loop
                    _replay_natively(reader, table, path, shift, limit)
                else:
                    _replay_decoded(reader, apply, path, shift, limit, start_offset)
            except UNDECODABLE as e:
                raise CorruptLogError(path, shift + reader.end,
                                      f"undecodable payload ({type(e).__name__}: {e})") from None
            result.batches += reader.batches
            result.records += reader.records
        for p in reader.problems:
            dropped = DroppedRange(path, shift + p.position, p.dropped or 0, p.reason)
            log.warning("salvage: skipped corrupt region %s", dropped)
            result.skipped.append(dropped)
        stop = reader.stop
        if reader.zero_tail:
            result.preallocated = reader.zero_tail
            if repair:  # cut the unused reserve: appends resume at the end of the data
                segment.truncate_file(path, shift + len(data) - reader.zero_tail)
        if last and repair and (stop is None or not stop.torn):
            # What was written before a crash but never synced is loaded (and served) now:
            # make it durable, so a later power loss cannot take back what readers saw.
            segment.fsync_file(path)
        if stop is not None:
            position = shift + stop.position
            if stop.torn and last:
                # Everything from the torn batch on is cut, including any zero reserve after it
                # (which bytes of a torn write were zeros and which were never written cannot
                # be told apart).
                torn = DroppedRange(path, position, len(data) - stop.position, stop.reason)
                result.truncated = torn
                if repair:
                    segment.truncate_file(path, position)
                    log.warning("truncated torn tail: %s%s", torn,
                                f" (at or past the recovery point {point}: never durable)"
                                if stop.past_recovery_point else "")
            elif salvage:
                dropped = DroppedRange(path, position, len(data) - stop.position, stop.reason)
                log.warning("salvage: skipped the rest of a closed segment: %s", dropped)
                result.skipped.append(dropped)
            else:
                reason = stop.reason if not stop.torn else f"{stop.reason} in a closed segment"
                raise CorruptLogError(path, position, reason)
        min_offset = max(reader.min_offset, base)
        if progress is not None:
            progress(len(data))
    result.next_offset = min_offset
    if start_offset > min_offset:
        result.start_beyond_end = True
    return result


def _trusted_start(path: str, base: int, last: bool, start_offset: int,
                   position: tuple[int, int] | None) -> int | None:
    """Where to start reading a segment that holds ``start_offset``: the snapshot's recorded
    byte position if it checks out, else 0 (scan from the start). None: the file ends before
    that position, so the log ends before ``start_offset``.

    The position was recorded in the segment that was active when the snapshot was taken.
    If that segment is still the last one, it is the same file, only appended to (the cleaner
    never touches the active segment), so a file now shorter than the position ends before
    the snapshot, and a file exactly that long holds nothing after it. Otherwise (or to be
    sure) the position is used only if a whole, valid batch starting exactly at
    ``start_offset`` is there: offsets are unique, so that is the batch, and everything before
    it in the file is below it. A cleaned segment fails this check and is scanned.
    """
    if position is None or position[0] != base or position[1] == 0:
        return 0
    pos = position[1]
    size = os.path.getsize(path)
    if pos >= size:
        if last:
            return pos if pos == size else None
        return 0
    # The one batch that must start there, not the whole tail (the replay reads that next).
    head = segment.read_file(path, pos, LENGTH_SIZE)
    if len(head) < LENGTH_SIZE:
        return 0
    length = int.from_bytes(head, "little")
    if length > MAX_BATCH_BYTES:
        return 0
    data = head + segment.read_file(path, pos + LENGTH_SIZE, length)
    for at, _, h in BatchReader(data, min_offset=start_offset).raw():
        if at == 0 and h.base_offset == start_offset:  # a whole valid batch, checked by raw()
            return pos
        break
    return 0


def _from_offset(chunk: list, start_offset: int) -> list:
    """``chunk`` without the records below ``start_offset`` (only its first batch can have
    any: batches are in offset order and the reader started at the first one reaching it)."""
    base, records, attributes, producer_id, producer_epoch = chunk[0]
    kept = [r for r in records if base + r[0] >= start_offset]
    head = [(base, kept, attributes, producer_id, producer_epoch)] if kept else []
    return head + chunk[1:]


def check_placement(table, partition: int, partitions: int, directory: str) -> None:
    """Every group (and transactional id) whose records ``table`` replayed from log partition
    ``partition`` must hash to it (``partition_for``, as the store placed it). One that does
    not means the partition count in meta.json is not the one the log was written with, or
    segments were moved between partitions: an error, never a silent re-hash (which would
    hide the group's offsets).

    One dictionary walk per group (``partition_for`` caches its hashes), after replay.

    :raises PartitionMismatchError: naming the partition directory and the first such group
    """
    for kind, names in (("group", table.offsets), ("group", table.group_metadata),
                        ("group", table.txn.keys), ("transactional id", table.txn.states)):
        for name in names:
            home = partition_for(name, partitions)
            if home != partition:
                raise PartitionMismatchError(
                    directory, 0, f"log partition {partition} holds records of {kind} "
                                  f"{name!r}, which belongs in partition {home} of {partitions}: "
                                  "meta.json's partition count does not match the log")
