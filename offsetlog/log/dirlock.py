"""The store directory's owner lock: one ``flock`` on ``<store>/LOCK`` (LevelDB's ``LOCK``).

Whoever writes a store's files holds it: an open ``OffsetStore``, ``offsetlog recover``, the
Spark compaction job. ``flock`` alone already refuses a second holder (each ``open()`` is its
own open file description); the set of paths held in this process gives the same-process case
a clearer message. The holder's pid is written into the file for the message others get.
"""

from __future__ import annotations

import contextlib
import errno
import fcntl
import os
import threading
from typing import Iterator

from offsetlog.errors import StoreLockedError
from offsetlog.log import naming

_held: set[str] = set()
_held_lock = threading.Lock()


def acquire(path: str) -> int:
    """Take the lock of the store at ``path`` (absolute); returns the fd to ``release``.

    :raises StoreLockedError: it is held, in this process or another
    """
    with _held_lock:
        if path in _held:
            raise StoreLockedError(f"{path} is already open in this process", path=path)
        fd = os.open(naming.lock_path(path), os.O_RDWR | os.O_CREAT, 0o644)
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except OSError as e:
            holder = ""
            try:
                holder = os.pread(fd, 64, 0).decode(errors="replace").strip()
            except OSError:
                pass
            os.close(fd)
            if e.errno in (errno.EWOULDBLOCK, errno.EAGAIN, errno.EACCES):
                who = f" (held by pid {holder})" if holder else ""
                raise StoreLockedError(f"{path} is open in another process{who}",
                                       path=path) from None
            raise
        os.ftruncate(fd, 0)
        os.pwrite(fd, f"{os.getpid()}\n".encode(), 0)
        _held.add(path)
        return fd


def release(path: str, fd: int) -> None:
    with _held_lock:
        _held.discard(path)
        try:
            fcntl.flock(fd, fcntl.LOCK_UN)
        finally:
            os.close(fd)


@contextlib.contextmanager
def held(path: str) -> Iterator[None]:
    """Hold the lock of the store at ``path`` for the block."""
    path = os.path.abspath(path)
    fd = acquire(path)
    try:
        yield
    finally:
        release(path, fd)
