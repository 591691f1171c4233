"""Record batches: framing records into bytes and reading them back from a buffer.

Nothing here touches a file system: the writer takes a file object, the reader a bytes-like
buffer, so tests feed both from memory. The format is in docs/FORMAT.md.

Reading follows LevelDB's rule: a torn tail is end-of-file, not an error. A batch that fails
its checks is *torn* when nothing valid follows it in the buffer (the end of an interrupted
write) and *corrupt* when a valid batch does (damage before the tail); the reader reports which,
and the caller picks the policy. The header has its own checksum, so a batch whose header is
intact is trusted to end where its length says: one that runs past the end of the buffer is
torn, and nothing inside its extent (user metadata may hold batch-like bytes) is ever taken
for a batch.

The bytes themselves are the native core's (``offsetlog.log._native``, the Rust crate in
``native/``): the header, both CRCs, the msgpack payload and the loops over a buffer's batches
are written once, there. This module keeps the policy: what a batch that fails its checks
means (torn tail, preallocated zeros, corruption, salvage), and the Python shapes callers
use (``Batch``, ``Problem``, ``BatchReader``).
"""

from __future__ import annotations

from typing import Callable, Iterator, NamedTuple, Sequence

import offsetlog.log._native as _native
from offsetlog.errors import CorruptLogError
from offsetlog.log.format import (
    CRC_START,
    HEADER_SIZE,
    LENGTH_SIZE,
    NO_PRODUCER_EPOCH,
    NO_PRODUCER_ID,
    BatchHeader,
    Record,
)

_new_header = tuple.__new__  # a BatchHeader from the native tuple, without a copy
_crc32 = _native.crc32
_scan = _native.scan
_decode_chunk = _native.decode_chunk
_replay_chunk = _native.replay_chunk

#: batches the native loops read per call: enough to amortise the call, few enough that a
#: reader whose caller stops early has not read far ahead
_SCAN_BATCHES = 256

#: batches one native replay call reads at most
_REPLAY_BATCHES = 1 << 16

#: ``decode_chunk``'s and ``replay_chunk``'s ways of stopping
_CHUNK_FULL, _BAD_BATCH, _UNDECODABLE, _HANDED_BACK = 1, 2, 3, 4

#: the msgpack bytes of a payload's records
encode_payload: Callable[[Sequence[Record]], bytes] = _native.encode_payload

#: ``frame_fields(base_offset, timestamp, calls)``: one plain batch of commit calls, each a
#: sequence of the flat ``(key, value, timestamp)`` triples ``records.offset_commit_fields``
#: gives: the bytes ``encode_batch`` gives for ``records_from_fields`` of all their fields
frame_fields: Callable[[int, int, Sequence], bytes] = _native.frame_fields


def decode_payload(payload) -> list:
    """The records of a batch's payload. ``ValueError`` if it does not decode."""
    return _native.decode_payload(bytes(payload))


def frame_payload(base_offset: int, payload: bytes, record_count: int, last_offset_delta: int,
                  timestamp: int, attributes: int = 0, producer_id: int = NO_PRODUCER_ID,
                  producer_epoch: int = NO_PRODUCER_EPOCH) -> bytes:
    """One batch's bytes: its header, then ``payload`` (``encode_payload(records)``)."""
    return _native.frame_payload(base_offset, payload, record_count, last_offset_delta,
                                 timestamp, attributes, producer_id, producer_epoch)


def header_checksum(data, pos: int) -> int:
    """The header CRC of the batch at ``pos``: its length field, then its fields after the
    two checksums."""
    return _crc32(bytes(data[pos + CRC_START:pos + HEADER_SIZE]),
                  _crc32(bytes(data[pos:pos + LENGTH_SIZE])))


def encode_batch(base_offset: int, records: Sequence[Record], *, timestamp: int,
                 attributes: int = 0, producer_id: int = NO_PRODUCER_ID,
                 producer_epoch: int = NO_PRODUCER_EPOCH) -> bytes:
    """A batch of ``records`` (at least one), encoded and framed in one native call."""
    if not records:
        raise ValueError("a batch holds at least one record")
    return _native.frame_records(base_offset, records, timestamp, attributes, producer_id,
                                 producer_epoch)


class LogWriter:
    """Appends batches to a file object. Durability (fsync) is the caller's business."""

    def __init__(self, f) -> None:
        self._f = f

    def append(self, base_offset: int, records: Sequence[Record], *, timestamp: int,
               **batch_fields) -> int:
        data = encode_batch(base_offset, records, timestamp=timestamp, **batch_fields)
        self._f.write(data)
        return len(data)


class Batch(NamedTuple):
    position: int  # byte position of the batch in its buffer / file
    size: int  # bytes, header included
    base_offset: int
    last_offset_delta: int
    record_count: int
    timestamp: int
    attributes: int
    producer_id: int
    producer_epoch: int
    payload: memoryview

    @property
    def last_offset(self) -> int:
        return self.base_offset + self.last_offset_delta

    @property
    def next_offset(self) -> int:
        return self.base_offset + self.last_offset_delta + 1

    def records(self) -> list:
        return decode_payload(self.payload)


class Problem(NamedTuple):
    """Why reading stopped or skipped. ``torn`` problems end the buffer; others are corruption."""

    position: int
    reason: str
    torn: bool
    resume: int | None  # where the next valid batch starts (corruption only)
    #: torn because its offsets lie at or past the recovery point, whatever follows it
    past_recovery_point: bool = False

    @property
    def dropped(self) -> int | None:
        return None if self.resume is None else self.resume - self.position


def _check(data: bytes, pos: int, end: int, min_offset: int) -> tuple[str | None, int | None]:
    """Validate the batch at ``pos``: ``(None, None)`` if good, else ``(reason, search_from)``:
    where a following valid batch could start, or None when the batch is certainly the torn
    end of the buffer (an intact header whose batch runs past the end). Raises
    ``UnsupportedVersionError`` for a valid header of another batch format."""
    return _native.check_at(data, pos, end, min_offset)


def _find_next_valid(data: bytes, start: int, end: int, min_offset: int) -> int | None:
    """First position at or after ``start`` where a valid batch begins (a resync), or None."""
    return _native.find_next_valid(data, start, end, min_offset)


class BatchReader:
    """Iterates the valid batches of a buffer.

    After iteration, ``end`` is the position just past the last good batch, ``problems`` lists
    what was skipped (with ``salvage=True``) and ``stop`` the problem that ended reading, if
    any: ``stop.torn`` means a torn tail. With ``salvage=False`` reading ends at the first
    problem. Raises ``UnsupportedVersionError`` for a valid batch of a newer format.

    :param min_offset: the lowest base offset the first batch may have (offsets only grow)
    :param zero_tail: accept zero bytes from a batch boundary to the end as the end of the
        data (an active segment's preallocated space), setting ``zero_tail`` to their count;
        False for a buffer that must end with its last batch (a closed segment)
    :param recovery_point: the log offset below which every record was durable (the store's
        RECOVERY-POINTS), for an active segment: a batch that fails its checks where the next
        offset is at or past it was never durable, so it is a torn tail even when valid
        batches follow it (a write persisted out of order); None: no such point
    """

    def __init__(self, data, *, start: int = 0, end: int | None = None, salvage: bool = False,
                 min_offset: int = -1, zero_tail: bool = True,
                 recovery_point: int | None = None) -> None:
        # the native loops read bytes (immutable while they hold them); other buffers are
        # copied once
        self._bytes = data if type(data) is bytes else bytes(data)
        self._start = start
        self._endpos = len(self._bytes) if end is None else min(end, len(self._bytes))
        self._salvage = salvage
        self.min_offset = min_offset
        self.end = start
        self.stop: Problem | None = None
        self.problems: list[Problem] = []
        self.batches = 0  # counted by decoded_chunks
        self.records = 0
        self._zero_tail_ok = zero_tail
        self._recovery_point = recovery_point
        #: zero bytes after the last batch accepted as preallocated space
        self.zero_tail = 0

    def raw(self) -> Iterator[tuple[int, int, BatchHeader]]:
        """``(position, end, header)`` of each valid batch; the payload is
        ``buffer[position + HEADER_SIZE:end]``."""
        data, pos, end = self._bytes, self._start, self._endpos
        new_header = _new_header
        while pos < end:
            found, pos, _, bad = _scan(data, pos, end, self.min_offset, _SCAN_BATCHES)
            for at, stop, h in found:
                # kept per batch, not per call: a caller that stops early reads them
                self.min_offset = h[5] + h[6] + 1
                self.end = stop
                yield at, stop, new_header(BatchHeader, h)
            if bad:
                pos = self._bad_batch(pos)
                if pos is None:
                    return

    def decoded_chunks(self, chunk_size: int = 512) -> Iterator[list[tuple]]:
        """Valid batches, decoded, in lists of up to ``chunk_size`` tuples
        ``(base_offset, records, attributes, producer_id, producer_epoch)``: the shape
        ``OffsetTable.apply_batches`` takes. Checking and decoding are one native loop.

        Raises ``ValueError`` for a payload that passes its CRC but does not decode, with
        ``self.end`` at that batch.
        """
        data, pos, end = self._bytes, self._start, self._endpos
        while pos < end:
            (chunk, pos, self.min_offset, batches, records, status,
             error) = _decode_chunk(data, pos, end, self.min_offset, chunk_size)
            self.end = pos
            self.batches += batches
            self.records += records
            if status == _UNDECODABLE:
                raise ValueError(error)
            if chunk:
                yield chunk
            if status == _BAD_BATCH:
                pos = self._bad_batch(pos)
                if pos is None:
                    return

    def replay_into(self, offsets: dict, chunk_size: int,
                    plain: Callable[[], bool]) -> Iterator[tuple[int, int, list]]:
        """Valid batches, replayed: while ``plain()`` says so (the table has no pending
        transactional offsets), the plain offset commits of up to ``chunk_size`` batches at a
        time go straight from their bytes into ``offsets`` (the table's ``group -> {(topic,
        partition): entry}``), natively, with no record built in Python; any other batch is
        decoded and handed back (``chunk_size`` is then the batches decoded at once). Yields
        ``(applied, next_offset, batches)``: ``applied``
        records went into ``offsets`` (the last ending at ``next_offset``, -1 if none), then
        ``batches`` are for ``OffsetTable.apply_batches``. Otherwise as ``decoded_chunks``.
        """
        data, pos, end = self._bytes, self._start, self._endpos
        while pos < end:
            if not plain():
                (chunk, pos, self.min_offset, batches, records, status,
                 error) = _decode_chunk(data, pos, end, self.min_offset, chunk_size)
                applied, next_offset = 0, -1
            else:
                # nothing piles up on this path (records go straight into the table), and the
                # native loop's look-ups of groups and keys are shared within a call: long calls
                (handed, pos, self.min_offset, batches, records, applied, next_offset, status,
                 error) = _replay_chunk(data, pos, end, self.min_offset, _REPLAY_BATCHES,
                                        offsets)
                chunk = [handed] if handed is not None else []
            self.end = pos
            self.batches += batches
            self.records += records
            if status == _UNDECODABLE:
                raise ValueError(error)
            if chunk or applied:
                yield applied, next_offset, chunk
            if status == _BAD_BATCH:
                pos = self._bad_batch(pos)
                if pos is None:
                    return

    def _bad_batch(self, pos: int) -> int | None:
        """Classify the invalid batch at ``pos``: where to resume (salvage), or None to stop."""
        if self._zero_tail_ok:
            rest = self._bytes[pos:self._endpos]
            if rest.count(0) == len(rest):  # reserved space never written: the end, cleanly
                self.zero_tail = len(rest)
                return None
        reason, search_from = _check(self._bytes, pos, self._endpos, self.min_offset)
        if reason is None:  # pragma: no cover - the native loops accept every valid batch
            raise AssertionError("the native loop rejected a valid batch")
        if self._recovery_point is not None and self.min_offset >= self._recovery_point:
            # Nothing from here on was ever durable: the end of the data as a crash left it,
            # whatever a write persisted out of order after the hole.
            self.stop = Problem(pos, reason, True, None, True)
            return None
        resume = None
        if search_from is not None:
            resume = _find_next_valid(self._bytes, search_from, self._endpos, self.min_offset)
        problem = Problem(pos, reason, resume is None, resume)
        if resume is None or not self._salvage:
            self.stop = problem
            return None
        self.problems.append(problem)
        return resume

    def __iter__(self) -> Iterator[Batch]:
        mv = memoryview(self._bytes)
        for pos, stop, h in self.raw():
            yield Batch(pos, stop - pos, h.base_offset, h.last_offset_delta, h.record_count,
                        h.timestamp, h.attributes, h.producer_id, h.producer_epoch,
                        mv[pos + HEADER_SIZE:stop])


def read_batches(f, *, on_corruption: Callable[[int, int, str], None] | None = None,
                 name: str = "<buffer>") -> Iterator[Batch]:
    """Valid batches of file object ``f``, read whole. A torn tail ends iteration quietly.

    Corruption before the tail raises ``CorruptLogError`` naming ``name`` and the position,
    unless ``on_corruption(position, dropped_bytes, reason)`` is given: then it is reported
    and reading resumes at the next valid batch.
    """
    data = f.read()
    reader = BatchReader(data, salvage=on_corruption is not None)
    yield from reader
    for p in reader.problems:
        on_corruption(p.position, p.dropped, p.reason)  # type: ignore[misc]
    if reader.stop is not None and not reader.stop.torn:
        raise CorruptLogError(name, reader.stop.position, reader.stop.reason)
