"""The framing the store's small metadata files share (``MANIFEST``, ``RECOVERY-POINTS``;
docs/FORMAT.md): a 12-byte header (4-byte magic, u16 version, u16 flags, u32 entry count),
the entries, fixed-size rows of one ``struct``, and a CRC-32 (zlib) of every byte before it.
All little-endian. What the rows mean, and which orders and values are valid, is each file's
own module's.
"""

from __future__ import annotations

import struct
import zlib
from typing import Iterable

from offsetlog.errors import CorruptLogError

#: magic, version, flags, entry count
HEADER = struct.Struct("<4sHHI")
CRC = struct.Struct("<I")


def encode(magic: bytes, version: int, entry: struct.Struct, rows: Iterable[tuple]) -> bytes:
    rows = list(rows)
    out = bytearray(HEADER.pack(magic, version, 0, len(rows)))
    for row in rows:
        out += entry.pack(*row)
    out += CRC.pack(zlib.crc32(out))
    return bytes(out)


def decode(data: bytes, path: str, *, magic: bytes, version: int, entry: struct.Struct,
           what: str) -> list[tuple]:
    """The rows of a well-formed file of this ``magic`` and ``version``.

    :param what: the file's name in errors ("manifest", ...)
    :raises CorruptLogError: naming ``path`` at position 0, "bad <what>: ..."
    """
    if len(data) < HEADER.size + CRC.size or data[:4] != magic:
        raise bad(path, what, f"not a {what} (bad magic or too short)")
    _, found, flags, count = HEADER.unpack_from(data)
    if found != version or flags:
        raise bad(path, what, f"{what} version {found} (flags {flags:#x}); this offsetlog "
                              f"reads version {version}")
    if len(data) != HEADER.size + count * entry.size + CRC.size:
        raise bad(path, what, f"{len(data)} bytes for {count} entries")
    (crc,) = CRC.unpack_from(data, len(data) - CRC.size)
    if zlib.crc32(data[:-CRC.size]) != crc:
        raise bad(path, what, "checksum mismatch")
    return [entry.unpack_from(data, HEADER.size + i * entry.size) for i in range(count)]


def bad(path: str, what: str, why: str) -> CorruptLogError:
    return CorruptLogError(path, 0, f"bad {what}: {why}")
