"""``offsetlog.log.uring``: the io_uring ring the wire server's writes go through (native:
``native/src/uring.rs``), against the real kernel (skipped where there is no io_uring), and
the segment's begun-elsewhere write (``begin_durable`` / ``end_durable``) that it makes."""

from __future__ import annotations

import errno
import gc
import os

import pytest

from offsetlog.log import segment as segment_mod
from offsetlog.log import uring
from offsetlog.log.segment import SegmentFile


@pytest.fixture
def ring():
    r = uring.open_ring(8)
    if r is None:
        pytest.skip("no io_uring here")
    yield r
    r.close()


def _all_done(ring, n: int) -> list:
    done: list = []
    while len(done) < n:
        ring.wait()
        done += ring.reap()
    return done


def test_writes_land_at_their_offsets_and_complete_with_their_tokens(ring, tmp_path):
    efd = os.eventfd(0, os.EFD_NONBLOCK)
    ring.register_eventfd(efd)
    fd = os.open(tmp_path / "f", os.O_RDWR | os.O_CREAT)
    pieces = [bytes([65 + i]) * (i + 1) for i in range(5)]
    at = 0
    for i, piece in enumerate(pieces):
        assert ring.write(fd, piece, at, os.RWF_DSYNC, f"w{i}")
        at += len(piece)
    assert ring.in_flight == 5
    ring.submit()
    done = _all_done(ring, 5)
    assert sorted(done) == [(f"w{i}", len(p)) for i, p in enumerate(pieces)]
    assert ring.in_flight == 0
    assert os.eventfd_read(efd) >= 1  # completions signalled the driver's eventfd
    with open(tmp_path / "f", "rb") as f:
        assert f.read() == b"".join(pieces)
    os.close(fd)
    os.close(efd)


def test_a_failed_write_completes_with_minus_errno(ring, tmp_path):
    fd = os.open(tmp_path / "f", os.O_RDONLY | os.O_CREAT)  # not open for writing
    assert ring.write(fd, b"x", 0, os.RWF_DSYNC, "bad")
    ring.submit()
    assert _all_done(ring, 1) == [("bad", -errno.EBADF)]
    os.close(fd)


def test_a_full_ring_takes_no_more_until_reaped(ring, tmp_path):
    fd = os.open(tmp_path / "f", os.O_RDWR | os.O_CREAT)
    taken = [ring.write(fd, b"y", i, 0, i) for i in range(ring.capacity + 3)]
    assert taken == [True] * ring.capacity + [False] * 3
    ring.submit()
    assert len(_all_done(ring, ring.capacity)) == ring.capacity
    assert ring.write(fd, b"z", 0, 0, "again")
    ring.submit()
    assert _all_done(ring, 1) == [("again", 1)]
    os.close(fd)


def test_close_waits_for_what_is_in_flight(tmp_path):
    r = uring.open_ring(8)
    if r is None:
        pytest.skip("no io_uring here")
    fd = os.open(tmp_path / "f", os.O_RDWR | os.O_CREAT)
    for i in range(4):
        assert r.write(fd, b"abcd", 4 * i, os.RWF_DSYNC, i)
    r.close()  # queued, not even submitted: close starts them and waits
    assert r.closed and r.in_flight == 0
    with open(tmp_path / "f", "rb") as f:
        assert f.read() == b"abcd" * 4
    os.close(fd)


def test_no_ring_where_the_platform_or_the_kernel_has_none(monkeypatch):
    monkeypatch.setenv("OFFSETLOG_IO_URING", "0")
    assert uring.open_ring(8) is None  # the operator said no
    monkeypatch.delenv("OFFSETLOG_IO_URING")
    monkeypatch.setattr(uring, "Ring", None)
    assert uring.open_ring(8) is None  # a core built without one (not Linux)
    monkeypatch.undo()

    def refused(_entries):
        raise OSError(errno.EPERM, "io_uring is disabled")  # seccomp, the sysctl
    monkeypatch.setattr(uring, "Ring", refused)
    assert uring.open_ring(8) is None


def test_a_ring_the_kernel_refuses_is_an_oserror_with_its_errno():
    if uring.open_ring(8) is None:
        pytest.skip("no io_uring here")
    with pytest.raises(OSError) as e:
        uring.Ring(0)  # io_uring_setup(0): EINVAL
    assert e.value.errno == errno.EINVAL
    assert uring.open_ring(0) is None


def test_a_closed_ring_answers_ebadf_and_closes_again(tmp_path):
    r = uring.open_ring(8)
    if r is None:
        pytest.skip("no io_uring here")
    r.close()
    r.close()  # idempotent
    assert r.closed and r.in_flight == 0 and r.queued == 0
    fd = os.open(tmp_path / "f", os.O_RDWR | os.O_CREAT)
    for use in (lambda: r.write(fd, b"x", 0, 0, "t"), r.submit, r.wait, r.reap, r.take_back,
                lambda: r.register_eventfd(fd)):
        with pytest.raises(OSError) as e:
            use()
        assert e.value.errno == errno.EBADF
    os.close(fd)


def test_bad_arguments_queue_nothing(ring, tmp_path):
    fd = os.open(tmp_path / "f", os.O_RDWR | os.O_CREAT)
    with pytest.raises(OSError) as e:
        ring.write(fd, b"x", -1, 0, "t")  # as pwrite: EINVAL (to io_uring, the file position)
    assert e.value.errno == errno.EINVAL
    with pytest.raises(TypeError):
        ring.write(fd, bytearray(b"x"), 0, 0, "t")  # only bytes: the kernel reads the buffer
    assert ring.in_flight == 0 and ring.queued == 0
    os.close(fd)


def test_a_ring_collected_unclosed_waits_for_its_writes_first(tmp_path):
    """The kernel reads an in-flight write's bytes: a ring let go without close() waits for
    what it has submitted before the buffers go (what it only queued is never made)."""
    r = uring.open_ring(8)
    if r is None:
        pytest.skip("no io_uring here")
    fd = os.open(tmp_path / "f", os.O_RDWR | os.O_CREAT)
    for i in range(4):
        assert r.write(fd, bytes([48 + i]) * 4096, 4096 * i, os.RWF_DSYNC, i)
    r.submit()
    del r
    gc.collect()
    with open(tmp_path / "f", "rb") as f:
        assert f.read() == b"".join(bytes([48 + i]) * 4096 for i in range(4))
    os.close(fd)


# -- the segment's side: a durable write begun here and made elsewhere ----------------------

def test_a_write_begun_here_and_made_elsewhere_moves_the_segment_on(tmp_path):
    seg = SegmentFile.create(str(tmp_path / "s.log"), 0, limit=1 << 20)
    at = seg.begin_durable(b"hello")
    assert at == 0 and seg.size == 0 and seg.allocated > 5  # reserved, not yet counted
    seg.end_durable(b"hello", os.pwritev(seg.fd, [b"hello"], at, os.RWF_DSYNC))
    assert (seg.size, seg.dsync) == (5, True)
    seg.append(b"!")  # the file position follows (pwritev2 left it behind)
    seg.trim()
    seg.close()
    with open(tmp_path / "s.log", "rb") as f:
        assert f.read() == b"hello!"


def test_a_short_write_made_elsewhere_is_finished_here(tmp_path):
    seg = SegmentFile.create(str(tmp_path / "s.log"), 0, limit=1 << 20)
    at = seg.begin_durable(b"abcdef")
    os.pwrite(seg.fd, b"ab", at)
    seg.end_durable(b"abcdef", 2)  # the kernel wrote 2 bytes of 6
    assert seg.size == 6
    seg.trim()
    seg.close()
    with open(tmp_path / "s.log", "rb") as f:
        assert f.read() == b"abcdef"


def test_a_refusal_made_elsewhere_rewrites_with_write_and_fdatasync(tmp_path, monkeypatch):
    synced = []
    real_sync = segment_mod._sync
    monkeypatch.setattr(segment_mod, "_sync", lambda fd: (synced.append(fd), real_sync(fd)))
    seg = SegmentFile.create(str(tmp_path / "s.log"), 0, limit=1 << 20)
    at = seg.begin_durable(b"data")
    seg.end_durable(b"data", OSError(errno.EOPNOTSUPP, "no RWF_DSYNC"))
    assert (seg.size, seg.dsync, synced) == (4, False, [seg.fd])
    assert seg.begin_durable(b"more") is None  # refused for good: append_durable's way now
    seg.trim()
    seg.close()
    with open(tmp_path / "s.log", "rb") as f:
        assert f.read() == b"data"
    assert at == 0


def test_an_error_after_dsync_worked_fails_the_segment(tmp_path):
    seg = SegmentFile.create(str(tmp_path / "s.log"), 0, limit=1 << 20)
    seg.append_durable(b"ok")
    at = seg.begin_durable(b"lost")
    with pytest.raises(OSError):
        seg.end_durable(b"lost", OSError(errno.EIO, "I/O error"))
    assert (seg.failed, seg.size, at) == (True, 2, 2)
    seg.close()


def test_completions_that_overflowed_the_queue_are_still_reaped(tmp_path):
    """More completions than the completion queue holds (the store never lets that happen:
    ``capacity``) wait in the kernel's overflow list; reap moves them over, none is lost."""
    import time

    r = uring.open_ring(8)
    if r is None:
        pytest.skip("no io_uring here")
    r.capacity = 10_000  # past the queue's room, on purpose
    fd = os.open(tmp_path / "f", os.O_RDWR | os.O_CREAT)
    n = 0
    for _ in range(5):  # 40 completions for a queue of 16
        for _ in range(8):
            assert r.write(fd, b"z", n, 0, n)
            n += 1
        r.submit()
        time.sleep(0.05)
    done: list = []
    for _ in range(100):
        done += r.reap()
        if len(done) == n:
            break
        time.sleep(0.01)
    assert sorted(token for token, _ in done) == list(range(n))
    r.close()
    os.close(fd)


def test_writes_the_kernel_did_not_take_are_taken_back_and_never_made(ring, tmp_path,
                                                                      monkeypatch):
    """After a refused submit (EAGAIN): take_back hands the queued writes' tokens back, once;
    the kernel never makes them (their entries stay in the ring, which is not asked to take
    from it again), and the next write, nothing being in flight, goes to a new ring."""
    efd = os.eventfd(0, os.EFD_NONBLOCK)
    ring.register_eventfd(efd)
    fd = os.open(tmp_path / "f", os.O_RDWR | os.O_CREAT)
    for i in range(3):
        assert ring.write(fd, b"w", i, 0, i)

    def refused(self):
        raise OSError(errno.EAGAIN, "no resources")
    monkeypatch.setattr(uring.Ring, "submit", refused)
    with pytest.raises(OSError):
        ring.submit()
    monkeypatch.undo()
    assert ring.take_back() == [0, 1, 2]
    assert ring.take_back() == []  # once
    assert ring.in_flight == 0 and ring.queued == 0
    ring.submit()  # nothing queued: the taken-back entries stay where they are
    ring.wait()  # nothing in flight: at once
    assert ring.reap() == []
    assert ring.write(fd, b"new", 10, 0, "new")  # a new ring (the eventfd registered again)
    ring.submit()
    assert _all_done(ring, 1) == [("new", 3)]
    assert os.eventfd_read(efd) >= 1
    ring.close()
    with open(tmp_path / "f", "rb") as f:
        assert f.read() == bytes(10) + b"new"  # none of the taken-back writes
    os.close(fd)
    os.close(efd)
