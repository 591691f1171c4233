"""LMDB snapshots of the tables: a cache that bounds replay time (docs/FORMAT.md, "Snapshot
store"; docs/DESIGN.md, "Snapshots").

One LMDB environment, ``<store>/snapshots/``, one named database ``snapshots``, one entry per
log partition: key = the partition number (u32 big-endian, so LMDB's byte order is numeric
order), value = a 64-byte header + a msgpack body (``OffsetTable.snapshot_state``). A snapshot
is written in one LMDB write transaction, so after any crash the entry is the old one or the
new one, whole.

A snapshot is only a cache. ``decode`` accepts one only if every check passes; anything else
is a :class:`SnapshotInvalid` whose message is the reason it is discarded, and the caller
replays the log from the start. Nothing here guesses, repairs or half-loads.

This module knows bytes and LMDB, not tables: the store turns the decoded state into a table.
"""

from __future__ import annotations

import logging
import os
import struct
import threading
import zlib
from dataclasses import dataclass
from typing import Callable, NamedTuple

import lmdb

from offsetlog.log import segment
from offsetlog.log._native import decode_snapshot_body
from offsetlog.log.framing import encode_payload

log = logging.getLogger("offsetlog.snapshot")

MAGIC = b"OLSN"
#: the snapshot format this code writes and reads; any other is discarded
VERSION = 1
#: magic, version, flags, partition, offset, records, created_ms, segment base, position,
#: body length, body crc, header crc (of the 60 bytes before it); all little-endian
HEADER = struct.Struct("<4sHHIqqqqqIII")
HEADER_SIZE = HEADER.size  # 64


class SnapshotHeader(NamedTuple):
    """The fields of ``HEADER``, in order (docs/FORMAT.md, "Snapshots")."""

    magic: bytes
    version: int
    flags: int
    partition: int
    next_offset: int  # the log offset the snapshot's table has replayed up to
    records_applied: int
    created_ms: int
    segment_base: int  # where the tail replay resumes: segment, -1 if none
    segment_position: int  # ... and byte position in it
    body_length: int
    body_crc: int
    header_crc: int
_CRC_COVERED = HEADER_SIZE - 4
DB_NAME = b"snapshots"
#: first LMDB map size; doubled whenever a write finds the map full
INITIAL_MAP_SIZE = 64 * 1024 * 1024
#: steps at which a fault hook is called (tests raise or kill there)
STEPS = ("before-write", "in-transaction")

FaultHook = Callable[[str], None]


class SnapshotInvalid(Exception):
    """A snapshot that must be discarded; ``str()`` is the reason, for the log and reports."""


@dataclass(frozen=True)
class Snapshot:
    partition: int
    offset: int  # the table is "as of" this log offset: replay resumes here
    records: int  # records the table had applied (OffsetTable.records_applied)
    created_ms: int
    #: (segment base offset, byte position) where the batch at ``offset`` starts (or would
    #: start) in the segment that was active when the snapshot was taken; None if unknown
    position: tuple[int, int] | None
    state: dict  # the decoded body: OffsetTable.snapshot_state()
    size: int  # bytes of the whole entry


def partition_key(partition: int) -> bytes:
    return partition.to_bytes(4, "big")


def encode(partition: int, state: dict, *, created_ms: int,
           position: tuple[int, int] | None = None) -> bytes:
    """Header + body for one partition's snapshot of ``state`` (``snapshot_state()``)."""
    body = encode_payload(state)  # the native msgpack encoder (msgpack.packb's bytes)
    base, pos = position if position is not None else (-1, -1)
    header = HEADER.pack(MAGIC, VERSION, 0, partition, state["next_offset"],
                         state["records_applied"], created_ms, base, pos, len(body),
                         zlib.crc32(body), 0)
    crc = zlib.crc32(header[:_CRC_COVERED])
    return header[:_CRC_COVERED] + crc.to_bytes(4, "little") + body


def decode_header(data: bytes, partition: int) -> SnapshotHeader:
    """The checked header fields of an entry stored under ``partition``.

    :raises SnapshotInvalid: with the reason
    """
    if len(data) < 6 or data[:4] != MAGIC:
        raise SnapshotInvalid("not a snapshot (bad magic)")
    version = int.from_bytes(data[4:6], "little")
    if version != VERSION:
        raise SnapshotInvalid(f"snapshot format version {version}, this version reads {VERSION}")
    if len(data) < HEADER_SIZE:
        raise SnapshotInvalid(f"truncated header ({len(data)} bytes)")
    h = SnapshotHeader._make(HEADER.unpack_from(data))
    if zlib.crc32(data[:_CRC_COVERED]) != h.header_crc:
        raise SnapshotInvalid("header checksum mismatch")
    if h.flags != 0:
        raise SnapshotInvalid(f"unknown flags {h.flags:#x}")
    if h.partition != partition:
        raise SnapshotInvalid(f"snapshot of partition {h.partition} stored under partition "
                              f"{partition}")
    if h.next_offset < 0 or h.records_applied < 0:
        raise SnapshotInvalid(f"negative offset {h.next_offset} or record count "
                              f"{h.records_applied}")
    if len(data) != HEADER_SIZE + h.body_length:
        raise SnapshotInvalid(f"body is {len(data) - HEADER_SIZE} bytes, header says "
                              f"{h.body_length}")
    return h


def decode(data: bytes, partition: int, *, partitions: int | None = None) -> Snapshot:
    """Check and decode one entry (stored under ``partition`` of a store with ``partitions``
    log partitions, when given: what open and ``offsetlog.recovery.tools.inspect`` both accept).

    :raises SnapshotInvalid: a partition the store does not have, bad magic, another format
        version, a header or body checksum mismatch, another partition, a body that does not
        decode or disagrees with the header
    """
    if partitions is not None and not 0 <= partition < partitions:
        raise SnapshotInvalid(f"no such partition (the store has {partitions})")
    h = decode_header(data, partition)
    body = memoryview(data)[HEADER_SIZE:]
    if zlib.crc32(body) != h.body_crc:
        raise SnapshotInvalid("body checksum mismatch")
    try:
        # natively; its offsets section comes back as the table's dict of dicts already
        # (OffsetTable.from_snapshot_state takes either form)
        state = decode_snapshot_body(bytes(body))
    except Exception as e:  # CRC passed, so this is a writer bug or a foreign body
        raise SnapshotInvalid(f"undecodable body ({e})") from None
    if not isinstance(state, dict):
        raise SnapshotInvalid("body is not a map of sections")
    if (state.get("next_offset") != h.next_offset
            or state.get("records_applied") != h.records_applied):
        raise SnapshotInvalid("body disagrees with the header on offset or record count")
    position = ((h.segment_base, h.segment_position)
                if h.segment_base >= 0 and h.segment_position >= 0 else None)
    return Snapshot(h.partition, h.next_offset, h.records_applied, h.created_ms, position,
                    state, len(data))


# -- the LMDB environment ------------------------------------------------------------------

#: the files of an LMDB environment (``subdir=True``)
LMDB_FILES = ("data.mdb", "lock.mdb")


class EmptyEnvironmentError(lmdb.Error):
    """``data.mdb`` exists but holds nothing: LMDB would silently start a new, empty
    environment over it, and the snapshots it held would vanish without a word. Raised as an
    ``lmdb.Error`` so callers discard (and report) it like any environment that does not
    open."""


def check_environment(path: str) -> None:
    """Refuse what LMDB would follow or silently replace: the environment directory or one of
    its files being a symbolic link (LMDB cannot be given ``O_NOFOLLOW``), and an empty
    ``data.mdb`` (a crash while it was created, or a file emptied by hand).

    :raises SymlinkError: a link
    :raises EmptyEnvironmentError: an empty ``data.mdb``
    """
    if not os.path.lexists(path):
        return
    segment.check_dir(path)
    for name in LMDB_FILES:
        segment.check_not_symlink(os.path.join(path, name))
    data = os.path.join(path, LMDB_FILES[0])
    if os.path.lexists(data) and os.lstat(data).st_size == 0:
        raise EmptyEnvironmentError(f"{data} is empty (0 bytes)")


class SnapshotStore:
    """The LMDB environment of one store's snapshots.

    Writes are serialised by an internal lock (growing the map needs no transaction open).
    LMDB commits with ``fsync`` (``sync=True``, ``metasync=True``): a put that returned is
    durable.

    :param readonly: for tools (``offsetlog verify``): never writes, and does without LMDB's
        lock file when it cannot write one
    """

    def __init__(self, path: str, *, readonly: bool = False,
                 map_size: int = INITIAL_MAP_SIZE) -> None:
        self.path = path
        self.readonly = readonly
        self._lock = threading.Lock()
        check_environment(path)
        if readonly:
            try:
                if not _lock_file_writable(path):
                    # No lock file: no store has this open (opening one creates it); a
                    # read-only one: a read-only copy. Read without LMDB's lock rather than
                    # create or write one (``offsetlog verify`` changes nothing).
                    raise lmdb.Error("read without the lock file")
                self.env = lmdb.open(path, subdir=True, readonly=True, create=False,
                                     max_dbs=1, lock=True)
            except lmdb.Error:
                self.env = lmdb.open(path, subdir=True, readonly=True, create=False,
                                     max_dbs=1, lock=False)
            try:
                self.db = self.env.open_db(DB_NAME, create=False)
            except lmdb.NotFoundError:
                self.db = None  # created but never written
        else:
            segment.make_dir(path)  # never group/world-writable; refuses a link
            self.env = lmdb.open(path, subdir=True, map_size=map_size, max_dbs=1,
                                 sync=True, metasync=True, mode=segment.FILE_MODE)
            self.db = self.env.open_db(DB_NAME)

    def read_all(self) -> dict[int, bytes]:
        """partition -> the stored bytes, for every entry (keys that are not 4 bytes are
        returned under -1 - index, so the caller discards them with a reason)."""
        if self.db is None:
            return {}
        out: dict[int, bytes] = {}
        with self.env.begin(db=self.db) as txn:
            for i, (key, value) in enumerate(txn.cursor()):
                p = int.from_bytes(key, "big") if len(key) == 4 else -1 - i
                out[p] = bytes(value)
        return out

    def keys(self) -> list[bytes]:
        if self.db is None:
            return []
        with self.env.begin(db=self.db) as txn:
            return [bytes(k) for k in txn.cursor().iternext(keys=True, values=False)]

    def put(self, partition: int, data: bytes, fault_hook: FaultHook | None = None) -> None:
        """Replace ``partition``'s snapshot with ``data`` in one write transaction."""
        hook = fault_hook or (lambda step: None)
        with self._lock:
            hook("before-write")

            def write(txn) -> None:
                txn.put(partition_key(partition), data)
                hook("in-transaction")

            self._write(write)

    def delete(self, keys: list[bytes]) -> None:
        """Delete these entries in one write transaction."""
        if not keys:
            return
        with self._lock:
            self._write(lambda txn: [txn.delete(k) for k in keys])

    def clear(self) -> None:
        """Delete every entry in one write transaction."""
        with self._lock:
            self._write(lambda txn: txn.drop(self.db, delete=False))

    def _write(self, body: Callable) -> None:
        while True:
            try:
                with self.env.begin(db=self.db, write=True) as txn:
                    body(txn)
                return
            except lmdb.MapFullError:
                # The transaction was aborted; nothing was written. Grow and try again.
                size = self.env.info()["map_size"] * 2
                log.info("%s: snapshot map full, growing it to %d bytes", self.path, size)
                self.env.set_mapsize(size)

    def close(self) -> None:
        self.env.close()


def _lock_file_writable(path: str) -> bool:
    """Whether LMDB's lock file exists with a write bit set (the mode, not ``os.access``:
    root may write any file, but a tree made read-only is meant to stay as it is)."""
    try:
        return bool(os.stat(os.path.join(path, "lock.mdb")).st_mode & 0o222)
    except FileNotFoundError:
        return False


def tombstone_floors(snapshot_dir: str) -> dict[int, int]:
    """partition -> the offset at and above which a cleaner must keep tombstones, for every
    snapshot stored in ``snapshot_dir`` (0 for an entry whose header does not check out: it
    may be a newer format this code cannot read). For tools that rewrite a log offline; the
    store keeps its own floors. Empty if there is no snapshot store."""
    if not os.path.isdir(snapshot_dir):
        return {}
    store = SnapshotStore(snapshot_dir, readonly=True)
    try:
        entries = store.read_all()
    finally:
        store.close()
    out = {}
    for p, data in entries.items():
        try:
            out[p] = decode_header(data, p).next_offset
        except SnapshotInvalid:
            out[p] = 0
    return out


__all__ = ["HEADER", "HEADER_SIZE", "MAGIC", "Snapshot", "SnapshotHeader", "SnapshotInvalid",
           "SnapshotStore", "VERSION", "decode", "decode_header", "encode", "partition_key",
           "tombstone_floors"]
