"""File I/O for segments and store files: the only module that opens log files or fsyncs.

Every write and sync goes through the module-level ``_write`` / ``_sync`` names so tests can
inject failures (``monkeypatch.setattr(segment, "_sync", failing)``), as LevelDB's fault
injection Env does. Callers treat any ``OSError`` from here as fatal for the store: after a
failed fsync the kernel may have dropped dirty pages, so retrying could acknowledge data that
is not on disk (the "fsyncgate" lesson).
"""

from __future__ import annotations

import os

_write = os.write
_sync = getattr(os, "fdatasync", os.fsync)  # data + the size needed to read it back
_fsync = os.fsync


def write_all(fd: int, data) -> None:
    n = _write(fd, data)
    if n == len(data):  # the usual case: one call, no copying
        return
    view = memoryview(data)[n:]
    while view:
        n = _write(fd, view)
        view = view[n:]


def sync_fd(fd: int) -> None:
    _sync(fd)


def fsync_dir(path: str) -> None:
    """Make a directory's entries (new files, renames) durable."""
    fd = os.open(path, os.O_RDONLY | os.O_DIRECTORY)
    try:
        _fsync(fd)
    finally:
        os.close(fd)


def fsync_file(path: str) -> None:
    fd = os.open(path, os.O_RDONLY)
    try:
        _fsync(fd)
    finally:
        os.close(fd)


def make_dir(path: str) -> bool:
    """Create ``path`` (and make its entry durable). True if it was created."""
    try:
        os.mkdir(path)
    except FileExistsError:
        return False
    fsync_dir(os.path.dirname(os.path.abspath(path)))
    return True


def read_file(path: str, start: int = 0) -> bytes:
    """The bytes of ``path`` from byte ``start`` on."""
    with open(path, "rb") as f:
        if start:
            f.seek(start)
        return f.read()


def atomic_write(path: str, data: bytes) -> None:
    """Replace ``path`` with ``data`` so that a crash leaves the old or the new file whole."""
    tmp = path + ".tmp"
    fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o644)
    try:
        write_all(fd, data)
        _fsync(fd)
    finally:
        os.close(fd)
    os.replace(tmp, path)
    fsync_dir(os.path.dirname(os.path.abspath(path)))


def truncate_file(path: str, size: int) -> None:
    fd = os.open(path, os.O_WRONLY)
    try:
        os.ftruncate(fd, size)
        _fsync(fd)
    finally:
        os.close(fd)


class SegmentFile:
    """An open, append-only segment file."""

    __slots__ = ("path", "base_offset", "fd", "size")

    def __init__(self, path: str, base_offset: int, fd: int, size: int) -> None:
        self.path = path
        self.base_offset = base_offset
        self.fd = fd
        self.size = size

    @classmethod
    def create(cls, path: str, base_offset: int) -> "SegmentFile":
        fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_APPEND, 0o644)
        try:
            fsync_dir(os.path.dirname(os.path.abspath(path)))
        except BaseException:
            os.close(fd)
            raise
        return cls(path, base_offset, fd, 0)

    @classmethod
    def open_existing(cls, path: str, base_offset: int) -> "SegmentFile":
        fd = os.open(path, os.O_WRONLY | os.O_APPEND)
        return cls(path, base_offset, fd, os.fstat(fd).st_size)

    def append(self, data) -> None:
        write_all(self.fd, data)
        self.size += len(data)

    def sync(self) -> None:
        sync_fd(self.fd)

    def close(self) -> None:
        if self.fd >= 0:
            fd, self.fd = self.fd, -1
            os.close(fd)
