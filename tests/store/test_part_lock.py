"""A log partition's lock (``offsetlog.log._native.PartLock``, native/src/part_lock.rs): the
``threading.Lock`` interface the store's Python code uses, mutual exclusion between Python and
the native commit paths, and a blocked acquire that lets the GIL and signals through."""

from __future__ import annotations

import signal
import threading
import time

import pytest

from offsetlog import OffsetAndMetadata as OAM
from offsetlog import OffsetStore
from offsetlog import TopicPartition as TP
from offsetlog.log._native import PartLock


def test_it_answers_as_threading_lock_does():
    for lock in (PartLock(), threading.Lock()):
        assert lock.acquire() is True and lock.locked()
        assert lock.acquire(False) is False
        assert lock.acquire(blocking=False) is False
        assert lock.acquire(0) is False
        with pytest.raises(TypeError):
            lock.acquire(None)
        t0 = time.monotonic()
        assert lock.acquire(timeout=0.05) is False
        assert time.monotonic() - t0 >= 0.04
        lock.release()
        assert not lock.locked()
        with pytest.raises(RuntimeError):
            lock.release()
        with pytest.raises(ValueError):
            lock.acquire(False, 1)
        with pytest.raises(ValueError):
            lock.acquire(timeout=-2)
        with pytest.raises(OverflowError):
            lock.acquire(timeout=1e300)
        assert lock.acquire(timeout=0) is True
        lock.release()
        with lock:
            assert lock.locked()
        assert not lock.locked()
        with pytest.raises(KeyError):
            with lock:
                raise KeyError("released on the way out")
        assert not lock.locked()


def test_threads_exclude_each_other():
    """A read, a switch and a write under the lock: an update lost would show."""
    lock, count = PartLock(), [0]

    def work():
        for _ in range(300):
            with lock:
                seen = count[0]
                time.sleep(0)
                count[0] = seen + 1

    threads = [threading.Thread(target=work) for _ in range(6)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert count[0] == 6 * 300


def test_a_condition_waits_and_wakes_on_it():
    cond, state = threading.Condition(PartLock()), []

    def later():
        time.sleep(0.05)
        with cond:
            state.append("set")
            cond.notify_all()

    threading.Thread(target=later).start()
    with cond:
        assert cond.wait_for(lambda: state, timeout=10)
        assert not cond.wait(0.01)  # and times out, the lock held again on return


def test_a_native_commit_waits_for_the_partition_lock_with_the_gil_released(tmp_path):
    """While Python holds a partition's lock, a commit_sync on it (the native lone commit)
    blocks in native code: the holder's thread keeps running Python, and the commit lands
    once the lock is released."""
    with OffsetStore.open(tmp_path, partitions=1) as store:
        part = store._parts[0]
        done = threading.Event()

        def commit():
            store.commit_sync("g", {TP("t", 0): 1})
            done.set()

        with part.lock:
            worker = threading.Thread(target=commit)
            worker.start()
            spins = 0
            deadline = time.monotonic() + 0.3
            while time.monotonic() < deadline:  # Python runs: the waiter holds no GIL
                spins += 1
            assert not done.is_set() and spins > 1000
        worker.join(10)
        assert done.is_set()
        assert store.fetch("g") == {TP("t", 0): OAM(1)}


def test_a_blocked_acquire_on_the_main_thread_runs_signal_handlers():
    lock = PartLock()
    lock.acquire()

    class Alarm(Exception):
        pass

    def ring(*_):
        raise Alarm

    old = signal.signal(signal.SIGALRM, ring)
    try:
        signal.setitimer(signal.ITIMER_REAL, 0.1)
        t0 = time.monotonic()
        with pytest.raises(Alarm):
            lock.acquire(timeout=10)
        assert time.monotonic() - t0 < 5
    finally:
        signal.setitimer(signal.ITIMER_REAL, 0)
        signal.signal(signal.SIGALRM, old)
        lock.release()
