"""The thread that runs users' commit callbacks.

``commit_async(callback=...)`` callbacks run here, one at a time, in the order their commits
completed, so a slow callback never stalls the log, and a callback that raises is logged and
does not stop the others.
"""

from __future__ import annotations

import logging
import queue
import threading

log = logging.getLogger("offsetlog.store.callbacks")


class CallbackRunner:
    """A queue of ``(callback, arg, error)`` jobs and the daemon thread that runs them."""

    def __init__(self) -> None:
        self._jobs: queue.SimpleQueue = queue.SimpleQueue()
        #: set by stop() under _lock once the thread has been told to end; later callbacks (a
        #: committer still finishing its round) run in the caller's thread
        self._closed = False
        self._lock = threading.Lock()
        self.thread = threading.Thread(target=self._loop, name="offsetlog-callbacks",
                                       daemon=True)
        self.thread.start()

    def run_one(self, callback, arg, error) -> None:
        self.run(((callback, arg, error),))

    def run(self, jobs) -> None:
        """Run each ``callback(arg, error)`` of ``jobs`` on the callback thread, or here once it
        has stopped (a synchronous committer may finish resolving its round after close()
        drained). One lock hold per round, not per callback."""
        with self._lock:
            if not self._closed:
                put = self._jobs.put
                for job in jobs:
                    put(job)
                return
        for job in jobs:
            _run(*job)

    def stop(self) -> None:
        """Run what is queued, then end the thread."""
        with self._lock:
            self._closed = True
            self._jobs.put(None)
        if self.thread is not threading.current_thread():
            self.thread.join()

    def _loop(self) -> None:
        while True:
            job = self._jobs.get()
            if job is None:
                return
            try:
                _run(*job)
            except BaseException:  # SystemExit & co. from a user's callback, on our thread
                log.exception("commit callback %r raised", job[0])


def _run(callback, arg, error) -> None:
    try:
        callback(arg, error)
    except Exception:  # a user's callback must not kill the thread that runs the others
        log.exception("commit callback %r raised", callback)
