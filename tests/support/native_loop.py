"""The native request loop (``_native.serve_connection``) run in-process over a socket pair,
for the tests of what it answers itself: a real store, and a stand-in for the ``Connection``
whose methods the loop calls."""

from __future__ import annotations

import contextlib
import socket
import threading

from offsetlog.log import _native


@contextlib.contextmanager
def native_loop(store, conn, topics):
    """Run the loop (plaintext, nothing to authorize: the hot path) for ``conn`` with
    ``store``'s commit entry and the topic registry ``topics``; yields the client's end of
    the socket pair. On leaving, the client's end is closed and the loop must have ended
    because of it, having answered every frame."""
    ours, theirs = socket.socketpair()
    ours.setblocking(False)
    done: list = []

    def serve():
        try:
            done.append(_native.serve_connection(ours.fileno(), 60_000, 1 << 20, conn, True,
                                                 store._commit_router, topics))
        finally:
            ours.shutdown(socket.SHUT_RDWR)  # (a failed loop fails the test, not hangs it)
    thread = threading.Thread(target=serve)
    thread.start()
    try:
        yield theirs
    finally:
        theirs.close()
        thread.join(10)
        ours.close()
    assert done == ["closed"]
