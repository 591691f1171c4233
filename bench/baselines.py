"""The baselines: the least a program must do to get each result, without offsetlog's engine.

Each is what the project's issues name, written plainly and fairly (no deliberately slow
code): the bare ``write`` + ``fsync`` loop, threads that ``write`` + ``fsync`` under one lock,
threads that each write their own file with one ``RWF_DSYNC`` write per commit (or share files
as the engine's groups share log partitions), sqlite3 in WAL
mode with ``synchronous=FULL``, the same threads with the native core's pieces of a commit
around each write (the floor of a wholly native commit path), issue 16's lean pipeline (pack + CRC + frame per record, dict,
1 000-record chunks to a writer thread) and lean replay loop, a bare replay loop over the
engine's own format, and (in ``memory_child``) a plain dict.
"""

from __future__ import annotations

import os
import queue
import sqlite3
import struct
import sys
import threading
import time
import zlib
from collections.abc import Callable

import msgpack

from offsetlog.bench.common import run_threads
from offsetlog.bench.workload import (
    FIRST_OFFSET,
    GROUP,
    TOPIC,
    LeanWriter,
    many_group,
    many_partition,
    now_ms,
    thread_group,
    thread_partitions,
)
from offsetlog.log import format as fmt
from offsetlog.log import naming
from offsetlog.log._native import KeyCache, apply_fields, frame_fields, plain_commit_fields
from offsetlog.log.format import CRC_START, HEADER_SIZE, LENGTH_SIZE
from offsetlog.log.records import KEYS_CACHED, PLAIN_COMMIT_BOUND, commit_entry
from offsetlog.types import OffsetAndMetadata, TopicPartition

#: the batch header as this baseline reads it, from docs/FORMAT.md (the engine's reader is
#: native; the baselines are Python loops of their own)
BATCH_HEADER = struct.Struct("<IIIBBqIIqqh")


def _append_fd(path: str) -> int:
    return os.open(path, os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o644)


# -- 1. latency: one append + fsync ------------------------------------------------------------

def bare_append_fsync(path: str, data: bytes) -> tuple[Callable[[], None], Callable[[], None]]:
    """``(op, close)``: op appends ``data`` to ``path`` with ``os.write`` and ``os.fsync``s."""
    fd = _append_fd(path)
    write, fsync = os.write, os.fsync

    def op() -> None:
        write(fd, data)
        fsync(fd)

    return op, lambda: os.close(fd)


def bare_append_dsync(directory: str, data: bytes) -> tuple[Callable[[], None],
                                                          Callable[[], None]]:
    """``(op, close)``: op appends ``data`` to a preallocated file of ``directory`` with one
    ``pwritev(..., RWF_DSYNC)`` (write + fdatasync where the flag is missing), as the engine
    writes a commit into its active segment's reserve: issue 25's latency floor."""
    fd = _own_file(directory, 0)
    dsync = getattr(os, "RWF_DSYNC", None)
    size, limit, state = len(data), OWN_FILE_BYTES - len(data), [0]
    pwritev, buffers = os.pwritev, [data]

    def op() -> None:
        pos = state[0]
        if dsync is None:
            os.pwrite(fd, data, pos)
            os.fdatasync(fd)
        else:
            pwritev(fd, buffers, pos, dsync)
        state[0] = pos + size if pos < limit else 0

    return op, lambda: os.close(fd)


# -- 2. throughput: N threads ------------------------------------------------------------------

def lock_fsync_threads(path: str, n: int, data: bytes, **window) -> float:
    """Commits/s of ``n`` threads that each ``write`` + ``fsync`` ``data`` under one lock."""
    fd = _append_fd(path)
    lock = threading.Lock()
    write, fsync = os.write, os.fsync

    def make_op(i: int):
        def op() -> None:
            with lock:
                write(fd, data)
                fsync(fd)
        return op, lambda: None

    try:
        calls, ns = run_threads(n, make_op, **window)
    finally:
        os.close(fd)
    return calls / (ns / 1e9)


#: bytes each thread of ``own_file_dsync_threads`` preallocates (it wraps around past them)
OWN_FILE_BYTES = 8 << 20


def own_file_dsync_threads(directory: str, n: int, data: bytes, *,
                           files: Callable[[int], int] | None = None, **window) -> float:
    """Commits/s of ``n`` threads that each write ``data`` to a preallocated file of their own
    with one ``pwritev(..., RWF_DSYNC)`` per commit (issue 16): what the disk allows when no
    two committers share anything. No lock, no framing, no table.

    Each file is ``posix_fallocate``d as the engine's active segment is (writes land in
    reserved, never-written space, as the engine's do); a thread that reaches its end wraps
    around to the start. ``files``: see ``_Files`` (threads that share a file, as the
    case's groups that share a log partition do).
    """
    dsync = getattr(os, "RWF_DSYNC", None)
    size = len(data)
    opened = _Files(directory, n, files)

    def make_op(i: int):
        fd, place, lock = opened.of[i]
        pwritev, buffers, limit = os.pwritev, [data], OWN_FILE_BYTES - size
        take = None if lock is None else _taker(place, lock, limit)

        def op() -> None:
            if take is None:
                pos = place[0]
                place[0] = pos + size if pos < limit else 0
            else:
                pos = take(size)
            if dsync is None:  # no pwritev2 here: write + fdatasync, as the engine falls back
                os.pwrite(fd, data, pos)
                os.fdatasync(fd)
            else:
                pwritev(fd, buffers, pos, dsync)

        return op, lambda: None

    try:
        calls, ns = run_threads(n, make_op, **window)
    finally:
        opened.close()
    return calls / (ns / 1e9)


def _own_file(directory: str, i: int) -> int:
    """Thread ``i``'s file, open for writing and preallocated (``OWN_FILE_BYTES``)."""
    fd = os.open(os.path.join(directory, f"own-{i}.log"), os.O_WRONLY | os.O_CREAT, 0o644)
    os.posix_fallocate(fd, 0, OWN_FILE_BYTES)
    return fd


class _Files:
    """The files ``n`` threads write: one each, unless ``files`` (thread -> file number) gives
    one to several. Threads that share a file append to it side by side, each taking its
    write position under the file's lock and writing outside it, as the engine's commits in
    one log partition do (a commit that finds another writing follows it: its write beside
    the first). Opened and preallocated before the threads start; ``close`` closes them."""

    def __init__(self, directory: str, n: int, files: Callable[[int], int] | None) -> None:
        numbers = [files(i) if files is not None else i for i in range(n)]
        by_number: dict[int, tuple[int, list[int], threading.Lock | None]] = {}
        for k in numbers:
            if k not in by_number:
                shared = threading.Lock() if numbers.count(k) > 1 else None
                by_number[k] = (_own_file(directory, k), [0], shared)
        #: thread i's ``(descriptor, [next write position], lock or None: its own file)``
        self.of = [by_number[k] for k in numbers]
        self._fds = [fd for fd, _, _ in by_number.values()]

    def close(self) -> None:
        for fd in self._fds:
            os.close(fd)


def _taker(place: list[int], lock: threading.Lock, limit: int) -> Callable[[int], int]:
    """For a shared file (``_Files``): take the next ``size`` bytes' position under ``lock``
    (wrapping around past ``limit`` as a thread's own file does)."""
    def take(size: int) -> int:
        with lock:
            pos = place[0]
            place[0] = pos + size if pos < limit else 0
            return pos
    return take


def own_file_python_threads(directory: str, n: int, *, spin_us: float = 0.0,
                            files: Callable[[int], int] | None = None, **window) -> float:
    """``own_file_dsync_threads`` with the least Python a commit can cost before its write:
    thread k's record (group-k, partition k % 8, as the engine's many-groups case) packed
    with msgpack, CRC'd and framed as the lean pipeline does, and put in a dict all threads
    share; then ``spin_us`` more microseconds of plain bytecode. ``files``: see ``_Files``.

    What it shows: how much of the disk's headroom survives once each commit holds the GIL
    for a few microseconds. The engine's commit holds it for ~6.5 us when hot (one thread,
    tmpfs) and about twice that when 32 threads take turns.
    """
    spins = _spins_for(spin_us)
    table: dict = {}
    dsync = getattr(os, "RWF_DSYNC", None)
    opened = _Files(directory, n, files)

    def make_op(i: int):
        fd, place, lock = opened.of[i]
        pack = msgpack.Packer(use_bin_type=True).pack
        header, crc32 = LeanWriter.HEADER.pack, zlib.crc32
        key = (many_group(i), TOPIC, many_partition(i))
        state = [FIRST_OFFSET]
        limit = OWN_FILE_BYTES - 256
        take = None if lock is None else _taker(place, lock, limit)

        def op() -> None:
            value = (state[0], "", None, now_ms(), None)
            payload = pack((key, value))
            frame = header(len(payload), crc32(payload)) + payload
            for _ in range(spins):
                pass
            if take is None:
                pos = place[0]
                place[0] = pos + len(frame) if pos < limit else 0
            else:
                pos = take(len(frame))
            if dsync is None:
                os.pwrite(fd, frame, pos)
                os.fdatasync(fd)
            else:
                os.pwritev(fd, [frame], pos, dsync)
            table[key] = value
            state[0] += 1

        return op, lambda: None

    try:
        calls, ns = run_threads(n, make_op, **window)
    finally:
        opened.close()
    return calls / (ns / 1e9)


def own_file_native_threads(directory: str, n: int, **window) -> float:
    """``own_file_dsync_threads`` with the native core's pieces of a commit around each write,
    in one Python function per commit: the usual call's checks and record fields
    (``plain_commit_fields``), its batch (``frame_fields``), the write, and its apply into a
    dict all threads share (``apply_fields``). No queue, no lock, no routing or fencing, no
    store: what a commit path would cost that held the GIL for nothing but these, the floor
    of a commit path moved wholly into the native core (issue 25's next step)."""
    table: dict = {}
    dsync = getattr(os, "RWF_DSYNC", None)

    def make_op(i: int):
        fd = _own_file(directory, i)
        group, tp = many_group(i), TopicPartition(TOPIC, many_partition(i))
        keys = KeyCache(KEYS_CACHED)
        state = [0, FIRST_OFFSET]
        limit = OWN_FILE_BYTES - 256
        intern = sys.intern

        def op() -> None:
            offset = state[1]
            fields, _ = plain_commit_fields(group, {tp: offset}, now_ms(), keys,
                                            PLAIN_COMMIT_BOUND, 0,  # (no metadata here)
                                            TopicPartition, OffsetAndMetadata)
            frame = frame_fields(offset, 0, (fields,))
            pos = state[0]
            if dsync is None:
                os.pwrite(fd, frame, pos)
                os.fdatasync(fd)
            else:
                os.pwritev(fd, [frame], pos, dsync)
            apply_fields(table, fields, intern)
            state[0] = pos + len(frame) if pos < limit else 0
            state[1] = offset + 1

        return op, lambda: os.close(fd)

    calls, ns = run_threads(n, make_op, **window)
    return calls / (ns / 1e9)


def _spins_for(us: float) -> int:
    """Iterations of an empty ``for`` loop that take ``us`` microseconds here."""
    if us <= 0:
        return 0
    n = 200_000
    t0 = time.perf_counter()
    for _ in range(n):
        pass
    per = (time.perf_counter() - t0) / n
    return max(1, round(us * 1e-6 / per))


_SQLITE_SCHEMA = """
CREATE TABLE IF NOT EXISTS offsets (
    grp TEXT NOT NULL, topic TEXT NOT NULL, part INTEGER NOT NULL,
    off INTEGER NOT NULL, meta TEXT NOT NULL, epoch INTEGER,
    commit_ts INTEGER NOT NULL, expire_ts INTEGER,
    PRIMARY KEY (grp, topic, part)
) WITHOUT ROWID
"""
_SQLITE_UPSERT = """
INSERT INTO offsets (grp, topic, part, off, meta, epoch, commit_ts, expire_ts)
VALUES (?, ?, ?, ?, ?, ?, ?, ?)
ON CONFLICT (grp, topic, part) DO UPDATE SET
    off = excluded.off, meta = excluded.meta, epoch = excluded.epoch,
    commit_ts = excluded.commit_ts, expire_ts = excluded.expire_ts
"""


def sqlite_threads(path: str, n: int, *, one_group: bool = True, many_groups: bool = False,
                   **window) -> float:
    """Commits/s of ``n`` threads, each with its own connection to one sqlite3 file.

    WAL journal, ``synchronous=FULL`` (fsync on every commit), autocommit: one upsert per
    transaction. Each thread commits its own partitions, as the offsetlog threads do
    (``many_groups``: thread k commits ``group-k``, partition ``k % 8``). The busy
    timeout is long so that contention waits instead of failing. ``window``: see
    ``run_threads``.
    """
    setup = sqlite3.connect(path, isolation_level=None)
    setup.execute("PRAGMA journal_mode=WAL")
    setup.execute(_SQLITE_SCHEMA)
    setup.close()

    def make_op(i: int):
        conn = sqlite3.connect(path, timeout=120, isolation_level=None,
                               check_same_thread=True)
        conn.execute("PRAGMA synchronous=FULL")  # per connection
        execute = conn.execute
        if many_groups:
            group, parts = many_group(i), [many_partition(i)]
        else:
            group, parts = thread_group(i, one_group=one_group), thread_partitions(i)
        state = [FIRST_OFFSET]

        def op() -> None:
            off = state[0]
            state[0] = off + 1
            execute(_SQLITE_UPSERT, (group, TOPIC, parts[off % len(parts)], off, "", None,
                                     now_ms(), None))

        return op, conn.close

    calls, ns = run_threads(n, make_op, **window)
    return calls / (ns / 1e9)


# -- 3. async: the lean pipeline ---------------------------------------------------------------

def lean_pipeline(path: str, n_records: int, keys: list[tuple[str, int]], *,
                  chunk: int = 1000) -> tuple[float, dict]:
    """Records/s of the lean two-thread pipeline of issue 16, with nothing else in it.

    The calling thread, per record: msgpack-packs ``(key, value)``, takes its CRC-32, frames
    it (``length u32 | crc u32`` + payload) and puts the value in a dict; every ``chunk``
    framed records go, joined, to a writer thread that writes and fsyncs them. The clock stops
    when the last chunk is durable.

    :return: (records/s, the dict)
    """
    fd = _append_fd(path)
    handoff: queue.SimpleQueue = queue.SimpleQueue()
    write, fsync = os.write, os.fsync

    def writer() -> None:
        while True:
            data = handoff.get()
            if data is None:
                return
            view = memoryview(data)
            while view:
                view = view[write(fd, view):]
            fsync(fd)

    table: dict = {}
    t = threading.Thread(target=writer, name="lean-pipeline-writer", daemon=True)
    t.start()
    nkeys = len(keys)
    group = GROUP
    put = handoff.put
    pack = msgpack.Packer(use_bin_type=True).pack
    header = LeanWriter.HEADER.pack
    crc32 = zlib.crc32
    try:
        t0 = time.perf_counter_ns()
        buf: list[bytes] = []
        append = buf.append
        for i in range(n_records):
            topic, partition = keys[i % nkeys]
            key = (group, topic, partition)
            value = (FIRST_OFFSET + i, "", None, now_ms(), None)
            payload = pack((key, value))
            append(header(len(payload), crc32(payload)) + payload)
            table[key] = value
            if len(buf) == chunk:
                put(b"".join(buf))
                buf = []
                append = buf.append
        if buf:
            put(b"".join(buf))
        put(None)
        t.join()
        elapsed = time.perf_counter_ns() - t0
    finally:
        put(None)
        t.join()
        os.close(fd)
    return n_records / (elapsed / 1e9), table


# -- 4. recovery: the lean replay loop and a bare loop over the engine's format -----------------------------------------------------------

def lean_replay(path: str) -> tuple[int, int, dict]:
    """The lean replay loop of issue 16 over a ``workload.LeanWriter`` file: read it, check
    each chunk's CRC, unpack its ``(key, value)`` pairs and put them in a dict.

    :return: (records, chunks, dict)
    """
    with open(path, "rb") as f:
        data = f.read()
    mv = memoryview(data)
    unpack = LeanWriter.HEADER.unpack_from
    crc32, unpackb = zlib.crc32, msgpack.unpackb
    table: dict = {}
    records = chunks = pos = 0
    end = len(data)
    while pos + 8 <= end:
        length, crc = unpack(mv, pos)
        stop = pos + 8 + length
        payload = mv[pos + 8:stop]
        if stop > end or crc32(payload) != crc:
            break
        pairs = unpackb(payload, use_list=False, raw=False)
        table.update(pairs)
        records += len(pairs)
        chunks += 1
        pos = stop
    return records, chunks, table


def bare_replay(root: str) -> tuple[int, int, dict]:
    """Read every segment of a store directory, CRC-check and decode each batch into a dict.

    The dict is flat: ``{(group, topic, partition): (offset, metadata, leader_epoch,
    commit_timestamp, expire_timestamp)}``; a tombstone deletes. The checks are the batch's
    checksums and nothing else: the header CRC (bytes 0-3 and ``CRC_START``..``HEADER_SIZE``)
    and the payload CRC where the format has both, or the one CRC over ``CRC_START``..end in
    the single-checksum layout. Group and topic strings are interned: measured, that is faster
    than keeping every decoded copy (fewer live objects for the garbage collector to walk), so
    it is the stronger baseline.

    :return: (records, batches, dict)
    """
    unpack = BATCH_HEADER.unpack_from
    crc32 = zlib.crc32
    unpackb = msgpack.unpackb
    intern = sys.intern
    two_crcs = hasattr(fmt, "PAYLOAD_CRC_AT")  # header CRC + payload CRC (format 1, rev. 2)
    count_at = 7 if two_crcs else 6
    hsize, lsize, cstart = HEADER_SIZE, LENGTH_SIZE, CRC_START
    table: dict = {}
    records = batches = 0
    for _, pdir in naming.list_partition_dirs(root):
        for _, path in naming.list_segments(pdir):
            with open(path, "rb") as f:
                data = f.read()
            mv = memoryview(data)
            pos, end = 0, len(data)
            while pos + hsize <= end:
                h = unpack(mv, pos)
                stop = pos + lsize + h[0]
                if stop > end:
                    break  # torn tail
                if two_crcs:
                    if (crc32(mv[pos + cstart:pos + hsize], crc32(mv[pos:pos + lsize])) != h[1]
                            or crc32(mv[pos + hsize:stop]) != h[2]):
                        break
                elif crc32(mv[pos + cstart:stop]) != h[1]:
                    break
                for _, _, version, key, value in unpackb(mv[pos + hsize:stop],
                                                         use_list=False, raw=False):
                    if version:  # OFFSET_COMMIT version 1: fields by position
                        group, topic, partition = key
                        k = (intern(group), intern(topic), partition)
                        if value is None:
                            table.pop(k, None)
                        elif len(value) == 2:
                            table[k] = (value[0], "", None, value[1], None)
                        else:
                            table[k] = commit_entry(version, value)
                        continue
                    k = (intern(key["group"]), intern(key["topic"]), key["partition"])
                    if value is None:
                        table.pop(k, None)
                    else:
                        table[k] = (value["offset"], value.get("metadata", ""),
                                    value.get("leader_epoch"), value["commit_timestamp"],
                                    value.get("expire_timestamp"))
                records += h[count_at]
                batches += 1
                pos = stop
    return records, batches, table
