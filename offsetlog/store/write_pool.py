"""Who makes a driven async writer's DSYNC writes: the kernel through io_uring
(``RingWrites``), or threads that do nothing but the write (``WritePool``).

A DSYNC write takes the disk's latency, about 100 us here, and the log partitions are
separate files the kernel can sync side by side. The async writer, when an event loop drives
it (``offsetlog.store.async_writer``), frames each ready partition's round itself and hands
only the write on, so writes to many partitions overlap. Everything else of a round
(framing, applying, waking committers, resolving futures) stays on the async writer's one
thread: spread over many threads, that Python work made them queue for the GIL after every
write. The ring is preferred: even the pool's threads, which run only the system call, each
wait for the GIL twice a write (docs/DESIGN.md, "Threads").
"""

from __future__ import annotations

import logging
import os
import queue
import threading
from collections import deque
from typing import Any, Callable

from offsetlog.log.uring import Ring

log = logging.getLogger("offsetlog.store.write_pool")

#: threads of a driven async writer's pool: writes to this many log partitions overlap
WRITE_THREADS = 8


class WritePool:
    """``count`` threads running ``write(job)`` for queued jobs; each finished job goes to
    ``done`` (with the exception it raised, or None) and ``notify()`` is called, both under
    ``cv``. ``RingWrites``'s interface: ``flush`` and ``collect`` have nothing to do here."""

    def __init__(self, count: int, write: Callable[[Any], None],
                 cv: threading.Condition, done: deque, notify: Callable[[], None]) -> None:
        self._write = write
        self._cv = cv
        self._done = done
        self._notify = notify
        self._jobs: queue.SimpleQueue = queue.SimpleQueue()
        self.threads = [threading.Thread(target=self._run, name=f"offsetlog-write-{i}",
                                         daemon=True) for i in range(count)]
        for t in self.threads:
            t.start()

    def submit(self, job: Any) -> None:
        self._jobs.put(job)

    def flush(self) -> None:
        """(the jobs started when submitted)"""

    def collect(self) -> None:
        """(the threads put finished jobs in ``done`` themselves)"""

    def wait(self) -> None:
        """Block until a finished job is in ``done``."""
        with self._cv:
            while not self._done:
                self._cv.wait()

    def _run(self) -> None:
        jobs, write, cv, done, notify = (self._jobs, self._write, self._cv, self._done,
                                         self._notify)
        while True:
            job = jobs.get()
            if job is None:
                return
            try:
                write(job)
                error = None
            except BaseException as e:  # reported with the job: a round is never stranded
                error = e
            with cv:
                done.append((job, error))
                notify()

    def stop(self) -> None:
        """Stop the threads once the jobs queued before are done."""
        for _ in self.threads:
            self._jobs.put(None)
        for t in self.threads:
            t.join()


class RingWrites:
    """The writes made by the kernel (``offsetlog.log.uring``), for a driver with an event
    loop: no thread, so no hand-over of the GIL per write. ``submit`` queues a round's
    write, ``flush`` starts the queued ones with one system call, ``collect`` (at the start
    of a step: the ring signals completions on the driver's eventfd) ends the completed ones
    and moves them to ``done`` as ``(job, None)``; the round's error, if any, is on the
    round, as ``write_round`` leaves it. All on the driving thread."""

    threads: list = []

    def __init__(self, ring: Ring, done: deque, write: Callable[[Any], None]) -> None:
        """``write(job)``: makes a job's write here and now (``write_round``), for those the
        ring cannot take (no room, nothing to write, a segment that must be written another
        way)."""
        self._ring = ring
        self._done = done
        self._write = write

    def submit(self, job: Any) -> None:
        part, rnd, data = job
        ring = self._ring
        begun = None
        if data is not None and ring.in_flight < ring.capacity:
            try:
                begun = part.log.begin_durable(data)
            except Exception as e:  # OSError rolling or reserving: as write_round keeps it
                rnd.error = e
                self._done.append((job, None))
                return
        if begun is None:  # (framing failed, no room, or a write the ring cannot make)
            self._write(job)
            self._done.append((job, None))
            return
        segment, at = begun
        if data.__class__ is not bytes:
            data = bytes(data)  # the kernel reads the buffer: one that cannot change
        if not ring.write(segment.fd, data, at, os.RWF_DSYNC, (job, segment, data)):
            self._end(job, segment, data, 0)  # (no room after all: written here, in full)

    def flush(self) -> None:
        try:
            self._ring.submit()
        except OSError as e:
            # (EAGAIN, ENOMEM: the kernel took none or some.) Those it did not take are
            # written here, in full: the same bytes at the same offset as the ring would.
            log.warning("io_uring_enter failed (%s): writing %d rounds here", e,
                        self._ring.queued)
            for job, segment, data in self._ring.take_back():
                self._end(job, segment, data, 0)

    def wait(self) -> None:
        """Block until at least one write has completed, and collect."""
        self.flush()
        self._ring.wait()
        self.collect()

    def collect(self) -> None:
        for (job, segment, data), result in self._ring.reap():
            self._end(job, segment, data, result if result >= 0
                      else OSError(-result, os.strerror(-result)))

    def _end(self, job, segment, data, result) -> None:
        part, rnd, _ = job
        try:
            part.log.end_durable(segment, data, result, rnd.base)
        except Exception as e:  # OSError: the log's state is unknown
            rnd.error = e
        self._done.append((job, None))

    def stop(self) -> None:
        """Nothing to stop: the store has drained, so nothing is in flight. The ring stays
        open for a step the loop may still run; it is released with this object."""

