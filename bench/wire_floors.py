"""The wire bench's floor servers (bench/wire.py measures ``offsetlog serve`` against them):
each runs as a child process that accepts connections on a free loopback port (printed on
stdout), serves each on its own thread with blocking sockets and answers every request with
a fixed 12-byte frame, having done its one piece of work:

* ``serve_floor``: each request written to the connection's own preallocated file with one
  ``RWF_DSYNC`` write (issue 27's floor; ``--floor-batch``: its threads under
  ``SCHED_BATCH``, as ``offsetlog serve``'s are);
* ``serve_python_floor``: each request decoded with kio and committed with the store's
  ``commit_sync``;
* ``serve_echo``: nothing (the load generator's ceiling);
* the compiled floor, bench/floor.c (``compiled_floor`` builds it): ``serve_floor``'s work
  with no interpreter, what the hardware allows.

``Floor`` and ``CompiledFloor`` start them; ``python -m offsetlog.bench.wire_floors
--floor|--floor-batch|--python-floor|--echo DIRECTORY`` runs one.
"""

from __future__ import annotations

import os
import shutil
import socket
import struct
import subprocess
import sys

from offsetlog.bench import cases


def exactly(sock: socket.socket, n: int) -> bytes:
    """``n`` bytes from ``sock``, waiting for all of them (ConnectionError if it closes)."""
    out = b""
    while len(out) < n:
        chunk = sock.recv(n - len(out))
        if not chunk:
            raise ConnectionError("server closed the connection")
        out += chunk
    return out


def serve_floor(directory: str, batch: bool = False) -> None:
    """The floor server: accept connections on a free loopback port (printed on stdout),
    each served by its own thread with blocking sockets. Each request frame is written to
    the connection's own preallocated file (as the engine's segments are) with one
    ``pwritev(..., RWF_DSYNC)`` (write + ``fdatasync`` where there is none) and answered
    with a fixed 12-byte frame. No decoding, no checks, no table, no shared file: what is
    left of a wire commit once the server's own work is taken away.

    With ``batch`` (for information), each connection's thread runs under ``SCHED_BATCH``
    as ``offsetlog serve``'s do (``connection.no_wakeup_preemption``): what that policy
    gives the floor itself."""
    os.makedirs(directory, exist_ok=True)
    dsync = getattr(os, "RWF_DSYNC", None)

    def connection(n: int):
        if batch:  # (called on the connection's own thread)
            from offsetlog.server.connection import no_wakeup_preemption
            no_wakeup_preemption()
        fd = os.open(os.path.join(directory, f"floor-{n}.log"), os.O_WRONLY | os.O_CREAT,
                     0o644)
        os.posix_fallocate(fd, 0, 8 << 20)
        position = 0

        def write(frame: bytes) -> None:
            nonlocal position
            if dsync is None:
                os.pwrite(fd, frame, position)
                os.fdatasync(fd)
            else:
                os.pwritev(fd, [frame], position, dsync)
            position = (position + len(frame)) % (4 << 20)
        return write, lambda: os.close(fd)

    _serve_threads(connection)


def serve_python_floor(directory: str) -> None:
    """The Python floor server: ``serve_floor``'s threads, each request decoded with kio and
    its offsets committed with ``OffsetStore.commit_sync`` (``fsync="always"``, the group
    commit shared by the threads), answered with the same fixed frame. What ``offsetlog
    serve`` does per commit that no Python server of this store can skip; no event loop,
    no per-partition checks, no answer to build."""
    from offsetlog.server.codec import decode_request, peek_api
    from offsetlog.types import TopicPartition

    store = cases.open_store(directory)

    def commit(frame: bytes) -> None:
        api_key, version, _ = peek_api(frame)
        _, body = decode_request(frame, api_key, version)
        store.commit_sync(body.group_id, {
            TopicPartition(t.name, int(p.partition_index)): int(p.committed_offset)
            for t in body.topics for p in t.partitions})

    _serve_threads(lambda n: (commit, lambda: None))


def serve_echo(directory: str) -> None:
    """The load generator's ceiling: ``serve_floor``'s threads answering each request at once,
    with nothing written (``directory`` is not used)."""
    _serve_threads(lambda n: (lambda frame: None, lambda: None))


def _serve_threads(connection) -> None:
    """Accept connections on a free loopback port (printed on stdout), each served by its
    own thread with blocking sockets: ``connection(n)`` gives the ``n``-th its
    ``(handle, close)``; ``handle(frame)`` runs for every request, then a fixed 12-byte
    answer goes back."""
    import threading

    answer = struct.pack(">i", 8) + bytes(8)

    def serve(sock: socket.socket, n: int) -> None:
        handle, close = connection(n)
        try:
            while True:
                handle(exactly(sock, struct.unpack(">i", exactly(sock, 4))[0]))
                sock.sendall(answer)
        except (ConnectionError, OSError):
            pass
        finally:
            close()
            sock.close()

    listener = socket.create_server(("127.0.0.1", 0))
    print(listener.getsockname()[1], flush=True)
    n = 0
    while True:
        sock, _ = listener.accept()
        sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        threading.Thread(target=serve, args=(sock, n), daemon=True).start()
        n += 1


class Floor:
    def __init__(self, directory: str, kind: str = "--floor") -> None:
        self.proc = subprocess.Popen([sys.executable, "-m", "offsetlog.bench.wire_floors", kind,
                                      directory], stdout=subprocess.PIPE, text=True)
        self.port = int(self.proc.stdout.readline())

    def close(self) -> None:
        self.proc.kill()
        self.proc.wait(30)


class CompiledFloor(Floor):
    """The compiled floor (``compiled_floor``'s binary) as a child process."""

    def __init__(self, directory: str, binary: str) -> None:
        os.makedirs(directory, exist_ok=True)
        self.proc = subprocess.Popen([binary, directory], stdout=subprocess.PIPE, text=True)
        self.port = int(self.proc.stdout.readline())


def compiled_floor(build_dir: str) -> str | None:
    """bench/floor.c built with the system's C compiler into ``build_dir``: the floor
    server with no Python at all (a thread per connection, the same DSYNC writes, the same
    answer), for information. None where there is no C compiler or the build fails: the
    rows that compare with it are left out."""
    cc = shutil.which("cc") or shutil.which("gcc")
    if cc is None:
        return None
    os.makedirs(build_dir, exist_ok=True)
    binary = os.path.join(build_dir, "floor")
    source = os.path.join(os.path.dirname(os.path.abspath(__file__)), "floor.c")
    built = subprocess.run([cc, "-O2", "-pthread", "-o", binary, source],
                           capture_output=True, text=True)
    return binary if built.returncode == 0 else None


if __name__ == "__main__":
    if sys.argv[1:2] in (["--floor"], ["--floor-batch"]):
        serve_floor(sys.argv[2], batch=sys.argv[1] == "--floor-batch")
    elif sys.argv[1:2] == ["--python-floor"]:
        serve_python_floor(sys.argv[2])
    elif sys.argv[1:2] == ["--echo"]:
        serve_echo(sys.argv[2])
    else:
        sys.exit("usage: python -m offsetlog.bench.wire_floors "
                 "--floor|--floor-batch|--python-floor|--echo DIRECTORY")
