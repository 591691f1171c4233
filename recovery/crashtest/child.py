"""The process the crash-test harness (recovery/crashtest/harness.py) starts and kills with SIGKILL.

Usage: ``python -m offsetlog.recovery.crashtest.child CONFIG_JSON`` (the harness builds the JSON).

It opens the store with the user's options, writes ``READY`` to the ack file, and runs a
workload in ``threads`` threads until it is killed. A workload is a function
``workload(ctx: WorkloadContext)``: the built-in :func:`committer`, or any importable
``"module:function"``. It calls ``ctx.ack(group, offsets)`` for every commit *once it is
durable* (after ``commit_sync`` returned, or in the ``commit_async`` callback without an
error); the harness then checks that every acknowledged commit survived the kill.

Besides the workload, the child can:

* run ``store.compact()`` in a loop on its own thread, so kills land in the middle of cleaning;
* kill itself with SIGKILL at a chosen step of a cleaner swap (``kill_at_step``), so every
  step of the swap protocol is hit over the cycles;
* log every successful data sync so the harness knows which bytes were durable and may drop
  any of the rest (a power cut): ``SYNC <path> <size>`` after an ``fdatasync`` (every byte
  before ``size``), ``DSYNC <path> <start> <end>`` after a combined ``pwritev(RWF_DSYNC)``
  write (only the bytes it wrote: a commit that follows a lone commit's write can be durable
  before it, docs/DESIGN.md).

Ack file lines, each written with one ``write`` so a line is whole or absent::

    READY
    ACK <json [group, [[topic, partition, offset], ...]]>
    STEP <swap step>          just before the self-kill at that step
    ERROR <text>              a background operation (compaction) raised
"""

from __future__ import annotations

import importlib
import json
import os
import random
import signal
import sys
import threading
import time
import traceback
from dataclasses import dataclass
from typing import Callable, Mapping

from offsetlog import OffsetAndMetadata, OffsetStore, TopicPartition
from offsetlog.log import segment

#: keys per thread of the built-in committer: TopicPartition(f"t{thread}", 0..5)
TOPIC_PARTITIONS = 6
#: async commits a built-in committer thread keeps in flight at most
ASYNC_WINDOW = 16


def group_of(thread: int, groups: int) -> str:
    """The group the built-in committer's thread ``thread`` commits for."""
    return f"crash-group-{thread % groups}"


def call_keys(seed: int, thread: int, seq: int) -> list[TopicPartition]:
    """The keys of thread ``thread``'s call ``seq``: its progress key ``t<thread>/0`` plus a
    seeded subset of its other keys (so calls differ in size and the checker can tell a
    half-applied call from a whole one)."""
    rng = random.Random(f"{seed}:{thread}:{seq}")
    others = [p for p in range(1, TOPIC_PARTITIONS) if rng.random() < 0.5]
    return [TopicPartition(f"t{thread}", p) for p in [0, *others]]


@dataclass
class WorkloadContext:
    """What a workload gets: the open store and a way to say "this commit is durable".

    :ivar store: the open ``OffsetStore`` (the user's options)
    :ivar thread: this thread's index, ``0 <= thread < threads``
    :ivar cycle: the crash cycle (0, 1, ...); the store holds what earlier cycles committed
    :ivar offset_base: every offset this cycle commits should be at least this, so a key's
        offsets keep growing from cycle to cycle (the harness checks they never go back)
    :ivar rng: seeded for this cycle and thread
    """

    store: OffsetStore
    thread: int
    threads: int
    groups: int
    cycle: int
    offset_base: int
    seed: int
    async_fraction: float
    rng: random.Random
    _ack: Callable[[str, Mapping], None]

    def ack(self, group: str, offsets: Mapping) -> None:
        """Record that the commit of ``offsets`` (``{TopicPartition: int | OffsetAndMetadata}``)
        to ``group`` is durable. Call it only once the store said so."""
        self._ack(group, offsets)


def committer(ctx: WorkloadContext) -> None:
    """The built-in workload: call ``seq`` (seq = offset_base, offset_base + 1, ...) commits
    offset ``seq`` to every key of ``call_keys(seed, thread, seq)``, by ``commit_sync`` or,
    with probability ``async_fraction``, by ``commit_async``."""
    store, t = ctx.store, ctx.thread
    group = group_of(t, ctx.groups)
    window = []
    seq = ctx.offset_base
    while True:
        offsets = {tp: seq for tp in call_keys(ctx.seed, t, seq)}
        if ctx.rng.random() < ctx.async_fraction:
            def callback(arg, exc, offsets=offsets):
                if exc is None:
                    ctx.ack(group, offsets)
            window.append(store.commit_async(group, offsets, callback=callback))
            if len(window) > ASYNC_WINDOW:
                window.pop(0).result()
        else:
            store.commit_sync(group, offsets)
            ctx.ack(group, offsets)
        seq += 1


def load_workload(spec: str | None) -> Callable[[WorkloadContext], None]:
    """``"package.module:function"`` -> the function (None -> the built-in committer)."""
    if not spec:
        return committer
    module, sep, name = spec.partition(":")
    if not sep or not module or not name:
        raise ValueError(f"a workload is 'module:function', not {spec!r}")
    fn = getattr(importlib.import_module(module), name)
    if not callable(fn):
        raise ValueError(f"workload {spec!r} is not callable")
    return fn


def _install_sync_log(path: str, delay_ms: float, *, write_ahead: bool = True) -> None:
    """Log every data sync that returned: ``segment._sync`` and ``SegmentFile.sync`` (``SYNC
    <path> <size>``: the fd's position, and the segment's data size) and each
    durable append the segment made itself (``SegmentFile.append_durable`` and
    ``end_durable``: a write with ``RWF_DSYNC``, or one followed by a sync), whose own bytes
    are durable once it returns (``DSYNC <path> <start> <end>``).

    The store's own write path is left as it is: under ``fsync="always"`` the usual write
    puts its batches into their segments unsynced and makes them durable in the store's
    WRITE-AHEAD file, so the power cut takes those bytes from the segments (they are not
    logged) and opening must write them back from the file; a commit that had nobody to
    share a round with is its segment's own ``RWF_DSYNC`` write, which the native core tells
    ``segment._durable_observer``, logged here. Without the file
    (``write_ahead``: the store's option) the usual write is each batch's own ``RWF_DSYNC``
    write, ``segment._write_dsync``, which is then logged in its place (and the native write
    calls it)."""
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o644)
    real = segment._sync
    file_class = segment.SegmentFile
    real_append = file_class.append_durable
    real_end = file_class.end_durable

    def logged_sync(sync_fd: int) -> None:
        if delay_ms:
            time.sleep(delay_ms / 1000.0)  # widen the window where unsynced bytes exist
        real(sync_fd)
        size = os.lseek(sync_fd, 0, os.SEEK_CUR)  # the end of the data (the file is preallocated)
        log_synced(sync_fd, "SYNC", size)

    def logged_append(self, data) -> None:
        start = self.size
        if delay_ms and data:
            # The same window as between write and fdatasync: the bytes are written (not
            # synced) first, so a kill can find them there unsynced and a power cut may take
            # them; the real call then writes the same bytes at the same place, durably.
            os.pwrite(self.fd, data, start)
            time.sleep(delay_ms / 1000.0)
        real_append(self, data)
        # what it wrote is durable, and only that: the bytes before it may be a write still
        # in flight (a follower's write can end before its predecessor's)
        log_synced(self.fd, "DSYNC", start, self.size)

    real_file_sync = file_class.sync

    def logged_file_sync(self) -> None:
        # (the segment's data size, not the fd's file position, which the usual write's
        # pwritev2 leaves behind: after a sync every byte before ``size`` is durable, those
        # the write-ahead file made durable included)
        real_file_sync(self)
        log_synced(self.fd, "SYNC", self.size)

    def logged_end(self, data, result) -> None:
        start = self.size
        real_end(self, data, result)
        log_synced(self.fd, "DSYNC", start, self.size)

    def log_synced(sync_fd: int, kind: str, *span: int) -> None:
        target = os.readlink(f"/proc/self/fd/{sync_fd}")
        os.write(fd, " ".join([kind, target, *map(str, span)]).encode() + b"\n")

    real_dsync = segment._write_dsync

    def logged_write_dsync(sync_fd: int, data, offset: int) -> int:
        if delay_ms:
            os.pwrite(sync_fd, data, offset)  # (the window, as in logged_append)
            time.sleep(delay_ms / 1000.0)
        n = real_dsync(sync_fd, data, offset)
        log_synced(sync_fd, "DSYNC", offset, offset + n)
        return n

    def logged_alone(sync_fd: int, start: int, end: int) -> None:
        log_synced(sync_fd, "DSYNC", start, end)

    segment._sync = logged_sync
    file_class.sync = logged_file_sync
    file_class.append_durable = logged_append
    file_class.end_durable = logged_end
    if not write_ahead and real_dsync is not None:
        segment._write_dsync = logged_write_dsync
    else:  # (a lone commit's own RWF_DSYNC write, where the file has it: no entry holds it)
        segment._durable_observer = logged_alone


def _encode_ack(group: str, offsets: Mapping) -> bytes:
    items = [[tp[0], tp[1], v.offset if isinstance(v, OffsetAndMetadata) else int(v)]
             for tp, v in offsets.items()]
    return b"ACK " + json.dumps([group, items], separators=(",", ":")).encode() + b"\n"


def main(config: dict) -> None:
    if config.get("sync_log"):
        _install_sync_log(config["sync_log"], config.get("sync_delay_ms") or 0,
                          write_ahead=(config.get("store_options") or {}).get("write_ahead",
                                                                             True))
    ack_fd = os.open(config["ack_file"], os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o644)

    def write_line(data: bytes) -> None:
        os.write(ack_fd, data)  # one write per line: whole or absent after a kill

    workload = load_workload(config.get("workload"))
    store = OffsetStore.open(config["dir"], **config["store_options"])
    step = config.get("kill_at_step")
    if step:
        def hook(name: str) -> None:
            if name == step:
                write_line(f"STEP {name}\n".encode())
                os.kill(os.getpid(), signal.SIGKILL)
        store._cleaning.fault_hook = hook
    write_line(b"READY\n")

    def ack(group: str, offsets: Mapping) -> None:
        write_line(_encode_ack(group, offsets))

    def background() -> None:
        snapshot = getattr(store, "snapshot", None) if config.get("snapshots") else None
        while True:
            try:
                if config.get("compaction"):
                    store.compact()
                if snapshot is not None:
                    snapshot()
            except Exception:  # reported to the harness, which counts it as a violation
                write_line(b"ERROR " + traceback.format_exc().replace("\n", " | ").encode()
                           + b"\n")
                return
            time.sleep(0.005)

    if config.get("compaction") or config.get("snapshots"):
        threading.Thread(target=background, name="crash-compactor", daemon=True).start()

    threads = []
    for t in range(config["threads"]):
        ctx = WorkloadContext(store=store, thread=t, threads=config["threads"],
                              groups=config["groups"], cycle=config["cycle"],
                              offset_base=config["offset_base"], seed=config["seed"],
                              async_fraction=config["async_fraction"],
                              rng=random.Random(f"{config['seed']}:{config['cycle']}:{t}"),
                              _ack=ack)

        def run(ctx=ctx) -> None:
            try:
                workload(ctx)
            except Exception:
                write_line(b"ERROR workload: "
                           + traceback.format_exc().replace("\n", " | ").encode() + b"\n")
                raise

        threads.append(threading.Thread(target=run, name=f"crash-workload-{t}", daemon=True))
    for th in threads:
        th.start()
    for th in threads:
        th.join()
    # A workload that returns is done: wait for the kill (the harness decides when).
    while True:
        time.sleep(1)


if __name__ == "__main__":
    main(json.loads(sys.argv[1]))
