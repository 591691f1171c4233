"""A plain reading of docs/FORMAT.md's "WRITE-AHEAD", for tests: the oracle the native reader
(``_native.read_write_ahead``) is held to, and a writer of files to feed it."""

from __future__ import annotations

import struct
import zlib

HEADER = struct.Struct("<IIIIqq")  # length, crc, generation, partition, base, position
MARKER = 0xFFFFFFFF


def entry(generation: int, partition: int, base: int, position: int, data: bytes) -> bytes:
    rest = struct.pack("<IIqq", generation, partition, base, position) + data
    return struct.pack("<II", len(rest), zlib.crc32(rest)) + rest


def marker(generation: int) -> bytes:
    return entry(generation, MARKER, -1, -1, b"")


def read(data: bytes):
    """``(generation or None, [(partition, base, position, data)])`` as FORMAT.md says."""
    def at(pos: int):
        if pos + HEADER.size > len(data):
            return None
        length, crc, generation, partition, base, position = HEADER.unpack_from(data, pos)
        if length < 24 or pos + 8 + length > len(data):
            return None
        if zlib.crc32(data[pos + 8:pos + 8 + length]) != crc:
            return None
        return (generation, partition, base, position,
                bytes(data[pos + HEADER.size:pos + 8 + length]), 8 + length)

    first = at(0)
    if first is None or first[1:5] != (MARKER, -1, -1, b""):
        return None, []
    generation, pos, out = first[0], first[5], []
    while True:
        e = at(pos)
        if e is None or e[0] != generation or e[1] == MARKER or e[2] < 0 or e[3] < 0:
            return generation, out
        out.append(e[1:5])
        pos += e[5]
