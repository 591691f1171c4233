"""Threads for the store calls that wait for an fsync (connection.py hands them out)."""

from __future__ import annotations

import logging
import queue
import threading
import time

log = logging.getLogger("offsetlog.server")


class Workers:
    """Threads for store calls that wait for an fsync. A ``ThreadPoolExecutor`` makes a
    future and takes two locks per job; this is a queue of plain calls."""

    def __init__(self, count: int, name: str = "offsetlog-serve") -> None:
        self._jobs: queue.SimpleQueue = queue.SimpleQueue()
        self._stopped = False
        self._active = 0  #: jobs submitted and not finished
        self._active_lock = threading.Lock()
        self._threads = [threading.Thread(target=self._run, name=f"{name}-{i}", daemon=True)
                         for i in range(count)]
        for t in self._threads:
            t.start()

    def submit(self, fn, *args) -> None:
        """Run ``fn(*args)`` on a worker; it must catch its own exceptions.

        :raises RuntimeError: after ``shutdown``
        """
        if self._stopped:
            raise RuntimeError("the workers have stopped")
        with self._active_lock:
            self._active += 1
        self._jobs.put((fn, args))

    @property
    def idle(self) -> bool:
        """No job is queued or running."""
        return self._active == 0

    def _run(self) -> None:
        jobs = self._jobs
        while True:
            job = jobs.get()
            if job is None:
                return
            fn, args = job
            try:
                fn(*args)
            except BaseException:  # a bug: the thread must live on
                log.exception("worker job %r failed", fn)
            finally:
                with self._active_lock:
                    self._active -= 1

    def shutdown(self, timeout: float = 5.0) -> None:
        """Let queued jobs finish (at most ``timeout`` seconds in all), then stop."""
        self._stopped = True
        for _ in self._threads:
            self._jobs.put(None)
        deadline = time.monotonic() + timeout
        for t in self._threads:
            t.join(max(0.0, deadline - time.monotonic()))
