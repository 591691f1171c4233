"""Linux io_uring through ctypes: durable writes that the kernel makes while the thread that
asked for them goes on.

What for: the wire server's event loop leads the store's async writer, and a round of a log
partition waits ~100 us for its ``RWF_DSYNC`` write. Made by threads (``WritePool``), every
write costs its thread the GIL twice, and each hand-over of the GIL between the loop and a
thread waited for the other to wake: measured at 32 connections, a write took 255 us in the
kernel (strace) and 600 us as its thread saw it, and a round waited 1.2 ms for a thread to
start it. Through a ring there is one thread: the loop queues writes, one ``io_uring_enter``
starts them all, and the kernel signals their completions on the loop's eventfd.

Only what that needs: ``IORING_OP_WRITE`` (Linux 5.6) with ``RWF_DSYNC``, completions on an
eventfd, a blocking wait. The rings are memory shared with the kernel, read and written here
with plain loads and stores; x86-64's ordering (no load passes a load, no store passes a
store) is what makes that safe against the kernel's barriers, so elsewhere :func:`open_ring`
answers None, as it does where the kernel has no io_uring or refuses it (seccomp, the
``kernel.io_uring_disabled`` sysctl): the caller then uses threads. Not thread-safe: one
thread uses a ring. (``liburing`` on PyPI wraps the C library instead; it is alpha, needs
Linux 6.14, and its waits hold the GIL.)
"""

from __future__ import annotations

import ctypes
import errno
import itertools
import logging
import mmap
import os
import platform
import struct
import weakref
from typing import Any

log = logging.getLogger("offsetlog.log.uring")

# System call numbers: the same on every architecture (io_uring came after they were unified).
_SETUP, _ENTER, _REGISTER = 425, 426, 427
_OP_NOP, _OP_WRITE = 0, 23
_ENTER_GETEVENTS = 1
_REGISTER_EVENTFD = 4
_FEAT_SINGLE_MMAP = 1
_OFF_SQ_RING, _OFF_CQ_RING, _OFF_SQES = 0, 0x8000000, 0x10000000

#: struct io_uring_params: 10 u32 (entries, flags, features, ...), then the submission
#: ring's offsets (8 u32 + u64) and the completion ring's (8 u32 + u64)
_PARAMS = struct.Struct("<10I8IQ8IQ")
#: struct io_uring_sqe as IORING_OP_WRITE fills it: opcode, flags, ioprio, fd, off, addr, len,
#: rw_flags, user_data, buf_index, personality, splice_fd_in, addr3, pad
_SQE = struct.Struct("<BBHiQQIIQHHiQQ")
#: struct io_uring_cqe: user_data, res, flags
_CQE = struct.Struct("<QiI")
#: sq_flags: completions wait in the kernel's overflow list (flushed by an enter)
_SQ_CQ_OVERFLOW = 2

_libc: Any = None
#: the pointer a c_char_p holds (half the cost of ctypes.cast)
_address_of = ctypes.c_void_p.from_buffer


def _syscall(number: int, a: int = 0, b: int = 0, c: int = 0, d: int = 0, e: int = 0,
             f: int = 0) -> int:
    global _libc
    if _libc is None:
        _libc = ctypes.CDLL(None, use_errno=True)
        # Declared with fixed arguments, 64 bits each: ctypes then converts ints itself (1.3
        # us a call less than building c_longs). syscall() is variadic, which on x86-64 (the
        # only place a ring is used) is called the same way for integer arguments.
        _libc.syscall.argtypes = [ctypes.c_long] * 7
        _libc.syscall.restype = ctypes.c_long
    while True:
        ret = _libc.syscall(number, a, b, c, d, e, f)
        if ret >= 0:
            return ret
        err = ctypes.get_errno()
        if err != errno.EINTR:
            raise OSError(err, os.strerror(err))


class Ring:
    """A submission and a completion queue. ``write`` queues a write, ``submit`` starts what
    is queued, ``reap`` returns what has completed as ``(token, result)``: the bytes
    written, or ``-errno``."""

    def __init__(self, entries: int) -> None:
        params = bytearray(_PARAMS.size)
        buf = (ctypes.c_char * len(params)).from_buffer(params)
        self.fd = _syscall(_SETUP, entries, ctypes.addressof(buf))
        del buf
        try:
            self._map(_PARAMS.unpack(params))
        except BaseException:
            os.close(self.fd)
            raise
        #: user_data -> (token, data): what the kernel has yet to complete, kept alive here
        #: (the kernel reads the bytes from their address)
        self._pending: dict[int, tuple[Any, bytes]] = {}
        self._ids = itertools.count(1)
        self._queued = 0  # written to the submission queue, not yet submitted
        #: releases the mappings and the fd: at close(), or when the ring is collected
        self._release = weakref.finalize(
            self, _release, self.fd, [self._sq32, self._cq32],
            list({id(m): m for m in (self._sq, self._cq, self._sqes)}.values()))

    def _map(self, p: tuple) -> None:
        sq_entries, cq_entries, _flags, _cpu, _idle, features = p[:6]
        sq_head, sq_tail, sq_mask, _, sq_flags, _, sq_array = p[10:17]
        cq_head, cq_tail, cq_mask, _, _, cqes = p[19:25]
        sq_size = sq_array + sq_entries * 4
        cq_size = cqes + cq_entries * _CQE.size
        prot = mmap.PROT_READ | mmap.PROT_WRITE
        if features & _FEAT_SINGLE_MMAP:
            self._sq = self._cq = mmap.mmap(self.fd, max(sq_size, cq_size), mmap.MAP_SHARED,
                                            prot, offset=_OFF_SQ_RING)
        else:
            self._sq = mmap.mmap(self.fd, sq_size, mmap.MAP_SHARED, prot, offset=_OFF_SQ_RING)
            self._cq = mmap.mmap(self.fd, cq_size, mmap.MAP_SHARED, prot, offset=_OFF_CQ_RING)
        self._sqes = mmap.mmap(self.fd, sq_entries * _SQE.size, mmap.MAP_SHARED, prot,
                               offset=_OFF_SQES)
        # The rings' u32 fields, as native unsigned ints: a memoryview reads and writes each
        # with one 4-byte load or store. (struct's "<I" stores byte by byte, and the kernel
        # reads the completion queue's head while completions come in: a head caught half
        # written looked like a full queue, and completions went to the overflow list.)
        self._sq32 = memoryview(self._sq).cast("I")
        self._cq32 = memoryview(self._cq).cast("I")
        self.entries = sq_entries
        self._sq_head, self._sq_tail, self._sq_flags, self._sq_array = (
            sq_head // 4, sq_tail // 4, sq_flags // 4, sq_array // 4)
        self._sq_mask = self._sq32[sq_mask // 4]
        self._cq_head, self._cq_tail, self._cqes = cq_head // 4, cq_tail // 4, cqes
        self._cq_mask = self._cq32[cq_mask // 4]
        #: in flight at most: the completion queue never overflows
        self.capacity = min(sq_entries, cq_entries)

    def register_eventfd(self, efd: int) -> None:
        """Signal ``efd`` (an eventfd) on every completion."""
        arg = ctypes.c_int(efd)
        _syscall(_REGISTER, self.fd, _REGISTER_EVENTFD, ctypes.addressof(arg), 1)

    @property
    def in_flight(self) -> int:
        return len(self._pending)

    @property
    def queued(self) -> int:
        """Entries written to the submission queue that no enter has taken yet."""
        return self._queued

    def write(self, fd: int, data: bytes, offset: int, rw_flags: int, token: Any) -> bool:
        """Queue ``pwritev2(fd, [data], offset, rw_flags)``; False (nothing queued) when the
        ring is full. ``data`` must be ``bytes``: its buffer is handed to the kernel."""
        if len(self._pending) >= self.capacity:
            return False
        sq32 = self._sq32
        tail = sq32[self._sq_tail]
        if (tail - sq32[self._sq_head]) & 0xFFFFFFFF >= self.entries:
            return False
        index = tail & self._sq_mask
        user_data = next(self._ids)
        address = _address_of(ctypes.c_char_p(data)).value or 0  # (no copy: bytes)
        _SQE.pack_into(self._sqes, index * _SQE.size, _OP_WRITE, 0, 0, fd, offset, address,
                       len(data), rw_flags, user_data, 0, 0, 0, 0, 0)
        sq32[self._sq_array + index] = index
        self._pending[user_data] = (token, data)
        sq32[self._sq_tail] = (tail + 1) & 0xFFFFFFFF  # last: publishes it
        self._queued += 1
        return True

    def submit(self) -> None:
        """Start every queued write (one system call)."""
        while self._queued:
            self._queued -= _syscall(_ENTER, self.fd, self._queued, 0, 0, 0, 0)

    def take_back(self) -> list[Any]:
        """After ``submit`` failed: the tokens of the queued writes the kernel has not taken,
        which it never will make now. Their entries stay queued but become no-ops (the
        kernel reads an entry only inside an enter), completed and dropped by a later
        ``submit`` and ``reap``."""
        sq32, sqes = self._sq32, self._sqes
        tail = sq32[self._sq_tail]
        tokens = []
        for back in range(1, self._queued + 1):
            at = ((tail - back) & self._sq_mask) * _SQE.size  # (entry i sits in slot i)
            user_data = _SQE.unpack_from(sqes, at)[8]
            sqes[at] = _OP_NOP
            token, _ = self._pending[user_data]
            if token is not None:  # (not taken back by an earlier failure)
                self._pending[user_data] = (None, b"")
                tokens.append(token)
        return tokens[::-1]

    def wait(self) -> None:
        """Block until at least one write has completed (queued ones are started first)."""
        self.submit()
        if self._pending:
            _syscall(_ENTER, self.fd, 0, 1, _ENTER_GETEVENTS, 0, 0)

    def reap(self) -> list[tuple[Any, int]]:
        """The completed writes, as ``(token, bytes written or -errno)``, in completion
        order."""
        cq32 = self._cq32
        if self._sq32[self._sq_flags] & _SQ_CQ_OVERFLOW:
            # Completions the queue had no room for (it never should: see capacity) wait in
            # the kernel until an enter moves them over.
            _syscall(_ENTER, self.fd, 0, 0, _ENTER_GETEVENTS, 0, 0)
        head = cq32[self._cq_head]
        tail = cq32[self._cq_tail]
        if head == tail:
            return []
        done = []
        pending = self._pending
        cq, cqes, mask = self._cq, self._cqes, self._cq_mask
        while head != tail:
            user_data, res, _ = _CQE.unpack_from(cq, cqes + (head & mask) * _CQE.size)
            token = pending.pop(user_data)[0]
            if token is not None:  # (None: taken back)
                done.append((token, res))
            head = (head + 1) & 0xFFFFFFFF
        cq32[self._cq_head] = head  # hands the entries back to the kernel
        return done

    def close(self) -> None:
        """Wait for what is in flight (the kernel reads buffers kept here), then release the
        ring."""
        if not self._release.alive:
            return
        while self._pending:
            self.wait()
            self.reap()
        self._release()

    @property
    def closed(self) -> bool:
        return not self._release.alive


def _release(fd: int, views: list, maps: list) -> None:
    for v in views:
        v.release()
    for m in maps:
        m.close()
    os.close(fd)


def open_ring(entries: int) -> Ring | None:
    """A ring of ``entries`` submission slots, or None where there is none to be had (see the
    module docstring) or the environment says ``OFFSETLOG_IO_URING=0``."""
    if platform.machine().lower() not in ("x86_64", "amd64") or not hasattr(os, "RWF_DSYNC"):
        return None
    if os.environ.get("OFFSETLOG_IO_URING", "1") == "0":  # the operator's way out, as libuv's
        return None
    try:
        return Ring(entries)
    except OSError as e:  # ENOSYS, EPERM (seccomp, the sysctl), ENOMEM (locked memory)
        log.info("io_uring is not available (%s): durable writes go to threads", e)
        return None
