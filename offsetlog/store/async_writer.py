"""The async writer: leads the rounds nobody else leads (``commit_async`` runs, group
coordinator records, work left queued after a committer's round), and how it runs.

By default it is a thread of its own, which writes each round itself, as any leader does. A
caller with an event loop of its own (the wire server) can take it over instead
(``OffsetStore.drive_async_writer``): the store then calls the loop's ``wake`` when there is
work, and the loop calls ``step`` on its one thread. That thread does all of a round's Python
(taking it, framing it, applying it, resolving its futures), and a round that must be synced
is written by the kernel through an io_uring ring, or by the write pool's threads where there
is none (``offsetlog.store.write_pool``), while the loop goes on reading and with other
partitions: the writes of many log partitions overlap, and a commit's answer is made on the
thread that read it. Only a driver gets either: the own thread handing its writes to the
pool made 32 embedded committers, whose left-over rounds it leads, 5-30 % slower
(docs/DESIGN.md, "Threads").
"""

from __future__ import annotations

import os
import threading
from collections import deque
from typing import Callable

from offsetlog.log.uring import open_ring
from offsetlog.store.commit_queue import PartitionWriter, round_bytes, write_round
from offsetlog.store.futures import writer_helpers
from offsetlog.store.write_pool import RingWrites, WritePool

#: submission slots of a driver's io_uring ring: rounds in flight at most, one a partition
#: (past it, a round is written by the driver itself)
RING_ENTRIES = 256


class AsyncWriter:
    """The partitions handed to the async writer, the rounds of theirs in flight in the
    write pool, and the thread that leads them (its own, or a driver's)."""

    def __init__(self, committer, *, write_threads: int, helper: Callable) -> None:
        """``committer``: the ``GroupCommitter`` whose rounds this leads (its
        ``take_round``, ``end_round`` and ``complete``; ``fsync_always``)."""
        self._committer = committer
        self._helper = helper
        self.cv = threading.Condition()
        self._ready: list[PartitionWriter] = []
        #: rounds the pool has written, as ((part, round, data), error) (under cv); the
        #: partitions whose rounds are in the pool (the leading thread's alone)
        self._written: deque = deque()
        self._writing: set[PartitionWriter] = set()
        #: who writes a driver's rounds, made when it takes over (see drive): the ring, or
        #: the write pool (one interface: submit, flush, collect, wait, stop)
        self._write_threads = write_threads if committer.fsync_always else 0
        self._pool: WritePool | RingWrites | None = None
        self._stopping = False
        #: a driver's wake-up (None: the own thread) and whether it is owed a step
        self._wake: Callable[[], None] | None = None
        self._woken = False
        self._thread: threading.Thread | None = threading.Thread(
            target=self._run, name="offsetlog-async-writer", daemon=True)
        self._thread.start()
        #: the thread that leads: committers in it must not wait for it (see submit_sync)
        self.ident = self._thread.ident
        writer_helpers[self.ident] = helper

    # -- handing work over (any thread) ----------------------------------------------------

    def wake(self, part: PartitionWriter) -> None:
        with self.cv:
            self._ready.append(part)
            if self._wake is None:
                self.cv.notify()
            else:  # (a driver's settle() waits for written rounds only)
                self._kick()

    def _notify(self) -> None:
        """(cv held) A round is written: wake the leading thread."""
        self.cv.notify()  # also wakes a settle() waiting on the driver's thread
        if self._wake is not None:
            self._kick()

    def _kick(self) -> None:
        """(cv held) Wake the driver, once until its next step."""
        if not self._woken:
            self._woken = True
            self._wake()

    def drive(self, wake: Callable[[], None], wake_fd: int | None = None) -> Callable[[], None]:
        """Hand the leading to the calling thread: the own thread stops after what it has in
        hand, ``wake()`` is called (from any thread, cheaply: once until the next step) when
        there is work, and the caller then runs the returned ``step()`` on this thread.

        ``wake_fd``: the eventfd that ``wake()`` signals and the driver watches. Given one,
        rounds are written through an io_uring ring that signals it too (``RingWrites``),
        where there is one; else by the write pool's threads."""
        if self._write_threads and self._pool is None:
            ring = open_ring(RING_ENTRIES) if wake_fd is not None else None
            if ring is not None:
                try:
                    ring.register_eventfd(wake_fd)
                except OSError:  # (not an eventfd: its completions would wake nobody)
                    ring.close()
                    ring = None
            if ring is not None:
                self._pool = RingWrites(ring, self._written, self._pool_write)
            else:
                self._pool = WritePool(self._write_threads, self._pool_write, self.cv,
                                       self._written, self._notify)
        with self.cv:
            self._wake = wake
            self.cv.notify()
        self._thread.join()  # it leaves at its next look (see _run); nothing is in flight
        self._thread = None
        writer_helpers.pop(self.ident, None)
        self.ident = threading.get_ident()
        writer_helpers[self.ident] = self._helper
        with self.cv:
            self._woken = True
            wake()  # whatever was handed over meanwhile
        return self.step

    # -- leading (the leading thread) -------------------------------------------------------

    def _run(self) -> None:
        cv = self.cv
        while True:
            with cv:
                while not (self._ready or self._written or self._wake is not None
                           or (self._stopping and not self._writing)):
                    cv.wait()
                if self._wake is not None or not (self._ready or self._written):
                    if self._wake is not None:
                        self.settle()  # a driver takes over with nothing in flight
                    return
            self.step()

    def step(self) -> None:
        """Lead what is ready. A driver's rounds that must be synced are framed here and
        written by the ring or the pool; such a round's partition is looked at again once its
        write is done (``_end_written``)."""
        committer = self._committer
        cv = self.cv
        pool = self._pool  # a driver's (see drive); the own thread writes itself
        while True:
            with cv:
                self._woken = False  # what is handed over from here on wakes the driver again
            if pool is not None:
                pool.collect()
            while self._end_written():  # (each puts its partition back in _ready)
                pass
            with cv:
                ready, self._ready = self._ready, []
            if not ready:
                return
            for part in dict.fromkeys(ready):  # de-duplicated, in order
                while True:
                    with part.lock:
                        if not part.queue or part.leader_active or part.exclusive_waiting:
                            # Empty, or an active leader (or the exclusive holder, once it
                            # ends) will hand on what is left. A round of ours in flight
                            # is looked at again when its write is done.
                            if not part.leader_active or part not in self._writing:
                                part.async_scheduled = False
                            break
                        rnd = committer.take_round(part)
                        if rnd.sync and not rnd.done and pool is not None:
                            self._writing.add(part)
                    if part in self._writing:
                        pool.submit((part, rnd, round_bytes(rnd)))
                        break
                    # written here: the own thread, or nothing to sync (fsync="interval"/"never")
                    if not rnd.done:
                        write_round(part, rnd, round_bytes(rnd))
                    with part.lock:
                        group = committer.end_round(part, rnd)
                    committer.complete(group)
            if pool is not None:
                pool.flush()  # (the ring: one system call starts this pass's writes)

    @staticmethod
    def _pool_write(job) -> None:
        """(a write-pool thread; the driver, for a write the ring cannot take)"""
        part, rnd, data = job
        write_round(part, rnd, data)

    def _end_written(self) -> bool:
        """End and complete one round the pool has written; False if none is waiting. Its
        partition is looked at again for more queued work."""
        cv = self.cv
        with cv:
            if not self._written:
                return False
            (part, rnd, _), error = self._written.popleft()
            if error is not None and rnd.error is None:
                rnd.error = error
            self._ready.append(part)
        with part.lock:
            self._writing.discard(part)
            group = self._committer.end_round(part, rnd)
        self._committer.complete(group)
        return True

    def settle(self) -> None:
        """Wait for every round of ours in flight and end it: for work on the leading thread
        that waits for a partition or a future (a done-callback committing, an inline
        commit, a close), which could otherwise wait for a round only this thread can end.
        On any other thread it does nothing: the leading thread ends its rounds itself."""
        if threading.get_ident() != self.ident:
            return
        while True:
            while self._end_written():
                pass
            if not self._writing:
                return
            self._pool.wait()  # (rounds are in flight only where there is one)

    # -- stopping ---------------------------------------------------------------------------

    def stop(self) -> None:
        """Stop the own thread (after the store's drain) and the pool."""
        writer_helpers.pop(self.ident, None)
        with self.cv:
            self._stopping = True
            self.cv.notify_all()
        thread = self._thread
        if thread is not None and thread is not threading.current_thread():
            thread.join()
        if self._pool is not None:
            self._pool.stop()

    @property
    def threads(self) -> list[threading.Thread]:
        pool = self._pool.threads if self._pool is not None else []
        return [*([self._thread] if self._thread is not None else []), *pool]


def drive_from_loop(store, loop) -> Callable[[], None]:
    """``store.drive_async_writer`` from an asyncio event loop's thread (call it there): the
    writer is woken through an eventfd (a pipe where there is none) in the loop's selector
    and steps as one of the loop's callbacks. Returns the undo, for once the store is closed
    (nothing wakes the writer any more then)."""
    if hasattr(os, "eventfd"):
        rfd = wfd = os.eventfd(0, os.EFD_NONBLOCK | os.EFD_CLOEXEC)
        step = store.drive_async_writer(lambda: os.eventfd_write(wfd, 1), rfd)
    else:
        rfd, wfd = os.pipe()
        os.set_blocking(rfd, False)
        step = store.drive_async_writer(lambda: os.write(wfd, b"!"))

    def ready() -> None:
        try:
            os.read(rfd, 4096)
        except BlockingIOError:
            pass
        step()

    loop.add_reader(rfd, ready)

    def undo() -> None:
        loop.remove_reader(rfd)
        for fd in {rfd, wfd}:
            os.close(fd)
    return undo
