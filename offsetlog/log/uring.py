"""Linux io_uring: durable writes that the kernel makes while the thread that asked for them
goes on. The ring is native (``Ring``, ``native/src/uring.rs``, through the maintained
``io-uring`` crate); this module says whether there is one (``open_ring``).

What for: the wire server's event loop leads the store's async writer, and a round of a log
partition waits ~100 us for its ``RWF_DSYNC`` write. Made by threads (``WritePool``), every
write costs its thread the GIL twice, and each hand-over of the GIL between the loop and a
thread waited for the other to wake: measured at 32 connections, a write took 255 us in the
kernel (strace) and 600 us as its thread saw it, and a round waited 1.2 ms for a thread to
start it. Through a ring there is one thread: the loop queues writes (``Ring.write``), one
``io_uring_enter`` starts them all (``submit``), and the kernel signals their completions on
the loop's eventfd (``register_eventfd``; ``reap`` collects them, ``wait`` blocks for one with
the GIL released). The ring holds each write's ``bytes`` until its completion is reaped; not
thread-safe: one thread uses a ring. Every failure is an ``OSError`` with its ``errno``; a
closed ring answers EBADF.

Where there is no ring, :func:`open_ring` answers None and the caller uses threads: not
Linux, a kernel without io_uring or one that refuses it (seccomp, the
``kernel.io_uring_disabled`` sysctl, locked-memory limits), or ``OFFSETLOG_IO_URING=0`` in the
environment. (Before the native core this was ctypes over the shared memory, correct only
with x86-64's ordering; ``liburing`` on PyPI wraps the C library, is alpha, needs Linux 6.14,
and its waits hold the GIL.)
"""

from __future__ import annotations

import logging
import os

from offsetlog.log import _native

log = logging.getLogger("offsetlog.log.uring")

#: the native ring (None where the core is built without one: not Linux)
Ring = getattr(_native, "Ring", None)


def open_ring(entries: int) -> Ring | None:
    """A ring of ``entries`` submission slots, or None where there is none to be had (see the
    module docstring)."""
    if Ring is None:
        return None
    if os.environ.get("OFFSETLOG_IO_URING", "1") == "0":  # the operator's way out, as libuv's
        return None
    try:
        return Ring(entries)
    except OSError as e:  # ENOSYS, EPERM (seccomp, the sysctl), ENOMEM (locked memory)
        log.info("io_uring is not available (%s): durable writes go to threads", e)
        return None
