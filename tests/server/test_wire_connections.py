"""Connections: ``connections.max.idle.ms`` closes idle and stalled ones (a half frame
cannot hold a connection forever) and leaves busy ones alone; answers go out in request
order when their work finishes out of order."""

from __future__ import annotations

import struct
import time

import pytest

from support.wire_raw import call, frame, read_answer
from support.wire_server import Server, raw_socket

IDLE_MS = 600


@pytest.fixture
def idle_server(tmp_path):
    s = Server(str(tmp_path / "store"), config=[f"connections.max.idle.ms={IDLE_MS}"]).start()
    yield s
    if s.proc is not None:
        s.stop()


def _closed_within(sock, seconds: float) -> bool:
    sock.settimeout(seconds)
    try:
        return sock.recv(1) == b""
    except TimeoutError:
        return False
    except ConnectionError:
        return True


def _versions(sock, correlation_id: int) -> None:
    sock.sendall(frame(18, 3, correlation_id=correlation_id, client_software_name="t",
                       client_software_version="1"))
    corr, r = read_answer(sock, 18, 3)
    assert corr == correlation_id and int(r.error_code) == 0


def test_a_stalled_half_frame_is_closed_after_the_idle_limit(idle_server):
    stalled = raw_socket(idle_server)
    stalled.sendall(struct.pack(">i", 100) + b"\x00" * 10)  # 14 of 104 bytes, then nothing
    quiet = raw_socket(idle_server)  # connects and never sends
    t0 = time.monotonic()
    assert _closed_within(stalled, 10)
    assert _closed_within(quiet, 10)
    assert IDLE_MS / 1000 * 0.9 <= time.monotonic() - t0 < 8
    # the server goes on: a fresh connection is answered
    with raw_socket(idle_server) as s:
        _versions(s, 3)
    stalled.close()
    quiet.close()


def test_a_connection_in_use_is_not_idle(idle_server):
    with raw_socket(idle_server) as s:
        deadline = time.monotonic() + 3 * IDLE_MS / 1000
        n = 0
        while time.monotonic() < deadline:  # a request every IDLE_MS / 3
            n += 1
            _versions(s, n)
            time.sleep(IDLE_MS / 3000)
        _versions(s, n + 1)


def test_a_connection_owed_an_answer_is_not_idle(idle_server):
    # a Fetch parked for its max_wait_ms (longer than the idle limit) is answered, not cut off
    with raw_socket(idle_server) as s:
        s.settimeout(10)
        fetch = frame(1, 12, correlation_id=7, replica_id=-1, max_wait=1000, min_bytes=1,
                      max_bytes=1 << 20, isolation_level=0, session_id=0, session_epoch=-1,
                      topics=[dict(topic="orders", partitions=[dict(
                          partition=0, current_leader_epoch=-1, fetch_offset=0,
                          last_fetched_epoch=-1, log_start_offset=-1,
                          partition_max_bytes=1 << 20)])],
                      forgotten_topics_data=[], rack_id="")
        s.sendall(fetch)
        corr, r = read_answer(s, 1, 12)
        assert corr == 7 and int(r.error_code) == 0


def test_answers_keep_request_order_across_threads(server, group_id):
    # commits answered by worker threads, ApiVersions answered at once by the event loop,
    # pipelined on one connection: the answers come back in request order
    parts = [dict(partition_index=0, committed_offset=1, committed_leader_epoch=-1,
                  committed_metadata="")]
    commit = dict(group_id=group_id, generation_id_or_member_epoch=-1, member_id="",
                  group_instance_id=None, topics=[dict(name="orders", partitions=parts)])
    with raw_socket(server) as s:
        out = b""
        expected = []
        for i in range(1, 41):
            if i % 3:
                out += frame(8, 8, correlation_id=i, **commit)
                expected.append((i, 8, 8))
            else:
                out += frame(18, 3, correlation_id=i, client_software_name="t",
                             client_software_version="1")
                expected.append((i, 18, 3))
        s.sendall(out)
        for corr, key, version in expected:
            got, r = read_answer(s, key, version)
            assert got == corr
        assert call(s, 9, 7, group_id=group_id, topics=None,
                    require_stable=False).topics[0].partitions[0].committed_offset == 1
