"""Pipelined lone commits (native/src/pipeline.rs): a ``commit_sync`` that finds its log
partition's lone leader with its write in flight writes its own batch behind that one, and is
acknowledged only after it.

The tests hold the leader's write in ``segment._write_dsync`` (which the native path calls
when a test replaces it) and watch what the second committer does meanwhile: without the
pipeline, its write would not start until the leader's ended, and the tests would fail on
their first wait.
"""

from __future__ import annotations

import errno
import threading

import pytest

import offsetlog.log.segment as segment
from offsetlog import OffsetAndMetadata as OAM
from offsetlog import OffsetStore
from offsetlog import TopicPartition as TP
from offsetlog.errors import StoreFailedError

WAIT = 10.0  # seconds: long enough never to be reached on a working engine


class HeldWrite:
    """A ``_write_dsync`` that holds the first write made once ``arm()`` was called until
    ``release`` is set (or, with ``fail_first``, then raises EIO having written nothing), and
    fails every later write if ``fail_later``. Records each armed write's ``(offset, length)`` and
    sets ``second_done`` when a write after the held one has returned or raised."""

    def __init__(self, *, fail_first: bool = False, fail_later: bool = False) -> None:
        self.real = segment._write_dsync
        self.fail_first, self.fail_later = fail_first, fail_later
        self.armed = False
        self.first_in = threading.Event()
        self.release = threading.Event()
        self.second_done = threading.Event()
        self.second_started_while_held = False
        self.writes: list[tuple[int, int]] = []
        self._lock = threading.Lock()

    def arm(self) -> None:
        self.armed = True

    def __call__(self, fd: int, data, offset: int) -> int:
        with self._lock:
            first = self.armed and not self.first_in.is_set()
            if first:
                self.first_in.set()
            elif self.armed and not self.release.is_set():
                self.second_started_while_held = True
            if self.armed:
                self.writes.append((offset, len(data)))
        if first:
            assert self.release.wait(WAIT), "the held write was never released"
            if self.fail_first:
                raise OSError(errno.EIO, "injected I/O error")
            return self.real(fd, data, offset)
        try:
            if self.armed and self.fail_later:
                raise OSError(errno.EIO, "injected I/O error")
            return self.real(fd, data, offset)
        finally:
            if self.armed:
                self.second_done.set()


def _open(path, **options) -> OffsetStore:
    """A one-partition store whose active segment already took an ``RWF_DSYNC`` write (the
    pipeline follows the usual write only)."""
    store = OffsetStore.open(str(path), partitions=1, fsync="always", **options)
    store.commit_sync("warm-up", {TP("t", 0): 0})
    if not store._writer.partitions[0].log._active.dsync:
        store.close()
        pytest.skip("RWF_DSYNC refused on this filesystem: no usual write to follow")
    return store


class Committer(threading.Thread):
    def __init__(self, store: OffsetStore, group: str, offset: int) -> None:
        super().__init__(daemon=True)
        self.store, self.group, self.offset = store, group, offset
        self.error: BaseException | None = None
        self.returned = threading.Event()

    def run(self) -> None:
        try:
            self.store.commit_sync(self.group, {TP("t", 0): self.offset})
        except BaseException as e:
            self.error = e
        finally:
            self.returned.set()


def _start_pair(store, hold: HeldWrite) -> tuple[Committer, Committer]:
    """The leader (``g-a``) held in its write, then the follower (``g-b``) run until its own
    write has ended."""
    hold.arm()
    a = Committer(store, "g-a", 1)
    a.start()
    assert hold.first_in.wait(WAIT), "the leader's write never started"
    b = Committer(store, "g-b", 2)
    b.start()
    assert hold.second_done.wait(WAIT), "the second commit did not write behind the first"
    assert hold.second_started_while_held
    return a, b


def test_a_commit_writes_behind_the_leaders_write_and_returns_after_it(tmp_path, monkeypatch):
    hold = HeldWrite()
    monkeypatch.setattr(segment, "_write_dsync", hold)
    store = _open(tmp_path)
    try:
        a, b = _start_pair(store, hold)
        # durable, but not acknowledged nor visible before the write ahead of it
        assert not b.returned.wait(0.2)
        assert store.fetch("g-b") == {}
        hold.release.set()
        a.join(WAIT)
        b.join(WAIT)
        assert a.error is None and b.error is None
        (at_a, len_a), (at_b, _) = hold.writes[-2:]
        assert at_b == at_a + len_a  # the next bytes of the segment
        assert store.fetch("g-a") == {TP("t", 0): OAM(1)}
        assert store.fetch("g-b") == {TP("t", 0): OAM(2)}
        part = store._writer.partitions[0]
        assert not part.leader_active and not part.follower
        assert part.log._active.size == at_b + hold.writes[-1][1]
        store.commit_sync("g-a", {TP("t", 0): 3})  # the partition goes on as usual
    finally:
        store.close()
    with OffsetStore.open(str(tmp_path)) as again:
        assert again.recovery_report.partitions[0].truncated is None
        assert again.fetch("g-a") == {TP("t", 0): OAM(3)}
        assert again.fetch("g-b") == {TP("t", 0): OAM(2)}


def test_a_failed_leader_write_fails_the_follower_and_recovery_cuts_its_bytes(
        tmp_path, monkeypatch):
    """The follower's batch reached the disk behind a write that failed (zeros there): it is
    never acknowledged, and the next open cuts it with the torn tail (the recovery point
    never covered it) rather than refusing the store as corrupt."""
    hold = HeldWrite(fail_first=True)
    monkeypatch.setattr(segment, "_write_dsync", hold)
    store = _open(tmp_path)
    try:
        a, b = _start_pair(store, hold)
        hold.release.set()
        a.join(WAIT)
        b.join(WAIT)
        assert isinstance(a.error, StoreFailedError)
        assert isinstance(b.error, StoreFailedError)
        assert store.fetch("g-a") == {} and store.fetch("g-b") == {}
        with pytest.raises(StoreFailedError):
            store.commit_sync("g-c", {TP("t", 0): 9})
    finally:
        store.close()
    monkeypatch.setattr(segment, "_write_dsync", hold.real)
    with OffsetStore.open(str(tmp_path)) as again:
        torn = again.recovery_report.partitions[0].truncated
        assert torn is not None and torn.position == hold.writes[-2][0]
        assert again.fetch("warm-up") == {TP("t", 0): OAM(0)}
        assert again.fetch("g-a") == {} and again.fetch("g-b") == {}


def test_a_failed_follower_write_leaves_the_leaders_commit_and_poisons(tmp_path, monkeypatch):
    hold = HeldWrite(fail_later=True)
    monkeypatch.setattr(segment, "_write_dsync", hold)
    store = _open(tmp_path)
    try:
        a, b = _start_pair(store, hold)
        hold.release.set()
        a.join(WAIT)
        b.join(WAIT)
        assert a.error is None
        assert isinstance(b.error, StoreFailedError)
        assert store.fetch("g-a") == {TP("t", 0): OAM(1)} and store.fetch("g-b") == {}
        with pytest.raises(StoreFailedError):
            store.commit_sync("g-c", {TP("t", 0): 9})
    finally:
        store.close()
    monkeypatch.setattr(segment, "_write_dsync", hold.real)
    with OffsetStore.open(str(tmp_path)) as again:
        assert again.fetch("g-a") == {TP("t", 0): OAM(1)}
        assert again.fetch("g-b") == {}


def test_a_follower_that_would_pass_the_segments_end_writes_after_the_leader(
        tmp_path, monkeypatch):
    """No room behind the leader's batch before the segment rolls: the follower writes
    nothing ahead, and once it leads, rolls and writes as a leader would."""
    hold = HeldWrite()
    monkeypatch.setattr(segment, "_write_dsync", hold)
    probe = OffsetStore.open(str(tmp_path / "probe"), partitions=1, fsync="always")
    probe.commit_sync("warm-up", {TP("t", 0): 0})
    start = probe._writer.partitions[0].log._active.size
    probe.commit_sync("g-a", {TP("t", 0): 1})
    one = probe._writer.partitions[0].log._active.size - start  # one such commit's batch
    probe.close()
    store = _open(tmp_path / "store", segment_bytes=max(1024, start + one + one // 2))
    try:
        part = store._writer.partitions[0]
        while part.log._active.size + 2 * one <= store.config.segment_bytes:
            store.commit_sync("g-a", {TP("t", 0): 1})  # (the size of the two below)
        end, first_segment = part.log._active.size, part.log._active.base_offset
        hold.arm()
        a = Committer(store, "g-a", 1)
        a.start()
        assert hold.first_in.wait(WAIT)
        b = Committer(store, "g-b", 2)
        b.start()
        assert not hold.second_done.wait(0.3)  # nothing written ahead
        assert not b.returned.is_set()
        hold.release.set()
        a.join(WAIT)
        b.join(WAIT)
        assert a.error is None and b.error is None
        assert not hold.second_started_while_held
        assert hold.writes[0][0] == end  # the leader's batch fit in the segment
        assert part.log._active.base_offset > first_segment  # rolled for the follower's
    finally:
        store.close()
    with OffsetStore.open(str(tmp_path / "store")) as again:
        assert again.fetch("g-a") == {TP("t", 0): OAM(1)}
        assert again.fetch("g-b") == {TP("t", 0): OAM(2)}


def test_many_committers_sharing_partitions_lose_and_reorder_nothing(tmp_path):
    """Committers two or three to a log partition (so followers come and go with rounds and
    the async writer between them): each key ends at its thread's last commit, in the store
    and after a reopen."""
    store = OffsetStore.open(str(tmp_path), partitions=3, fsync="always", segment_bytes=4096)
    last: dict[str, int] = {}

    def worker(t: int) -> None:
        for n in range(1, 120):
            if n % 7:
                store.commit_sync(f"g{t}", {TP("t", 0): n})
            else:
                store.commit_async(f"g{t}", {TP("t", 0): n}).result(WAIT)
            last[f"g{t}"] = n

    threads = [threading.Thread(target=worker, args=(t,)) for t in range(8)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(60)
    try:
        assert len(last) == 8 and set(last.values()) == {119}
        for g in last:
            assert store.fetch(g) == {TP("t", 0): OAM(119)}
    finally:
        store.close()
    with OffsetStore.open(str(tmp_path)) as again:
        assert again.recovery_report.clean
        for g in last:
            assert again.fetch(g) == {TP("t", 0): OAM(119)}
