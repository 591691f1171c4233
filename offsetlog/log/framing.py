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
"""

from __future__ import annotations

import struct
import threading
import zlib
from typing import Callable, Iterator, NamedTuple, Sequence

import msgpack

from offsetlog.errors import CorruptLogError, UnsupportedVersionError
from offsetlog.log.format import (
    BATCH_HEADER,
    CRC_START,
    HEADER_AFTER_LENGTH,
    HEADER_SIZE,
    LENGTH_SIZE,
    MAGIC,
    MAX_BATCH_BYTES,
    NO_PRODUCER_EPOCH,
    NO_PRODUCER_ID,
    Attribute,
    BatchHeader,
    Record,
)

_LEN = LENGTH_SIZE

#: BATCH_HEADER in its three parts: the length, the checksums, the fields after them
_pack_length = struct.Struct("<I").pack
_pack_head = struct.Struct("<III").pack
_pack_tail = struct.Struct("<" + BATCH_HEADER.format[4:]).pack
assert struct.calcsize("<" + BATCH_HEADER.format[4:]) == HEADER_SIZE - CRC_START
_unpack_header = BATCH_HEADER.unpack_from
_new_header = tuple.__new__  # a BatchHeader from the tuple unpack gives, without a copy
_crc32 = zlib.crc32
_MAGIC_BYTE = bytes([MAGIC])


_local = threading.local()


def encode_payload(records: Sequence[Record]) -> bytes:
    # One Packer per thread: ``packb`` builds a new one per call, about 40 % of its cost for
    # a one-record batch; a Packer is not safe to share between threads.
    try:
        pack = _local.pack
    except AttributeError:
        pack = _local.pack = msgpack.Packer(use_bin_type=True).pack
    return pack(records)


def decode_payload(payload) -> tuple:
    return msgpack.unpackb(payload, use_list=True, raw=False)


def frame_payload(base_offset: int, payload: bytes, record_count: int, last_offset_delta: int,
                  timestamp: int, attributes: int = 0, producer_id: int = NO_PRODUCER_ID,
                  producer_epoch: int = NO_PRODUCER_EPOCH) -> bytes:
    """One batch's bytes: its header, then ``payload`` (``encode_payload(records)``). The
    writer's loop passes every argument by position; other callers name them."""
    length = HEADER_AFTER_LENGTH + len(payload)
    # The fields the header CRC covers after the length, packed once: cheaper than packing
    # the whole header twice and slicing it for the CRC (the same bytes either way).
    tail = _pack_tail(MAGIC, attributes, base_offset, last_offset_delta, record_count,
                      timestamp, producer_id, producer_epoch)
    return b"".join((_pack_head(length, _crc32(tail, _crc32(_pack_length(length))),
                                _crc32(payload)), tail, payload))


def header_checksum(data, pos: int) -> int:
    """The header CRC of the batch at ``pos``: its length field, then its fields after the
    two checksums."""
    return _crc32(data[pos + CRC_START:pos + HEADER_SIZE], _crc32(data[pos:pos + _LEN]))


def encode_batch(base_offset: int, records: Sequence[Record], *, timestamp: int,
                 attributes: int = 0, producer_id: int = NO_PRODUCER_ID,
                 producer_epoch: int = NO_PRODUCER_EPOCH) -> bytes:
    if not records:
        raise ValueError("a batch holds at least one record")
    return frame_payload(base_offset, encode_payload(records), len(records), records[-1][0],
                         timestamp, attributes, producer_id, producer_epoch)


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

    def records(self) -> tuple:
        return decode_payload(self.payload)


class Problem(NamedTuple):
    """Why reading stopped or skipped. ``torn`` problems end the buffer; others are corruption."""

    position: int
    reason: str
    torn: bool
    resume: int | None  # where the next valid batch starts (corruption only)

    @property
    def dropped(self) -> int | None:
        return None if self.resume is None else self.resume - self.position


def _check(data, pos: int, end: int, min_offset: int) -> tuple[str | None, int | None]:
    """Validate the batch at ``pos``: ``(None, None)`` if good, else ``(reason, search_from)``:
    where a following valid batch could start, or None when the batch is certainly the torn
    end of the buffer (an intact header whose batch runs past the end)."""
    if end - pos < HEADER_SIZE:
        return "truncated header", pos + 1
    h = BatchHeader.unpack_from(data, pos)
    if header_checksum(data, pos) != h.header_crc:
        return "header checksum mismatch", pos + 1
    if h.magic != MAGIC:
        raise UnsupportedVersionError(f"batch magic {h.magic:#x} at byte {pos} is not {MAGIC:#x}")
    if h.attributes & ~Attribute.KNOWN:
        raise UnsupportedVersionError(f"unknown batch attributes {h.attributes:#x} at byte {pos}")
    if h.length < HEADER_AFTER_LENGTH or h.length > MAX_BATCH_BYTES:
        return "bad length", pos + 1
    stop = pos + _LEN + h.length
    if stop > end:
        return "truncated batch", None
    if _crc32(data[pos + HEADER_SIZE:stop]) != h.crc:
        return "checksum mismatch", stop
    if h.record_count == 0 or h.last_offset_delta < h.record_count - 1:
        return "bad record count", stop
    if h.base_offset < min_offset:
        return "offset out of order", stop
    return None, None


def _find_next_valid(data, start: int, end: int, min_offset: int) -> int | None:
    """First position at or after ``start`` where a valid batch begins (a resync), or None."""
    search = start + CRC_START
    while True:
        i = data.find(_MAGIC_BYTE, search, end)
        if i < 0:
            return None
        candidate = i - CRC_START
        try:
            reason, _ = _check(data, candidate, end, min_offset)
        except UnsupportedVersionError:
            reason = "unsupported"
        if reason is None:
            return candidate
        search = i + 1


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
    """

    def __init__(self, data, *, start: int = 0, end: int | None = None, salvage: bool = False,
                 min_offset: int = -1, zero_tail: bool = True) -> None:
        self._data = data if isinstance(data, memoryview) else memoryview(data)
        self._bytes = data  # .find works on bytes/mmap, not memoryview
        self._start = start
        self._endpos = len(data) if end is None else end
        self._salvage = salvage
        self.min_offset = min_offset
        self.end = start
        self.stop: Problem | None = None
        self.problems: list[Problem] = []
        self.batches = 0  # counted by decoded_chunks
        self.records = 0
        self._zero_tail_ok = zero_tail
        #: zero bytes after the last batch accepted as preallocated space
        self.zero_tail = 0

    def raw(self) -> Iterator[tuple[int, int, BatchHeader]]:
        """``(position, end, header)`` of each valid batch; the payload is
        ``buffer[position + HEADER_SIZE:end]``."""
        mv, pos, end = self._data, self._start, self._endpos
        unpack, crc32, new_header = _unpack_header, _crc32, _new_header
        while pos < end:
            if end - pos >= HEADER_SIZE:
                h = new_header(BatchHeader, unpack(mv, pos))
                stop = pos + LENGTH_SIZE + h.length
                if (crc32(mv[pos + CRC_START:pos + HEADER_SIZE], crc32(mv[pos:pos + 4]))
                        == h.header_crc
                        and HEADER_AFTER_LENGTH <= h.length <= MAX_BATCH_BYTES and stop <= end
                        and h.magic == MAGIC and not h.attributes & ~Attribute.KNOWN
                        and h.record_count > 0 and h.last_offset_delta >= h.record_count - 1
                        and h.base_offset >= self.min_offset
                        and crc32(mv[pos + HEADER_SIZE:stop]) == h.crc):
                    self.min_offset = h.base_offset + h.last_offset_delta + 1
                    yield pos, stop, h
                    pos = self.end = stop
                    continue
            pos = self._bad_batch(pos)
            if pos is None:
                return

    def decoded_chunks(self, chunk_size: int = 512) -> Iterator[list[tuple]]:
        """Valid batches, decoded, in lists of up to ``chunk_size`` tuples
        ``(base_offset, records, attributes, producer_id, producer_epoch)``: the shape
        ``OffsetTable.apply_batches`` takes.

        The same checks as ``raw``, fused with decoding into one loop: recovery spends its
        time here, and a generator step per batch would cost a large share of replay speed.
        Raises ``ValueError``/``msgpack`` errors for a payload that passes its CRC but does
        not decode, with ``self.end`` at that batch.
        """
        mv, pos, end = self._data, self._start, self._endpos
        unpack, crc32, unpackb = _unpack_header, _crc32, msgpack.unpackb
        # Constants as locals: a global lookup per check per batch is measurable here.
        hsize, lsize, cstart, magic = HEADER_SIZE, LENGTH_SIZE, CRC_START, MAGIC
        min_len, max_len, unknown_bits = HEADER_AFTER_LENGTH, MAX_BATCH_BYTES, ~Attribute.KNOWN
        min_offset = self.min_offset
        chunk: list = []
        append = chunk.append
        batches = records = 0
        while pos < end:
            if end - pos >= hsize:
                # The header's fields by name (BatchHeader's order), as plain locals: a
                # NamedTuple per batch would cost this loop a measurable share.
                (length, header_crc, crc, mgc, attributes, base, last_delta, count, _timestamp,
                 producer_id, producer_epoch) = unpack(mv, pos)
                stop = pos + lsize + length
                if (crc32(mv[pos + cstart:pos + hsize], crc32(mv[pos:pos + lsize])) == header_crc
                        and min_len <= length <= max_len and stop <= end and mgc == magic
                        and not attributes & unknown_bits and count > 0
                        and last_delta >= count - 1 and base >= min_offset
                        and crc32(mv[pos + hsize:stop]) == crc):
                    try:
                        append((base, unpackb(mv[pos + hsize:stop]), attributes, producer_id,
                                producer_epoch))
                    except Exception:
                        self.end, self.min_offset = pos, min_offset
                        raise
                    min_offset = base + last_delta + 1
                    batches += 1
                    records += count
                    pos = stop
                    if len(chunk) >= chunk_size:
                        self.min_offset, self.end = min_offset, pos
                        self.batches += batches
                        self.records += records
                        batches = records = 0
                        yield chunk
                        chunk = []
                        append = chunk.append
                    continue
            self.min_offset, self.end = min_offset, pos
            self.batches += batches
            self.records += records
            batches = records = 0
            if chunk:
                yield chunk
                chunk = []
                append = chunk.append
            pos = self._bad_batch(pos)
            if pos is None:
                return
            min_offset = self.min_offset
        self.min_offset, self.end = min_offset, pos
        self.batches += batches
        self.records += records
        if chunk:
            yield chunk

    def _bad_batch(self, pos: int) -> int | None:
        """Classify the invalid batch at ``pos``: where to resume (salvage), or None to stop."""
        if self._zero_tail_ok:
            rest = bytes(self._bytes[pos:self._endpos])
            if rest.count(0) == len(rest):  # reserved space never written: the end, cleanly
                self.zero_tail = len(rest)
                return None
        reason, search_from = _check(self._bytes, pos, self._endpos, self.min_offset)
        if reason is None:  # pragma: no cover - the fast paths accept every valid batch
            raise AssertionError("fast path rejected a valid batch")
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
        mv = self._data
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
