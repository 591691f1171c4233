"""The async writer led from a caller's thread (``OffsetStore.drive_async_writer``), as the
wire server's event loop leads it, with each of the two ways its writes are made: the write
pool's threads (a driver that wakes through a plain callback) and an io_uring ring (a driver
that watches an eventfd, as the server's loop does).

The claims: every queued commit becomes durable and visible, and its future resolves on the
driving thread; a commit_sync on the driving thread while rounds of its own are in flight
does not wait for itself; a failed write poisons the store as any failed write does; a
driver that stops driving leaves nothing behind once the store is closed."""

from __future__ import annotations

import errno
import os
import select
import threading
import time

import pytest

import offsetlog.log.segment as segment_mod
from offsetlog import OffsetStore, TopicPartition
from offsetlog.errors import StoreFailedError
from offsetlog.log import uring

TP = TopicPartition("t", 0)


def _groups_on_distinct_partitions(store, n: int) -> list[str]:
    out, seen, i = [], set(), 0
    while len(out) < n:
        g = f"g-{i}"
        p = store.partition_of(g)
        if p not in seen:
            seen.add(p)
            out.append(g)
        i += 1
    return out


def _commit_then_step(store, groups, offset: int):
    """A call for the driving thread: commit_async ``offset`` for each group, then one step,
    which puts every round in flight at once; returns the futures."""
    def call():
        futures = [store.commit_async(g, {TP: offset}) for g in groups]
        store._writer.async_writer.step()
        return futures
    return call


class EventfdWoken:
    """``threading.Event``'s set/wait/clear over an eventfd, which the store's ring also
    signals on each completed write."""

    def __init__(self) -> None:
        self.fd = os.eventfd(0, os.EFD_NONBLOCK | os.EFD_CLOEXEC)

    def set(self) -> None:
        os.eventfd_write(self.fd, 1)

    def wait(self) -> None:
        select.select([self.fd], [], [])

    def clear(self) -> None:
        try:
            os.eventfd_read(self.fd)
        except BlockingIOError:
            pass


class Driver:
    """A thread that drives the store's async writer, as an event loop would: it sleeps
    until woken, then steps; ``call(fn)`` runs ``fn`` on it. Its writes go to the write pool,
    or (``ring``) through an io_uring ring that wakes it through its eventfd."""

    def __init__(self, store, ring: bool = False) -> None:
        self.woken = EventfdWoken() if ring else threading.Event()
        self.jobs: list = []
        self.ident = None
        self.stopped = False
        self.ready = threading.Event()
        self.thread = threading.Thread(target=self._run, args=(store,), daemon=True)
        self.thread.start()
        assert self.ready.wait(10)

    def _run(self, store) -> None:
        self.ident = threading.get_ident()
        step = store.drive_async_writer(
            self.woken.set, self.woken.fd if isinstance(self.woken, EventfdWoken) else None)
        self.ready.set()
        while not self.stopped:
            self.woken.wait()  # only when woken: a lost wake-up hangs the test
            self.woken.clear()
            while self.jobs:
                fn, done = self.jobs.pop(0)
                try:
                    done.append(("ok", fn()))
                except BaseException as e:
                    done.append(("error", e))
            # as an event loop reading its eventfd before the step: wake-ups that came
            # before it are taken as done by it
            self.woken.clear()
            step()

    def call(self, fn, timeout: float = 20.0):
        done: list = []
        self.jobs.append((fn, done))
        self.woken.set()
        for _ in range(int(timeout / 0.01)):
            if done:
                kind, value = done[0]
                if kind == "error":
                    raise value
                return value
            threading.Event().wait(0.01)
        raise AssertionError("the driving thread did not run the call (deadlock?)")

    def stop(self) -> None:
        self.stopped = True
        self.woken.set()
        self.thread.join(10)


@pytest.fixture
def store(tmp_path):
    s = OffsetStore.open(str(tmp_path / "s"), partitions=8)
    yield s
    s.close()


@pytest.fixture(params=["pool", "ring"])
def drive(request, monkeypatch):
    """``drive(store)``: a Driver whose writes go through the pool, or the ring (counted in
    ``writes``, so a test cannot pass on the pool unawares)."""
    ring = request.param == "ring"
    writes: list = []
    if ring:
        if uring.open_ring(8) is None:
            pytest.skip("no io_uring here")
        real = uring.Ring.write

        def counted(self, *args):
            writes.append(args[:3])
            return real(self, *args)
        monkeypatch.setattr(uring.Ring, "write", counted)

    def make(store):
        return Driver(store, ring=ring)
    make.ring = ring
    make.writes = writes
    return make


def test_queued_commits_become_durable_and_resolve_on_the_driving_thread(store, tmp_path,
                                                                         drive):
    driver = drive(store)
    groups = _groups_on_distinct_partitions(store, 6)
    resolved_on: list = []
    futures = []
    for round_ in range(5):
        for g in groups:
            fut = store.commit_async(g, {TP: round_ * 10 + groups.index(g)})
            fut.add_done_callback(lambda f: resolved_on.append(threading.get_ident()))
            futures.append(fut)
    for f in futures:
        f.result(20)
    assert set(resolved_on) == {driver.ident}
    assert bool(drive.writes) == drive.ring
    driver.stop()
    store.close()
    with OffsetStore.open(str(tmp_path / "s"), partitions=8) as again:
        for g in groups:
            assert again.fetch(g)[TP].offset == 40 + groups.index(g)


def test_commit_sync_on_the_driving_thread_does_not_wait_for_its_own_rounds(store, drive):
    driver = drive(store)
    groups = _groups_on_distinct_partitions(store, 4)

    def queue_then_commit_sync():
        # several partitions ready at once: their rounds are in flight; then a commit on
        # the driving thread to one of them, whose round only this thread can end
        futures = [store.commit_async(g, {TP: 1}) for g in groups]
        store._writer.async_writer.step()
        store.commit_sync(groups[0], {TP: 2})
        return futures

    futures = driver.call(queue_then_commit_sync)
    for f in futures:
        f.result(20)
    assert store.fetch(groups[0])[TP].offset == 2
    assert all(store.fetch(g)[TP].offset == 1 for g in groups[1:])
    driver.stop()


def test_a_failed_write_poisons_the_store(store, monkeypatch, drive):
    driver = drive(store)
    groups = _groups_on_distinct_partitions(store, 3)
    for g in groups:
        store.commit_sync(g, {TP: 1})

    def eio(*_args):
        raise OSError(errno.EIO, "injected I/O error")
    monkeypatch.setattr(segment_mod, "_write_dsync", eio)
    monkeypatch.setattr(segment_mod, "_sync", eio)
    real_reap = uring.Ring.reap
    monkeypatch.setattr(uring.Ring, "reap", lambda self: [
        (token, -errno.EIO) for token, _ in real_reap(self)])  # the kernel's answer, as -errno
    futures = driver.call(lambda: [store.commit_async(g, {TP: 2}) for g in groups])
    for f in futures:
        with pytest.raises(StoreFailedError):
            f.result(20)
    with pytest.raises(StoreFailedError):
        store.commit_sync(groups[0], {TP: 3})
    assert all(store.fetch(g)[TP].offset == 1 for g in groups)
    assert bool(drive.writes) == drive.ring
    driver.stop()


def test_close_finishes_what_the_driver_has_in_flight(tmp_path, drive):
    store = OffsetStore.open(str(tmp_path / "s"), partitions=8)
    driver = drive(store)
    groups = _groups_on_distinct_partitions(store, 5)
    futures = [store.commit_async(g, {TP: 7}) for g in groups]
    store.close()  # from another thread, while the driver runs: every commit is written
    assert all(f.result(0) is None for f in futures)
    driver.stop()
    with OffsetStore.open(str(tmp_path / "s"), partitions=8) as again:
        assert all(again.fetch(g)[TP].offset == 7 for g in groups)


def test_close_on_the_driving_thread_ends_its_rounds_in_flight(tmp_path, drive):
    """Only the driving thread ends its rounds in flight: a close() made there waits for
    them itself (it hung before, in the pool's case too)."""
    store = OffsetStore.open(str(tmp_path / "s"), partitions=8)
    driver = drive(store)
    groups = _groups_on_distinct_partitions(store, 5)

    def queue_step_close():
        futures = _commit_then_step(store, groups, 3)()  # the rounds are in flight
        store.close()
        return futures

    assert all(f.result(0) is None for f in driver.call(queue_step_close))
    driver.stop()
    with OffsetStore.open(str(tmp_path / "s"), partitions=8) as again:
        assert all(again.fetch(g)[TP].offset == 3 for g in groups)


def test_work_queued_behind_a_round_in_flight_is_led_once_the_write_is_done(store, drive):
    """A commit queued on a partition whose round is in flight wakes nobody (the writer
    will look at the partition again); the step that ends that round must lead it."""
    driver = drive(store)
    g1, g2 = _groups_on_distinct_partitions(store, 2)

    def two_rounds_in_flight_then_one_behind():
        first = [store.commit_async(g1, {TP: 1}), store.commit_async(g2, {TP: 1})]
        store._writer.async_writer.step()  # two partitions ready: both rounds in flight
        behind = store.commit_async(g1, {TP: 2})
        time.sleep(0.5)  # both writes done (and their wake-ups given) before the next step
        return first, behind

    first, behind = driver.call(two_rounds_in_flight_then_one_behind)
    for f in first:
        f.result(20)
    behind.result(5)
    assert store.fetch(g1)[TP].offset == 2
    driver.stop()


def test_the_asyncio_facade_leads_the_writer_from_its_loop(tmp_path):
    """``AsyncOffsetStore.drive_async_writer``: many tasks' commits resolve on the loop's
    thread and are durable; close() undoes it."""
    import asyncio

    from offsetlog.aio import AsyncOffsetStore

    async def run():
        astore = await AsyncOffsetStore.open(str(tmp_path / "a"), partitions=8)
        astore.drive_async_writer()
        loop_thread = threading.get_ident()
        groups = _groups_on_distinct_partitions(astore.store, 6)
        resolved_on = []
        futures = [astore.store.commit_async(g, {TP: i}) for i, g in enumerate(groups)]
        for f in futures:
            f.add_done_callback(lambda f: resolved_on.append(threading.get_ident()))
        await asyncio.gather(*(astore.commit(g, {TP: 100 + i}) for i, g in enumerate(groups)))
        await asyncio.gather(*(asyncio.wrap_future(f) for f in futures))
        assert set(resolved_on) == {loop_thread}
        await astore.close()
        return groups

    groups = asyncio.run(run())
    with OffsetStore.open(str(tmp_path / "a"), partitions=8) as again:
        assert [again.fetch(g)[TP].offset for g in groups] == [100 + i for i in range(6)]


def test_rounds_past_the_rings_room_are_written_by_the_driver(tmp_path, monkeypatch):
    """A ring of one slot: of several partitions' rounds ready at once, one goes to the
    kernel and the others are written on the driving thread; all are durable."""
    from offsetlog.store import async_writer

    if uring.open_ring(1) is None:
        pytest.skip("no io_uring here")
    monkeypatch.setattr(async_writer, "RING_ENTRIES", 1)
    to_ring: list = []
    real = uring.Ring.write
    monkeypatch.setattr(uring.Ring, "write",
                        lambda self, *a: to_ring.append(a[:3]) or real(self, *a))
    store = OffsetStore.open(str(tmp_path / "s"), partitions=8)
    driver = Driver(store, ring=True)
    groups = _groups_on_distinct_partitions(store, 5)

    for f in driver.call(_commit_then_step(store, groups, 9)):
        f.result(20)
    assert 1 <= len(to_ring) < len(groups)
    driver.stop()
    store.close()
    with OffsetStore.open(str(tmp_path / "s"), partitions=8) as again:
        assert all(again.fetch(g)[TP].offset == 9 for g in groups)


def test_writes_the_ring_could_not_start_are_made_by_the_driver(tmp_path, monkeypatch):
    """io_uring_enter refused (EAGAIN): the rounds it did not take are written on the
    driving thread, durable and answered; nothing hangs."""
    from offsetlog.store import write_pool

    if uring.open_ring(8) is None:
        pytest.skip("no io_uring here")
    store = OffsetStore.open(str(tmp_path / "s"), partitions=8)
    driver = Driver(store, ring=True)
    groups = _groups_on_distinct_partitions(store, 4)
    refused = []
    real_submit = uring.Ring.submit

    def submit_once_refused(self):
        if not refused and self.queued:
            refused.append(self.queued)
            raise OSError(errno.EAGAIN, "injected")
        return real_submit(self)
    monkeypatch.setattr(uring.Ring, "submit", submit_once_refused)
    ended = []
    real_end = write_pool.RingWrites._end
    monkeypatch.setattr(write_pool.RingWrites, "_end",
                        lambda self, job, seg, data, result: (ended.append(result),
                                                              real_end(self, job, seg, data,
                                                                       result)))

    for f in driver.call(_commit_then_step(store, groups, 5)):
        f.result(20)
    assert refused and ended.count(0) == refused[0]  # each written here in full
    driver.stop()
    store.close()
    with OffsetStore.open(str(tmp_path / "s"), partitions=8) as again:
        assert all(again.fetch(g)[TP].offset == 5 for g in groups)
