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
_fallocate = getattr(os, "posix_fallocate", None)

#: Space the active segment reserves ahead of its end. Appending changes the file size, and a
#: size change makes every fdatasync commit the filesystem journal too; writing into space
#: allocated earlier does not (measured here: 205 µs per append + fdatasync, 138 µs per write
#: into fallocated space + fdatasync). The reserve reads back as zeros, which recovery treats
#: as the end of the log (docs/FORMAT.md, "Preallocated space"), and is cut off when the
#: segment is rolled or closed.
PREALLOCATE_BYTES = 1 << 20


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


def read_file(path: str, start: int = 0, size: int = -1) -> bytes:
    """The bytes of ``path`` from byte ``start`` on (at most ``size`` of them)."""
    with open(path, "rb") as f:
        if start:
            f.seek(start)
        return f.read(size)


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
    """An open segment file that is written only at its end (``size``), into space reserved
    ahead of it (``allocated``; see ``PREALLOCATE_BYTES``).

    The fd's file position is kept at ``size`` (no ``O_APPEND``: the file is longer than its
    data while space is reserved), so writes go through ``_write`` like every other write.
    """

    __slots__ = ("path", "base_offset", "fd", "size", "allocated", "limit", "failed")

    def __init__(self, path: str, base_offset: int, fd: int, size: int,
                 limit: int = 0) -> None:
        self.path = path
        self.base_offset = base_offset
        self.fd = fd
        self.size = size
        self.allocated = size
        #: a write failed: what is on disk past ``size`` is unknown, so leave it all to recovery
        self.failed = False
        #: never reserve past this size (the segment rolls there); 0 disables preallocation
        self.limit = limit

    @classmethod
    def create(cls, path: str, base_offset: int, *, limit: int = 0) -> "SegmentFile":
        fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o644)
        try:
            fsync_dir(os.path.dirname(os.path.abspath(path)))
        except BaseException:
            os.close(fd)
            raise
        return cls(path, base_offset, fd, 0, limit)

    @classmethod
    def open_existing(cls, path: str, base_offset: int, *, limit: int = 0) -> "SegmentFile":
        """Open for appending at the file's end (recovery has cut any torn or reserved
        tail, so the file's size is its data)."""
        fd = os.open(path, os.O_WRONLY)
        size = os.lseek(fd, 0, os.SEEK_END)
        return cls(path, base_offset, fd, size, limit)

    def append(self, data) -> None:
        end = self.size + len(data)
        try:
            if end > self.allocated and self.limit:
                self._reserve(end)
            write_all(self.fd, data)
        except BaseException:
            self.failed = True
            raise
        self.size = end

    def _reserve(self, end: int) -> None:
        want = max(end, min(self.size + PREALLOCATE_BYTES, self.limit))
        if _fallocate is not None:
            try:
                _fallocate(self.fd, self.allocated, want - self.allocated)
            except OSError:
                # Not supported here (some filesystems): append as before, growing the file.
                self.limit = 0
                return
        self.allocated = want

    def trim(self) -> None:
        """Give back the reserved space past ``size`` (before a roll or close)."""
        if self.allocated > self.size and not self.failed:
            os.ftruncate(self.fd, self.size)
            self.allocated = self.size

    def sync(self) -> None:
        sync_fd(self.fd)

    def close(self) -> None:
        if self.fd >= 0:
            fd, self.fd = self.fd, -1
            os.close(fd)
