"""File I/O for segments and store files: the only module that opens log files or fsyncs.

Every write and sync goes through the module-level ``_write`` / ``_sync`` / ``_write_dsync``
names so tests can inject failures (``monkeypatch.setattr(segment, "_sync", failing)``), as
LevelDB's fault injection Env does. Callers treat any ``OSError`` from here as fatal for the
store: after a failed fsync the kernel may have dropped dirty pages, so retrying could
acknowledge data that is not on disk (the "fsyncgate" lesson).
"""

from __future__ import annotations

import errno
import logging
import os
import stat

from offsetlog.errors import StoreFileError, SymlinkError
from offsetlog.log import _native

log = logging.getLogger("offsetlog.log.segment")

#: Mode of every directory the store creates, set with an explicit ``chmod`` so that no umask
#: can make it group- or world-writable (whoever can write into a store directory can plant
#: files there). Group members may read: operators' tools often run in the owner's group.
DIR_MODE = 0o750
#: Mode of the files the store creates (less the umask): never writable by others.
FILE_MODE = 0o644

#: Every store file is opened with these: never through a symbolic link (docs/FORMAT.md,
#: "Directory layout"), and never inherited by a child process.
_NOFOLLOW = os.O_NOFOLLOW | os.O_CLOEXEC


def open_fd(path: str, flags: int, mode: int = FILE_MODE, *, directory: bool = False) -> int:
    """``os.open`` of a store file (or, with ``directory``, a store directory) that refuses
    symbolic links and anything that is not a regular file (or a directory).

    :raises SymlinkError: ``path`` is a symbolic link
    :raises StoreFileError: ``path`` is something else than expected (a directory named like
        a segment, a FIFO, ...)
    """
    try:
        fd = os.open(path, flags | _NOFOLLOW | (os.O_DIRECTORY if directory else 0), mode)
    except OSError as e:
        if e.errno in (errno.ELOOP, errno.EEXIST, errno.ENOTDIR) and os.path.islink(path):
            raise SymlinkError(f"{path} is a symbolic link: a store never opens its files "
                               "through one", path=path) from None
        if e.errno in (errno.EISDIR, errno.ENOTDIR):
            raise StoreFileError(f"{path} is not a {'directory' if directory else 'regular file'}"
                                 f" ({e.strerror})", path=path) from None
        raise
    if not directory:
        try:
            kind = os.fstat(fd).st_mode
        except BaseException:
            os.close(fd)
            raise
        if not stat.S_ISREG(kind):
            os.close(fd)
            raise StoreFileError(f"{path} is not a regular file", path=path)
    return fd


def check_not_symlink(path: str) -> None:
    """Raise ``SymlinkError`` if ``path`` is a symbolic link (for paths that a library opens,
    such as LMDB's files, where ``O_NOFOLLOW`` cannot be passed)."""
    if os.path.islink(path):
        raise SymlinkError(f"{path} is a symbolic link: a store never opens its files through "
                           "one", path=path)

_write = os.write
_sync = getattr(os, "fdatasync", os.fsync)  # data + the size needed to read it back
_fsync = os.fsync
_fallocate = getattr(os, "posix_fallocate", None)


#: the combined write + data sync of ``SegmentFile.append_durable``: ``_write_dsync(fd, data,
#: offset)`` writes ``data`` at ``offset`` and returns once it is as durable as ``fdatasync``
#: would make it, ``pwritev2(RWF_DSYNC)``, a per-write ``O_DSYNC`` (Linux >= 4.7), with the
#: GIL released for the wait (the native core's ``pwrite_dsync``). Returns the number of bytes
#: written, which may be short; the file position does not move. None where the platform has
#: no ``pwritev2``/``RWF_DSYNC`` (then it is ``_write`` + ``_sync``, as elsewhere).
_write_dsync = (getattr(_native, "pwrite_dsync", None) if hasattr(os, "RWF_DSYNC") else None)

#: Where the store has a WRITE-AHEAD file (``offsetlog.log.write_ahead``), the usual write of
#: a commit that nothing would share a round with is still the segment's own ``RWF_DSYNC``
#: write (native, with no entry); if this is set, it is called after each such write as
#: ``_durable_observer(fd, start, end)`` with the range made durable. The crash harness's
#: child logs those ranges as synced (docs/CRASHTEST.md); nothing else sets it.
_durable_observer = None

#: How a kernel, C library or filesystem refuses ``RWF_DSYNC`` on the first try: EOPNOTSUPP
#: (a kernel that does not know the flag; glibc when the kernel lacks pwritev2), ENOSYS (no
#: pwritev2 at all), EINVAL (a filesystem without an fsync operation; the data may then be in
#: the page cache already). The first two are raised before anything is written; for EINVAL
#: that is not certain, which is why the fallback rewrites the *same bytes at the same
#: offset*: whatever the refused call wrote is overwritten with itself, never appended twice.
#: NotImplementedError: a Python built with RWF_DSYNC but without pwritev2 rejects the flag.
_REFUSED_ERRNOS = frozenset((errno.EOPNOTSUPP, errno.ENOTSUP, errno.ENOSYS, errno.EINVAL))

#: Space the active segment reserves ahead of its end. Appending changes the file size, and a
#: size change makes every fdatasync commit the filesystem journal too; writing into space
#: allocated earlier does not, which makes a sync about a third cheaper on the disks measured
#: (bench/RESULTS.md). The reserve reads back as zeros, which recovery treats
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


def _refused(error: BaseException) -> bool:
    return isinstance(error, NotImplementedError) or error.errno in _REFUSED_ERRNOS


def fsync_dir(path: str) -> None:
    """Make a directory's entries (new files, renames) durable. (Through a link if ``path``
    is one: a store's parent may be, and an fsync writes nothing; the store's own directories
    are checked where they are listed.)"""
    fd = os.open(path, os.O_RDONLY | os.O_DIRECTORY | os.O_CLOEXEC)
    try:
        _fsync(fd)
    finally:
        os.close(fd)


def fsync_file(path: str) -> None:
    fd = open_fd(path, os.O_RDONLY)
    try:
        _fsync(fd)
    finally:
        os.close(fd)


def make_dir(path: str) -> bool:
    """Create ``path`` with ``DIR_MODE`` (and make its entry durable). True if it was created.

    :raises SymlinkError: ``path`` is a symbolic link (to a directory or not)
    :raises StoreFileError: ``path`` exists and is not a directory
    """
    try:
        os.mkdir(path, DIR_MODE)
    except FileExistsError:
        check_dir(path)
        return False
    os.chmod(path, DIR_MODE)  # the umask may have taken bits; no umask may add any
    fsync_dir(os.path.dirname(os.path.abspath(path)))
    return True


def make_dirs(path: str) -> None:
    """``make_dir`` of ``path`` and of every missing directory above it."""
    path = os.path.abspath(path)
    parent = os.path.dirname(path)
    if parent != path and not os.path.lexists(parent):
        make_dirs(parent)
    make_dir(path)


def check_dir(path: str) -> None:
    """Raise unless ``path`` is a real directory (not a link to one)."""
    st = os.lstat(path)
    if stat.S_ISLNK(st.st_mode):
        raise SymlinkError(f"{path} is a symbolic link: a store never uses a directory "
                           "through one", path=path)
    if not stat.S_ISDIR(st.st_mode):
        raise StoreFileError(f"{path} is not a directory", path=path)


def read_file(path: str, start: int = 0, size: int = -1) -> bytes:
    """The bytes of ``path`` from byte ``start`` on (at most ``size`` of them)."""
    with os.fdopen(open_fd(path, os.O_RDONLY), "rb") as f:
        if start:
            f.seek(start)
        return f.read(size)


def atomic_write(path: str, data: bytes, *, hooked: bool = True) -> None:
    """Replace ``path`` with ``data`` so that a crash leaves the old or the new file whole:
    write ``<path>.tmp``, fsync it, rename it over ``path``, fsync the directory.

    A ``.tmp`` left by a crash (or planted: a link) is removed, never written through.

    :param hooked: write and fsync through the module's ``_write`` / ``_fsync`` names (what
        fault-injection tests replace). The MANIFEST, which log rolls and cleaner swaps
        rewrite, passes False: tests that count or fail the log's own writes and syncs do
        not see it (its failures are tested through ``manifest.write``).
    """
    tmp = path + ".tmp"
    try:
        os.unlink(tmp)  # removes a link itself, never its target
    except FileNotFoundError:
        pass
    fd = open_fd(tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL)
    try:
        if hooked:
            write_all(fd, data)
            _fsync(fd)
        else:
            view = memoryview(data)
            while view:
                view = view[os.write(fd, view):]
            os.fsync(fd)
    finally:
        os.close(fd)
    os.replace(tmp, path)
    dir_fd = os.open(os.path.dirname(os.path.abspath(path)),
                     os.O_RDONLY | os.O_DIRECTORY | os.O_CLOEXEC)
    try:
        (_fsync if hooked else os.fsync)(dir_fd)
    finally:
        os.close(dir_fd)


def truncate_file(path: str, size: int) -> None:
    fd = open_fd(path, os.O_WRONLY)
    try:
        os.ftruncate(fd, size)
        _fsync(fd)
    finally:
        os.close(fd)


class SegmentFile(_native.SegmentState):
    """An open segment file that is written only at its end (``size``), into space reserved
    ahead of it (``allocated``; see ``PREALLOCATE_BYTES``).

    The fd's file position is kept at ``size`` (no ``O_APPEND``: the file is longer than its
    data while space is reserved), so writes go through ``_write`` like every other write.
    ``append_durable`` writes at an explicit offset and leaves the position behind
    (``positioned`` false); the next ``append`` seeks first: one ``lseek`` there, instead of
    one after every durable round. (A ``_sync`` after combined writes may see the old
    position; the fault-injection tracker and the crash harness, which read it as the end of
    the data, keep the largest end logged per file, which the combined writes logged.)

    Its fields live in the native base class (``_native.SegmentState``), where the native
    write of a commit (``partition_log.write_durable``) reads and moves them without the
    interpreter; they are plain attributes here: ``path``, ``base_offset``, ``fd``, ``size``
    (bytes of data), ``allocated`` (bytes reserved), ``limit`` (never reserve past it: the
    segment rolls there; 0 disables preallocation), ``failed`` (a write failed: what is on disk
    past ``size`` is unknown, so it is all left to recovery), ``positioned`` (the fd's file
    position is ``size``) and ``dsync`` (``_write_dsync`` on this fd: None untried, True
    worked, False refused; decided by the first try and never retried). It is made as
    ``SegmentFile(path, base_offset, fd, size, limit=0)``.
    """

    __slots__ = ()

    @classmethod
    def create(cls, path: str, base_offset: int, *, limit: int = 0) -> "SegmentFile":
        fd = open_fd(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL)
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
        fd = open_fd(path, os.O_WRONLY)
        size = os.lseek(fd, 0, os.SEEK_END)
        return cls(path, base_offset, fd, size, limit)

    def append(self, data) -> None:
        end = self.size + len(data)
        try:
            if end > self.allocated and self.limit:
                self._reserve(end)
            if not self.positioned:
                self._seek()
            write_all(self.fd, data)
        except BaseException:
            self.failed = True
            raise
        self.size = end

    def append_durable(self, data) -> None:
        """``append(data)`` then ``sync()``, with the same outcome (``data`` durable on return,
        ``size``, the reserve, ``failed`` on any error) in one system call where the platform
        allows: ``_write_dsync``. One syscall, and one GIL release, fewer per group-commit
        round, where ``fdatasync`` is most of the wall time.

        The first refusal of ``_write_dsync`` on this fd (see ``_REFUSED_ERRNOS``) switches
        it to ``append`` + ``sync`` for good; an error after it once worked is a real one. A
        short write is finished with ``write_all`` + ``_sync``.
        """
        # (the usual call on the commit path, RWF_DSYNC known to work and the space reserved,
        # is made without this method: partition_log.write_durable)
        at = self.begin_durable(data)
        if at is None:
            # (an empty RWF_DSYNC write syncs nothing: the kernel syncs what the call wrote)
            self.append(data)
            self.sync()
            return
        try:
            n = _write_dsync(self.fd, data, at)
        except (OSError, NotImplementedError) as e:
            self.end_durable(data, e)
            return
        if n == len(data) and self.dsync:  # the usual outcome, on the commit path: done
            self.size = at + n
            return
        self.end_durable(data, n)

    def begin_durable(self, data) -> int | None:
        """Start ``append_durable(data)`` for a write made elsewhere (``offsetlog.log.uring``):
        reserve its space and return the offset to write ``data`` at with ``RWF_DSYNC``, then
        call ``end_durable`` with what the write returned. None: only ``append_durable`` can
        make this one (no ``RWF_DSYNC`` here, refused on this fd, or nothing to write)."""
        if _write_dsync is None or self.dsync is False or not data:
            return None
        end = self.size + len(data)
        if end > self.allocated and self.limit:
            try:
                self._reserve(end)
            except BaseException:
                self.failed = True
                raise
        self.positioned = False  # pwritev2 does not move the file position
        return self.size

    def end_durable(self, data, result: int | BaseException) -> None:
        """End a write begun by ``begin_durable``: ``result`` is the bytes it wrote or the
        error it raised. Finishes it (a refusal, a short write) and moves ``size`` on.

        :raises OSError: the write failed (``failed`` is then set)
        """
        try:
            if isinstance(result, BaseException):
                if self.dsync or not _refused(result):
                    raise result
                self.dsync = False
                log.debug("%s: RWF_DSYNC refused (%r); using write + fdatasync", self.path,
                          result)
                n = 0  # rewrite all of it (see _REFUSED_ERRNOS)
            else:
                self.dsync = True
                n = result
            if n < len(data):
                # Finish as append + sync would, from where the durable part ends.
                os.lseek(self.fd, self.size + n, os.SEEK_SET)
                write_all(self.fd, memoryview(data)[n:])
                _sync(self.fd)
                self.positioned = True  # at the end, which is ``size`` below
        except BaseException:
            self.failed = True
            raise
        self.size += len(data)

    def _seek(self) -> None:
        os.lseek(self.fd, self.size, os.SEEK_SET)
        self.positioned = True

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
