"""Bad input on raw sockets while a well-behaved client keeps committing: each bad
connection gets Kafka's answer or is closed; the server and the good client go on."""

from __future__ import annotations

import struct
import threading
import time

from kafka import TopicPartition as KTP
from kafka.structs import OffsetAndMetadata as KOM

from support.wire_clients import kp_consumer
from support.wire_raw import frame, read_answer
from support.wire_server import raw_socket


def _closed(sock) -> bool:
    sock.settimeout(5)
    try:
        return sock.recv(1) == b""
    except ConnectionError:
        return True


def test_bad_frames_close_only_their_connection(server, group_id):
    c = kp_consumer(server, group_id)
    c.assign([KTP("orders", 0)])
    stop = threading.Event()
    committed = []
    errors = []

    def good_client():
        n = 0
        while not stop.is_set():
            n += 1
            try:
                c.commit({KTP("orders", 0): KOM(n, "", -1)})
                committed.append(n)
            except Exception as e:  # pragma: no cover - the test fails on it below
                errors.append(e)
            time.sleep(0.01)

    t = threading.Thread(target=good_client)
    t.start()
    try:
        # garbage body after a valid header prefix (Metadata v12 that does not decode)
        with raw_socket(server) as s:
            s.sendall(struct.pack(">i", 12) + struct.pack(">hhi", 3, 12, 7) + b"\x00\x05ab")
            assert _closed(s)
        # a length over socket.request.max.bytes
        with raw_socket(server) as s:
            s.sendall(struct.pack(">i", 200 * 1024 * 1024))
            assert _closed(s)
        # a negative length, and one too short for a header
        for n in (-5, 3):
            with raw_socket(server) as s:
                s.sendall(struct.pack(">i", n) + b"\x00" * 3)
                assert _closed(s)
        # an unknown API key, and an unsupported version of a known one
        for key, version in ((999, 0), (8, 99)):
            with raw_socket(server) as s:
                s.sendall(struct.pack(">i", 10) + struct.pack(">hhi", key, version, 1)
                          + b"\xff\xff")
                assert _closed(s)
        # ApiVersions of a version the server lacks: v0 answer, UNSUPPORTED_VERSION (35)
        with raw_socket(server) as s:
            s.sendall(struct.pack(">i", 10) + struct.pack(">hhi", 18, 99, 42) + b"\xff\xff")
            corr, r = read_answer(s, 18, 0)
            assert corr == 42 and int(r.error_code) == 35
            assert any(k.api_key == 8 for k in r.api_keys)
        # half a frame, then a disconnect; half a frame, then a stall (left open)
        with raw_socket(server) as s:
            s.sendall(frame(18, 3, client_software_name="x", client_software_version="1")[:9])
        stalled = raw_socket(server)
        stalled.sendall(struct.pack(">i", 100) + b"\x00" * 10)
        n_before = len(committed)
        time.sleep(0.5)
        assert len(committed) > n_before  # the good client still commits meanwhile
        # a well-formed request on a fresh connection is answered
        with raw_socket(server) as s:
            s.sendall(frame(18, 3, correlation_id=9, client_software_name="x",
                            client_software_version="1"))
            corr, r = read_answer(s, 18, 3)
            assert corr == 9 and int(r.error_code) == 0
        stalled.close()
    finally:
        stop.set()
        t.join()
    assert not errors
    assert c.committed(KTP("orders", 0)) == committed[-1]
    c.close()
    assert server.proc.poll() is None


def test_pipelined_requests_are_answered_in_order(server, group_id):
    # a JoinGroup parked for a rebalance (a long initial delay on another server would be
    # needed to park it long; here a Fetch that waits max_wait_ms) must not let the
    # answers behind it overtake it on the same connection
    with raw_socket(server) as s:
        fetch = frame(1, 12, correlation_id=1, replica_id=-1, max_wait=400, min_bytes=1,
                      max_bytes=1 << 20, isolation_level=0, session_id=0, session_epoch=-1,
                      topics=[dict(topic="orders", partitions=[dict(
                          partition=0, current_leader_epoch=-1, fetch_offset=5,
                          last_fetched_epoch=-1, log_start_offset=-1,
                          partition_max_bytes=1 << 20)])],
                      forgotten_topics_data=[], rack_id="")
        versions = frame(18, 3, correlation_id=2, client_software_name="x",
                         client_software_version="1")
        s.sendall(fetch + versions)
        corr1, r1 = read_answer(s, 1, 12)
        corr2, _ = read_answer(s, 18, 3)
        assert (corr1, corr2) == (1, 2)
        p = r1.responses[0].partitions[0]
        # never OFFSET_OUT_OF_RANGE, and an empty record set, not null (librdkafka)
        assert int(p.error_code) == 0 and p.records == b"" and p.high_watermark == 5
