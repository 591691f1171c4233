"""Threads that do nothing but a round's write and sync, for the async writer thread.

A DSYNC write holds its thread for the disk's latency, about 100 us here, and the log
partitions are separate files the kernel can sync side by side. The async writer, when an event
loop drives it (``offsetlog.store.async_writer``), frames each ready partition's round itself and
hands only the system call to one of these threads, so writes to many partitions overlap. Everything else of a
round (framing, applying, waking committers, resolving futures) stays on the async writer's one
thread: spread over many threads, that Python work made them queue for the GIL after every
write.
"""

from __future__ import annotations

import logging
import queue
import threading
from collections import deque
from typing import Any, Callable

log = logging.getLogger("offsetlog.store.write_pool")

#: threads of a driven async writer's pool: writes to this many log partitions overlap
WRITE_THREADS = 8


class WritePool:
    """``count`` threads running ``write(job)`` for queued jobs; each finished job goes to
    ``done`` (with the exception it raised, or None) and ``notify()`` is called, both under
    ``cv``."""

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
