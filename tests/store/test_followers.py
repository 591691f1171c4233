"""A lone commit's follower (native/src/follow.rs): a ``commit_sync`` that finds its log
partition's lone commit writing writes its batch right behind it, at the same time, and is
acknowledged only once that commit is applied.

Each case holds the first commit's write inside the segment's ``_write_dsync`` hook (which
the native write calls in place of its system call when a test replaces it) and looks at what
the second commit did meanwhile: where its bytes went, whether it returned, what the table
shows; then lets the first write finish or fail, and reopens the store to see what the log
kept.
"""

from __future__ import annotations

import errno
import os
import threading
import time

import pytest

import offsetlog.log.segment as segment_mod
from offsetlog.errors import CommitTimeoutError, StoreFailedError
from offsetlog.log import _native, recovery_points
from support.durability_helpers import TP, last_segment, open_store, store_state

#: three groups (and so three threads' commits) in one log partition of a 3-partition store
PARTITIONS = 3
GROUPS = [g for g in (f"group-{k}" for k in range(40))]


def shared_groups(store, n: int = 3) -> list[str]:
    """``n`` group names whose commits land in one log partition of ``store``."""
    by: dict[int, list[str]] = {}
    for g in GROUPS:
        by.setdefault(store.partition_of(g), []).append(g)
    return next(gs[:n] for gs in by.values() if len(gs) >= n)


class HeldWrites:
    """The segment's durable write, recorded per thread, with one thread's write held until
    ``release`` (and then failed, if asked)."""

    def __init__(self, held_thread: str, *, fail_held: bool = False,
                 fail: str | None = None) -> None:
        self.held_thread, self.fail_held, self.fail = held_thread, fail_held, fail
        self.writes: list[tuple[str, int, int]] = []  # (thread, position, bytes)
        self.entered = threading.Event()
        self.gate = threading.Event()
        self.mu = threading.Lock()

    def install(self, monkeypatch) -> None:
        monkeypatch.setattr(segment_mod, "_write_dsync", self)

    def __call__(self, fd: int, data: bytes, at: int) -> int:
        name = threading.current_thread().name
        with self.mu:
            self.writes.append((name, at, len(data)))
        if name == self.held_thread:
            self.entered.set()
            assert self.gate.wait(10), "the held write was never released"
            if self.fail_held:
                raise OSError(errno.EIO, "injected EIO")
        if name == self.fail:
            raise OSError(errno.EIO, "injected EIO")
        return _native.pwrite_dsync(fd, data, at)

    def of(self, name: str) -> list[tuple[int, int]]:
        with self.mu:
            return [(at, n) for who, at, n in self.writes if who == name]

    def wait_for(self, name: str, timeout: float = 10.0) -> tuple[int, int]:
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if mine := self.of(name):
                return mine[0]
            time.sleep(0.005)
        raise AssertionError(f"{name} wrote nothing in {timeout}s: {self.writes}")


class Committer(threading.Thread):
    """One ``commit_sync`` call on a thread of its own; ``error`` is what it raised."""

    def __init__(self, name: str, store, group: str, offset: int) -> None:
        super().__init__(name=name, daemon=True)
        self.store, self.group, self.offset = store, group, offset
        self.error: BaseException | None = None
        self.returned = threading.Event()

    def run(self) -> None:
        try:
            self.store.commit_sync(self.group, {TP("t", 0): self.offset})
        except BaseException as e:  # noqa: BLE001 - the test looks at it
            self.error = e
        finally:
            self.returned.set()


def held_first(store, g1: str, monkeypatch) -> tuple[HeldWrites, Committer]:
    """Thread A commits ``g1`` and is held in its write (the hook installed): the hook and
    A."""
    held = HeldWrites("A")
    held.install(monkeypatch)
    a = Committer("A", store, g1, 10)
    a.start()
    assert held.entered.wait(10)
    return held, a


def held_then_behind(store, g1: str, g2: str, held: HeldWrites) -> tuple[Committer, Committer]:
    """Thread A commits ``g1`` and is held in its write; then thread B commits ``g2``."""
    a, b = Committer("A", store, g1, 10), Committer("B", store, g2, 20)
    a.start()
    assert held.entered.wait(10)
    b.start()
    return a, b


def assert_only_the_follower_failed(path, store, monkeypatch, a: Committer, b: Committer,
                                    g1: str, g2: str) -> None:
    """A (10 in ``g1``) was acknowledged and B (20 in ``g2``) failed and poisoned the store;
    reopened, the log holds A's commit and not B's."""
    for t in (a, b):
        assert t.returned.wait(10)
    assert a.error is None and isinstance(b.error, StoreFailedError), (a.error, b.error)
    assert offset_of(store, g1) == 10
    with pytest.raises(StoreFailedError):
        store.commit_sync(g1, {TP("t", 0): 11})
    monkeypatch.undo()
    store.close()
    with open_store(path) as again:
        assert offset_of(again, g1) == 10 and offset_of(again, g2) == 1


def primed_store(path):
    """A store whose groups' partition has an active segment where ``RWF_DSYNC`` worked
    (the native write's usual case), with offset 1 committed by each group."""
    store = open_store(path, partitions=PARTITIONS, fsync="always")
    groups = shared_groups(store)
    for g in groups:
        store.commit_sync(g, {TP("t", 0): 1})
    active = store._writer.partitions[store.partition_of(groups[0])].log._active
    if not active.dsync:
        store.close()
        pytest.skip("RWF_DSYNC is refused here: no native write, so no follower")
    return store, groups


def offset_of(store, group: str) -> int:
    return store.fetch(group)[TP("t", 0)].offset


def test_a_commit_behind_a_lone_write_is_written_beside_it_and_acknowledged_after_it(
        tmp_path, monkeypatch):
    store, (g1, g2, _) = primed_store(tmp_path)
    held = HeldWrites("A")
    held.install(monkeypatch)
    a, b = held_then_behind(store, g1, g2, held)
    # B's batch goes to the file while A's write is still in flight, right behind A's ...
    (a_at, a_len), (b_at, _) = held.of("A")[0], held.wait_for("B")
    assert b_at == a_at + a_len
    # ... but B is neither acknowledged nor visible before A is
    assert not b.returned.wait(0.3)
    assert (offset_of(store, g1), offset_of(store, g2)) == (1, 1)
    held.gate.set()
    for t in (a, b):
        assert t.returned.wait(10) and t.error is None, t.error
    assert (offset_of(store, g1), offset_of(store, g2)) == (10, 20)
    # one write each: B's was not made again after A's ended
    assert [len(held.of(n)) for n in "AB"] == [1, 1]
    expected = store_state(store)
    store.close()
    with open_store(tmp_path) as again:
        assert store_state(again) == expected
        assert again.recovery_report.truncations == []


def test_a_followers_native_write_is_durable_before_its_turn_and_acknowledged_after_it(
        tmp_path, monkeypatch):
    """With no hook in its way, a follower makes its system call and waits for its turn in
    one release of the GIL: its batch is in the file, right behind the held one, while it is
    neither acknowledged nor visible; A's release then lets both through."""
    store, (g1, g2, _) = primed_store(tmp_path)
    held, a = held_first(store, g1, monkeypatch)
    # (B finds the native write in the hook's place: the combined write and wait)
    monkeypatch.setattr(segment_mod, "_write_dsync", _native.pwrite_dsync)
    b = Committer("B", store, g2, 20)
    b.start()
    (a_at, a_len) = held.of("A")[0]
    seg = last_segment(tmp_path, store.partition_of(g1))
    deadline = time.monotonic() + 10
    while not _read(seg, a_at + a_len, 8).strip(b"\0"):
        assert time.monotonic() < deadline, "B never wrote behind A"
        time.sleep(0.005)
    assert not b.returned.wait(0.3)
    assert (offset_of(store, g1), offset_of(store, g2)) == (1, 1)
    assert held.of("B") == []  # (its write was the native one)
    held.gate.set()
    for t in (a, b):
        assert t.returned.wait(10) and t.error is None, t.error
    assert (offset_of(store, g1), offset_of(store, g2)) == (10, 20)
    expected = store_state(store)
    store.close()
    with open_store(tmp_path) as again:
        assert store_state(again) == expected
        assert again.recovery_report.truncations == []


def _read(path: str, at: int, n: int) -> bytes:
    with open(path, "rb") as f:
        f.seek(at)
        return f.read(n)


def test_a_third_commit_queues_behind_a_follower_and_lands_after_it(tmp_path, monkeypatch):
    """At most one follower waits: a third commit queues, as it did before followers, and is
    written once the two before it are done (its offsets after theirs)."""
    store, (g1, g2, g3) = primed_store(tmp_path)
    held = HeldWrites("A")
    held.install(monkeypatch)
    a, b, c = (Committer("A", store, g1, 10), Committer("B", store, g2, 20),
               Committer("C", store, g3, 30))
    a.start()
    assert held.entered.wait(10)
    b.start()
    held.wait_for("B")
    c.start()
    time.sleep(0.3)
    assert len(held.writes) == 2 and not c.returned.is_set()
    held.gate.set()
    for t in (a, b, c):
        assert t.returned.wait(10) and t.error is None, t.error
    # (C's round is written by whoever leads it once B hands on: the async writer thread)
    assert len(held.writes) == 3
    (a_at, _), (b_at, b_len) = held.of("A")[0], held.of("B")[0]
    [(c_at, _)] = [(at, n) for who, at, n in held.writes if who not in ("A", "B")]
    assert a_at < b_at < c_at and c_at == b_at + b_len
    expected = store_state(store)
    assert [expected[g][TP("t", 0)].offset for g in (g1, g2, g3)] == [10, 20, 30]
    store.close()
    with open_store(tmp_path) as again:
        assert store_state(again) == expected


def test_a_follower_that_does_not_fit_the_reserve_writes_once_it_leads(tmp_path, monkeypatch):
    """A follower whose batch would run past the segment's reserve does not write beside its
    predecessor: it takes the Python path (which reserves more) once the leadership is its."""
    store, (g1, g2, _) = primed_store(tmp_path)
    active = store._writer.partitions[store.partition_of(g1)].log._active
    held = HeldWrites("A")
    held.install(monkeypatch)
    a, b = Committer("A", store, g1, 10), Committer("B", store, g2, 20)
    a.start()
    assert held.entered.wait(10)
    (a_at, a_len), = held.of("A")
    active.allocated = a_at + a_len  # (what the reserve is taken to be: A's end)
    b.start()
    time.sleep(0.3)
    assert held.of("B") == [] and not b.returned.is_set()
    held.gate.set()
    for t in (a, b):
        assert t.returned.wait(10) and t.error is None, t.error
    assert held.wait_for("B")[0] == a_at + a_len
    expected = store_state(store)
    assert [expected[g][TP("t", 0)].offset for g in (g1, g2)] == [10, 20]
    store.close()
    with open_store(tmp_path) as again:
        assert store_state(again) == expected


def test_a_failed_write_fails_its_follower_and_recovery_cuts_the_hole_before_it(
        tmp_path, monkeypatch):
    """The predecessor's write fails after its follower's batch reached the disk: both
    calls fail, the store is poisoned, and on reopen the follower's durable batch, which
    lies past a hole, is cut with it as a torn tail: nothing unacknowledged comes back."""
    store, (g1, g2, _) = primed_store(tmp_path)
    before = store_state(store)
    seg = last_segment(tmp_path, store.partition_of(g1))
    held = HeldWrites("A", fail_held=True)
    held.install(monkeypatch)
    a, b = held_then_behind(store, g1, g2, held)
    (a_at, a_len), (b_at, b_len) = held.of("A")[0], held.wait_for("B")
    time.sleep(0.1)
    held.gate.set()
    for t in (a, b):
        assert t.returned.wait(10)
        assert isinstance(t.error, StoreFailedError), t.error
    with pytest.raises(StoreFailedError):
        store.commit_sync(g1, {TP("t", 0): 11})
    monkeypatch.undo()
    store.close()
    with open(seg, "rb") as f:
        on_disk = f.read()
    assert not on_disk[a_at:a_at + a_len].strip(b"\0")  # the hole: A never reached the disk
    assert on_disk[b_at:b_at + b_len].strip(b"\0")  # B's batch did
    with open_store(tmp_path) as again:
        assert store_state(again) == before
        [t] = again.recovery_report.truncations
        assert (t.path, t.position) == (seg, a_at)
        assert t.bytes_dropped >= a_len + b_len
    assert os.path.getsize(seg) == a_at


def test_a_follower_whose_own_write_fails_poisons_the_store_after_its_predecessor(
        tmp_path, monkeypatch):
    store, (g1, g2, _) = primed_store(tmp_path)
    held = HeldWrites("A", fail="B")
    held.install(monkeypatch)
    a, b = held_then_behind(store, g1, g2, held)
    held.wait_for("B")
    time.sleep(0.1)
    assert not b.returned.is_set()  # (its failure waits for A as its success would)
    held.gate.set()
    assert_only_the_follower_failed(tmp_path, store, monkeypatch, a, b, g1, g2)


def test_commits_that_share_a_partition_lose_nothing_with_followers(tmp_path):
    """Threads whose groups share a log partition commit in a loop (followers and queued
    rounds mixed); every acknowledged offset is in the table and in the reopened log, and the
    log's offsets stay in order (recovery would refuse a batch out of order)."""
    store = open_store(tmp_path, partitions=PARTITIONS, fsync="always")
    groups = shared_groups(store, 3)
    acked: dict[str, int] = {}
    stop = threading.Event()

    def loop(g: str) -> None:
        n = 0
        while not stop.is_set():
            n += 1
            store.commit_sync(g, {TP("t", 0): n})
            acked[g] = n

    threads = [threading.Thread(target=loop, args=(g,)) for g in groups]
    for t in threads:
        t.start()
    time.sleep(1.0)
    stop.set()
    for t in threads:
        t.join()
    assert all(acked[g] > 0 for g in groups)
    assert {g: offset_of(store, g) for g in groups} == acked
    store.close()
    with open_store(tmp_path) as again:
        assert again.recovery_report.truncations == []
        assert {g: offset_of(again, g) for g in groups} == acked


def test_a_store_that_could_not_write_its_recovery_points_has_no_followers(tmp_path,
                                                                          monkeypatch):
    """Without RECOVERY-POINTS a hole before a batch reads as corruption, so a commit behind
    a lone write queues and is written after it, as before followers."""
    open_store(tmp_path, partitions=PARTITIONS).close()

    def refused(*_args):
        raise OSError(errno.EROFS, "injected")

    monkeypatch.setattr(recovery_points, "write", refused)
    os.remove(os.path.join(tmp_path, recovery_points.RECOVERY_POINTS_FILE))
    store, (g1, g2, _) = primed_store(tmp_path)
    assert not any(p.followable for p in store._writer.partitions)
    monkeypatch.undo()
    held = HeldWrites("A")
    held.install(monkeypatch)
    a, b = held_then_behind(store, g1, g2, held)
    time.sleep(0.3)
    assert held.of("B") == [] and len(held.writes) == 1
    held.gate.set()
    for t in (a, b):
        assert t.returned.wait(10) and t.error is None, t.error
    assert (offset_of(store, g1), offset_of(store, g2)) == (10, 20)
    store.close()


def test_a_commit_with_a_timeout_queues_instead_of_following_and_can_time_out(tmp_path,
                                                                             monkeypatch):
    """A follower cannot give up its wait, so a call with a timeout queues as before: it
    raises ``CommitTimeoutError`` while the write ahead of it is held, stays queued, and is
    applied once that write ends."""
    store, (g1, g2, _) = primed_store(tmp_path)
    held, a = held_first(store, g1, monkeypatch)
    with pytest.raises(CommitTimeoutError):
        store.commit_sync(g2, {TP("t", 0): 20}, timeout=0.2)
    assert len(held.writes) == 1  # (nothing written beside A's)
    held.gate.set()
    assert a.returned.wait(10) and a.error is None, a.error
    deadline = time.monotonic() + 10
    while offset_of(store, g2) != 20 and time.monotonic() < deadline:
        time.sleep(0.01)
    assert (offset_of(store, g1), offset_of(store, g2)) == (10, 20)
    store.close()


def test_a_follower_that_fails_before_its_write_waits_for_its_turn_to_fail(tmp_path,
                                                                          monkeypatch):
    """A follower whose batch cannot even be framed still waits for its predecessor before
    it poisons the store and gives the leadership up: the predecessor is acknowledged, the
    follower fails, and the store closes (no leadership left held or given up twice)."""
    import offsetlog.store.lone_commit as lone_mod

    store, (g1, g2, _) = primed_store(tmp_path)
    frame = lone_mod.frame_fields

    def frame_but_not_for_b(*args):
        if threading.current_thread().name == "B":
            raise RuntimeError("injected")
        return frame(*args)

    monkeypatch.setattr(lone_mod, "frame_fields", frame_but_not_for_b)
    held = HeldWrites("A")
    held.install(monkeypatch)
    a, b = held_then_behind(store, g1, g2, held)
    assert not b.returned.wait(0.3)
    held.gate.set()
    assert_only_the_follower_failed(tmp_path, store, monkeypatch, a, b, g1, g2)
