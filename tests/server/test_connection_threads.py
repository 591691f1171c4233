"""A connection's thread runs under ``SCHED_BATCH`` (``connection.no_wakeup_preemption``): a
thread woken from its socket or its write does not preempt the GIL's holder; the server's
other threads keep the default policy."""

from __future__ import annotations

import os

import pytest

from support.wire_raw import call
from support.wire_server import raw_socket, wait_until

pytestmark = pytest.mark.skipif(not hasattr(os, "SCHED_BATCH"), reason="no SCHED_BATCH here")

API_VERSIONS = 18


def policies(pid: int) -> list[int]:
    """The scheduling policy of each of process ``pid``'s threads (those still there)."""
    out = []
    for tid in os.listdir(f"/proc/{pid}/task"):
        try:
            out.append(os.sched_getscheduler(int(tid)))
        except (ProcessLookupError, PermissionError):
            pass  # (the thread ended meanwhile)
    return out


def batch_threads(pid: int) -> int:
    return policies(pid).count(os.SCHED_BATCH)


def test_each_connection_thread_and_only_those_run_under_sched_batch(server):
    pid = server.proc.pid
    assert batch_threads(pid) == 0
    socks = [raw_socket(server) for _ in range(3)]
    try:
        for sock in socks:  # answered: its thread is up
            assert call(sock, API_VERSIONS, 3, client_software_name="t",
                        client_software_version="1").error_code == 0
        assert batch_threads(pid) == 3
        # the event loop, the store's writer and timers keep the default policy
        assert policies(pid).count(os.SCHED_OTHER) >= 2
    finally:
        for sock in socks:
            sock.close()
    wait_until(lambda: batch_threads(pid) == 0, what="the connections' threads to end")
