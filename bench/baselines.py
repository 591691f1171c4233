"""The baselines: the least a program must do to get each result, without offsetlog's engine.

Each is what the project's issue names, written plainly and fairly (no deliberately slow
code): the bare ``write`` + ``fsync`` loop, threads that ``write`` + ``fsync`` under one lock,
sqlite3 in WAL mode with ``synchronous=FULL``, a two-thread encode/write pipeline, a bare replay
loop, and (in ``memory_child``) a plain dict.
"""

from __future__ import annotations

import os
import queue
import sqlite3
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
    now_ms,
    thread_group,
    thread_partitions,
)
from offsetlog.log import format as fmt
from offsetlog.log import naming
from offsetlog.log.format import BATCH_HEADER, CRC_START, HEADER_SIZE, LENGTH_SIZE
from offsetlog.log.framing import encode_batch
from offsetlog.log.records import offset_commit


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


def writer_thread_threads(path: str, n: int, **window) -> float:
    """Commits/s of ``n`` threads over a plain writer-thread group commit (a reference design).

    Not a target baseline: the issue quotes this design's ratios over lock+fsync (about 3.5x
    at 8 threads, 6.5x at 32), so measuring it in the same run shows what the machine allows
    at that moment. Each committer frames its record (``encode_batch``), queues it with a
    locked lock and blocks on that lock; one writer thread takes everything queued, writes
    it with one ``write``, ``fdatasync``s once, applies the entries to a dict and releases
    the committers. No validation, no futures, no per-key ordering rules.
    """
    fd = _append_fd(path)
    pending: list = []
    cv = threading.Condition()
    stop = [False]
    table: dict = {}
    sync = getattr(os, "fdatasync", os.fsync)

    def writer() -> None:
        while True:
            with cv:
                while not pending and not stop[0]:
                    cv.wait()
                if not pending:
                    return
                batch = pending[:]
                pending.clear()
            os.write(fd, b"".join(item[0] for item in batch))
            sync(fd)
            for _, key, entry, done in batch:
                table[key] = entry
                done.release()

    wt = threading.Thread(target=writer, name="reference-writer", daemon=True)
    wt.start()

    def make_op(i: int):
        group = GROUP
        parts = thread_partitions(i)
        state = [FIRST_OFFSET]
        Lock = threading.Lock

        def op() -> None:
            off = state[0]
            state[0] = off + 1
            p = parts[off % len(parts)]
            ts = now_ms()
            data = encode_batch(0, (offset_commit(0, group, TOPIC, p, off, commit_timestamp=ts),),
                                timestamp=ts)
            done = Lock()
            done.acquire()
            with cv:
                pending.append((data, (group, TOPIC, p), (off, "", None, ts, None), done))
                cv.notify()
            done.acquire()

        return op, lambda: None

    try:
        calls, ns = run_threads(n, make_op, **window)
    finally:
        with cv:
            stop[0] = True
            cv.notify()
        wt.join()
        os.close(fd)
    return calls / (ns / 1e9)


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


def sqlite_threads(path: str, n: int, *, one_group: bool = True, **window) -> float:
    """Commits/s of ``n`` threads, each with its own connection to one sqlite3 file.

    WAL journal, ``synchronous=FULL`` (fsync on every commit), autocommit: one upsert per
    transaction. Each thread commits its own partitions, as the offsetlog threads do. The busy
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
        group = thread_group(i, one_group=one_group)
        parts = thread_partitions(i)
        state = [FIRST_OFFSET]

        def op() -> None:
            off = state[0]
            state[0] = off + 1
            execute(_SQLITE_UPSERT, (group, TOPIC, parts[off % len(parts)], off, "", None,
                                     now_ms(), None))

        return op, conn.close

    calls, ns = run_threads(n, make_op, **window)
    return calls / (ns / 1e9)


# -- 3. async: a bare encode -> write+fsync pipeline -------------------------------------------

def bare_pipeline(path: str, n_records: int, keys: list[tuple[str, int]], *,
                  chunk: int = 1000) -> tuple[float, dict]:
    """Records/s of a two-thread pipeline with nothing else in it.

    The calling thread builds each record, frames it with offsetlog's own ``encode_batch``
    (msgpack + CRC + header, one batch per record), applies it to a dict and hands every
    ``chunk`` framed records to a writer thread, which writes and fsyncs each chunk. The clock
    stops when the last chunk is durable.

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
    t = threading.Thread(target=writer, name="bare-pipeline-writer", daemon=True)
    t.start()
    nkeys = len(keys)
    group = GROUP
    put = handoff.put
    try:
        t0 = time.perf_counter_ns()
        buf: list[bytes] = []
        for i in range(n_records):
            topic, partition = keys[i % nkeys]
            offset = FIRST_OFFSET + i
            ts = now_ms()
            rec = offset_commit(0, group, topic, partition, offset, commit_timestamp=ts)
            buf.append(encode_batch(i, (rec,), timestamp=ts))
            table[(group, topic, partition)] = (offset, "", None, ts, None)
            if len(buf) == chunk:
                put(b"".join(buf))
                buf = []
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


# -- 4. recovery: a bare replay loop -----------------------------------------------------------

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
                for _, _, _, key, value in unpackb(mv[pos + hsize:stop], use_list=False,
                                                   raw=False):
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
