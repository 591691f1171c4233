"""``offsetlog.log.uring``: the io_uring ring the wire server's writes go through, against the
real kernel (skipped where there is no io_uring), and the segment's begun-elsewhere write
(``begin_durable`` / ``end_durable``) that it makes."""

from __future__ import annotations

import errno
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
    monkeypatch.setattr(uring.platform, "machine", lambda: "aarch64")
    assert uring.open_ring(8) is None  # loads and stores are not ordered enough there
    monkeypatch.setattr(uring.platform, "machine", lambda: "x86_64")
    monkeypatch.setenv("OFFSETLOG_IO_URING", "0")
    assert uring.open_ring(8) is None  # the operator said no
    monkeypatch.delenv("OFFSETLOG_IO_URING")

    def refused(*_args):
        raise OSError(errno.EPERM, "io_uring is disabled")
    monkeypatch.setattr(uring, "_syscall", refused)
    assert uring.open_ring(8) is None


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


def test_writes_the_kernel_did_not_take_are_taken_back_as_no_ops(ring, tmp_path, monkeypatch):
    fd = os.open(tmp_path / "f", os.O_RDWR | os.O_CREAT)
    for i in range(3):
        assert ring.write(fd, b"w", i, 0, i)
    real = uring._syscall
    monkeypatch.setattr(uring, "_syscall", lambda *a: (_ for _ in ()).throw(
        OSError(errno.EAGAIN, "no resources")) if a[0] == uring._ENTER else real(*a))
    with pytest.raises(OSError):
        ring.submit()
    assert ring.take_back() == [0, 1, 2]
    assert ring.take_back() == []  # once
    monkeypatch.setattr(uring, "_syscall", real)
    ring.submit()  # the no-ops go through and complete; nobody hears of them
    for _ in range(100):
        if ring.in_flight == 0:
            break
        ring.wait()
        assert ring.reap() == []
    assert ring.in_flight == 0 and os.path.getsize(tmp_path / "f") == 0  # nothing written
    os.close(fd)
