"""A reference reader of docs/FORMAT.md: segments, batches and records, byte by byte.

Written from docs/FORMAT.md alone ("Record batch", "Records", "Reading and recovery",
"Preallocated space"), without the engine's reading code (nothing from ``offsetlog``), so that
it can judge any implementation of the format: the Python framing of today and the native
decoder that replaces it (issue 25). Slow and plain on purpose.

Interface::

    encode_records(base_offset, records, timestamp=..., attributes=0, producer_id=-1,
                   producer_epoch=-1) -> bytes        # the reference writer of one batch
    encode_frame(base_offset, payload, record_count=..., last_offset_delta=..., ...)
    batches, end, problem = read_segment(data, min_offset=-1, zero_tail=True)

* ``batches``: every valid batch from byte 0 up to the first problem, in order; each a dict
  of every header field (``position``, ``size``, ``length``, ``header_crc``, ``crc``,
  ``magic``, ``attributes``, ``base_offset``, ``last_offset_delta``, ``record_count``,
  ``timestamp``, ``producer_id``, ``producer_epoch``), the derived ``last_offset``, the raw
  ``payload`` and ``records``: the payload decoded as msgpack (``raw=False``, lists), i.e. a
  list of ``[offset_delta, record_type, version, key, value]``.
* ``end``: the position just past the last valid batch (where a torn tail is cut).
* ``problem``: None when the data ends cleanly (at a batch boundary, or followed only by zero
  bytes when ``zero_tail``), else a ``Problem``: ``position`` (where the bad batch starts),
  ``reason`` (FORMAT.md's stable strings), ``kind`` (``"torn"`` or ``"corrupt"``) and, for
  corruption, ``resume``: where the next valid batch starts. ``zeros`` says how many zero
  bytes ended the data cleanly.

``UnsupportedBatchError`` is raised for a batch whose header checks out but whose magic or
attribute bits this format does not know ("refused", FORMAT.md); a resync candidate of that
kind is merely not valid.

Points where FORMAT.md leaves the order of checks open, and the order taken here (the
engine of 7e4d167 agrees, tests/log/test_format_oracle.py checks it):

* a header that checks out is judged in this order: magic, attribute bits (both refused),
  ``length`` range (``bad length``), extent past the end (``truncated batch``: torn at once),
  payload CRC (``checksum mismatch``), ``record_count`` / ``last_offset_delta``
  (``bad record count``), ``base_offset`` (``offset out of order``);
* the resync after a bad header starts at position + 1, after a bad payload or contents at
  the end of the extent; candidates are positions whose byte 12 is the magic byte, checked as
  a batch that would follow the last valid one;
* a valid batch (both CRCs) whose payload is not one msgpack value as FORMAT.md allows
  (``decode_payload``: bytes after it, invalid UTF-8, a map key neither str nor bin, an
  extension type, nesting past ``MAX_DEPTH``) is ``undecodable payload``: corruption wherever
  it is, never a torn tail (its checksum says it was written so).
"""

from __future__ import annotations

import struct
import zlib
from dataclasses import dataclass

import msgpack

#: FORMAT.md, "Record batch"
MAGIC = 0xA1
HEADER_SIZE = 48
LENGTH_MIN = 44
LENGTH_MAX = 1 << 30
TRANSACTIONAL, CONTROL, DELETE_HORIZON = 0x01, 0x02, 0x04
KNOWN_ATTRIBUTES = TRANSACTIONAL | CONTROL | DELETE_HORIZON
#: bytes 0-47, little-endian: length, header_crc, crc, magic, attributes, base_offset,
#: last_offset_delta, record_count, timestamp, producer_id, producer_epoch
HEADER = struct.Struct("<IIIBBqIIqqh")
assert HEADER.size == HEADER_SIZE
FIELDS = ("length", "header_crc", "crc", "magic", "attributes", "base_offset",
          "last_offset_delta", "record_count", "timestamp", "producer_id", "producer_epoch")

#: FORMAT.md, "Records"
RECORD_TYPES = {1: "OFFSET_COMMIT", 2: "GROUP_METADATA", 3: "TRANSACTION_MARKER",
                4: "TRANSACTION_STATE", 5: "TOPIC"}

#: FORMAT.md, "Records": a payload nested deeper than this is undecodable. Read here as: the
#: payload's own value is at depth 0, and a value at a depth above MAX_DEPTH is too deep (so
#: 257 nested arrays are fine when the innermost is empty). FORMAT.md says "nesting deeper than
#: 256 levels", which leaves where counting starts open.
MAX_DEPTH = 256

#: FORMAT.md's stable reason strings
TRUNCATED_HEADER = "truncated header"
HEADER_CHECKSUM = "header checksum mismatch"
BAD_LENGTH = "bad length"
TRUNCATED_BATCH = "truncated batch"
CHECKSUM = "checksum mismatch"
BAD_RECORD_COUNT = "bad record count"
OUT_OF_ORDER = "offset out of order"
UNDECODABLE = "undecodable payload"


class UnsupportedBatchError(Exception):
    """A batch whose header checks out with a magic or attribute bits this format refuses."""

    def __init__(self, position: int, what: str) -> None:
        super().__init__(f"{what} at byte {position}")
        self.position = position


@dataclass(frozen=True)
class Problem:
    position: int
    reason: str
    kind: str  # "torn" or "corrupt"
    resume: int | None = None  # corruption: where the next valid batch starts

    @property
    def torn(self) -> bool:
        return self.kind == "torn"


def header_crc(data: bytes, pos: int) -> int:
    """CRC-32 of bytes 0-3 then 12-47 of the batch at ``pos``."""
    return zlib.crc32(data[pos + 12:pos + HEADER_SIZE], zlib.crc32(data[pos:pos + 4]))


def encode_frame(base_offset: int, payload: bytes, *, record_count: int,
                 last_offset_delta: int, timestamp: int, attributes: int = 0,
                 producer_id: int = -1, producer_epoch: int = -1, magic: int = MAGIC,
                 length: int | None = None) -> bytes:
    """A batch around ``payload`` with both CRCs right, whatever its fields say: the reference
    writer, and the tests' way to build batches that are valid to their checksums but not to
    their contents (a bad record count, a magic or ``length`` of another writer)."""
    length = 44 + len(payload) if length is None else length
    tail = struct.pack("<BBqIIqqh", magic, attributes, base_offset, last_offset_delta,
                       record_count, timestamp, producer_id, producer_epoch)
    head = struct.pack("<I", length)
    hcrc = zlib.crc32(tail, zlib.crc32(head))
    return head + struct.pack("<II", hcrc, zlib.crc32(payload)) + tail + payload


def encode_records(base_offset: int, records: list, *, timestamp: int, attributes: int = 0,
                   producer_id: int = -1, producer_epoch: int = -1) -> bytes:
    """A batch of ``records`` (``[offset_delta, record_type, version, key, value]`` each) as
    FORMAT.md frames them: the payload a msgpack array (str as str, bytes as bin)."""
    payload = msgpack.packb(list(records), use_bin_type=True)
    return encode_frame(base_offset, payload, record_count=len(records),
                        last_offset_delta=records[-1][0], timestamp=timestamp,
                        attributes=attributes, producer_id=producer_id,
                        producer_epoch=producer_epoch)


def _check(data: bytes, pos: int, min_offset: int) -> tuple[str | None, int | None, dict | None]:
    """Judge the batch at ``pos``: ``(None, None, header)`` when valid, else ``(reason,
    search_from, header or None)``; ``search_from`` None means certainly torn (an intact
    header whose batch runs past the end)."""
    n = len(data)
    if n - pos < HEADER_SIZE:
        return TRUNCATED_HEADER, pos + 1, None
    h = dict(zip(FIELDS, HEADER.unpack_from(data, pos)))
    if header_crc(data, pos) != h["header_crc"]:
        return HEADER_CHECKSUM, pos + 1, None
    if h["magic"] != MAGIC:
        raise UnsupportedBatchError(pos, f"batch magic {h['magic']:#x}")
    if h["attributes"] & ~KNOWN_ATTRIBUTES:
        raise UnsupportedBatchError(pos, f"batch attributes {h['attributes']:#x}")
    if not LENGTH_MIN <= h["length"] <= LENGTH_MAX:
        return BAD_LENGTH, pos + 1, h
    stop = pos + 4 + h["length"]
    if stop > n:
        return TRUNCATED_BATCH, None, h
    if zlib.crc32(data[pos + HEADER_SIZE:stop]) != h["crc"]:
        return CHECKSUM, stop, h
    if h["record_count"] < 1 or h["last_offset_delta"] < h["record_count"] - 1:
        return BAD_RECORD_COUNT, stop, h
    if h["base_offset"] < min_offset:
        return OUT_OF_ORDER, stop, h
    return None, None, h


def _next_valid(data: bytes, start: int, min_offset: int) -> int | None:
    """The first position at or after ``start`` where a valid batch begins (byte-wise resync
    on the magic byte), or None."""
    pos = start
    while pos + HEADER_SIZE <= len(data):
        if data[pos + 12] == MAGIC:
            try:
                reason, _, _ = _check(data, pos, min_offset)
            except UnsupportedBatchError:
                reason = "unsupported"
            if reason is None:
                return pos
        pos += 1
    return None


def read_segment(data: bytes, *, min_offset: int = -1, zero_tail: bool = True
                 ) -> tuple[list[dict], int, Problem | None]:
    """The valid batches of one segment's bytes, where they end, and what stopped reading.

    :param min_offset: the lowest base offset the first batch may have (the segment's base
        offset, or -1)
    :param zero_tail: zero bytes from a batch boundary to the end are the active segment's
        unused reserve, the end of its data; False for a closed segment, where they are a torn
        tail (a caller reading a closed segment treats any torn tail as corruption)
    """
    data = bytes(data)
    batches: list[dict] = []
    pos, n = 0, len(data)
    while pos < n:
        if zero_tail and not any(data[pos:]):
            return batches, pos, None
        reason, search_from, h = _check(data, pos, min_offset)
        if reason is not None:
            resume = None if search_from is None else _next_valid(data, search_from, min_offset)
            if resume is None:
                return batches, pos, Problem(pos, reason, "torn")
            return batches, pos, Problem(pos, reason, "corrupt", resume)
        stop = pos + 4 + h["length"]
        payload = data[pos + HEADER_SIZE:stop]
        try:
            records = decode_payload(payload)
        except ValueError:
            return batches, pos, Problem(pos, UNDECODABLE, "corrupt")
        batch = {"position": pos, "size": stop - pos, **h,
                 "last_offset": h["base_offset"] + h["last_offset_delta"],
                 "payload": payload, "records": records}
        batches.append(batch)
        min_offset = batch["last_offset"] + 1
        pos = stop
    return batches, pos, None


def _no_extensions(code, data):
    raise ValueError(f"msgpack extension type {code}: not part of the format")


def decode_payload(payload: bytes):
    """A payload as FORMAT.md reads it: exactly one msgpack value; str UTF-8, bin bytes; map
    keys str or bin; no extension type; nesting within MAX_DEPTH. ``ValueError`` otherwise."""
    try:
        value = msgpack.unpackb(payload, raw=False, use_list=True, strict_map_key=True,
                                ext_hook=_no_extensions)
    except ValueError:
        raise
    except Exception as e:  # noqa: BLE001 - msgpack's other errors: the same finding
        raise ValueError(f"{type(e).__name__}: {e}") from None
    stack = [(value, 0)]
    while stack:
        v, depth = stack.pop()
        if depth > MAX_DEPTH:
            raise ValueError(f"nested deeper than {MAX_DEPTH}")
        if isinstance(v, list):
            stack += [(x, depth + 1) for x in v]
        elif isinstance(v, dict):
            stack += [(x, depth + 1) for kv in v.items() for x in kv]
    return value


def zero_bytes_after(data: bytes, end: int) -> int:
    """How many zero bytes follow ``end`` to the end of ``data`` (0 unless all are zero)."""
    rest = bytes(data[end:])
    return len(rest) if rest and not any(rest) else 0


# -- records (FORMAT.md, "Records") ----------------------------------------------------------

def offset_commit(version: int, key, value) -> tuple[dict, dict | None]:
    """An OFFSET_COMMIT record's key and value as named fields with their defaults: version 1
    by position (key of 3, value of 2 to 5, later elements ignored), version 0 by name."""
    if version == 1:
        if not isinstance(key, list) or len(key) != 3:
            raise ValueError(f"OFFSET_COMMIT v1 key of {key!r}")
        named_key = dict(zip(("group", "topic", "partition"), key))
        if value is None:
            return named_key, None
        if not isinstance(value, list) or len(value) < 2:
            raise ValueError(f"OFFSET_COMMIT v1 value of {value!r}")
        fields = ("offset", "commit_timestamp", "metadata", "leader_epoch", "expire_timestamp")
        defaults = {"metadata": "", "leader_epoch": None, "expire_timestamp": None}
        named = dict(defaults, **dict(zip(fields, value[:5])))
        return named_key, named
    if version == 0:
        named_key = {k: key[k] for k in ("group", "topic", "partition")}
        if value is None:
            return named_key, None
        named = {"offset": value["offset"], "commit_timestamp": value["commit_timestamp"],
                 "metadata": value.get("metadata", ""),
                 "leader_epoch": value.get("leader_epoch"),
                 "expire_timestamp": value.get("expire_timestamp")}
        return named_key, named
    raise ValueError(f"OFFSET_COMMIT version {version} is newer than FORMAT.md")


def read_store_partition(segments: list[tuple[int, bytes]]) -> tuple[list[dict], Problem | None]:
    """Every valid batch of one log partition, given its segments ``(base_offset, bytes)``
    oldest first (each batch dict also has ``segment_base``: the segment it is in), and the
    problem that ended it: only the last segment may end torn or in zeros; a torn tail of an
    older one is corruption (FORMAT.md)."""
    out: list[dict] = []
    min_offset = -1
    for i, (base, data) in enumerate(segments):
        last = i == len(segments) - 1
        batches, _end, problem = read_segment(data, min_offset=max(min_offset, base),
                                             zero_tail=last)
        for b in batches:
            b["segment_base"] = base
        out += batches
        if batches:
            min_offset = batches[-1]["last_offset"] + 1
        if problem is not None:
            if problem.torn and not last:
                problem = Problem(problem.position, problem.reason, "corrupt")
            return out, problem
    return out, None
