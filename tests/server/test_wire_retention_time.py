"""OffsetCommit v2-4's ``retention_time_ms`` through the server, on both of its request paths:
the native request loop of a plain connection and the Python one that a connection under an
authorizer takes (``connection._NATIVE_CODECS``). What it means is judged by Kafka in
tests/kafka/test_diff_offset_retention.py."""

from __future__ import annotations

import socket
import time

import pytest

from support.wire_raw import call
from support.wire_server import Server

AUTHORIZED = ("authorizer.class.name=org.apache.kafka.metadata.authorizer.StandardAuthorizer",
              "super.users=User:ANONYMOUS")


def _commit(sock, version, partition, offset, retention):
    r = call(sock, 8, version, group_id="g", generation_id_or_member_epoch=-1, member_id="",
             retention_time=retention, topics=[dict(name="orders", partitions=[dict(
                 partition_index=partition, committed_offset=offset, committed_metadata="")])])
    return int(r.topics[0].partitions[0].error_code)


def _offsets(sock) -> dict:
    r = call(sock, 9, 5, group_id="g", topics=[dict(name="orders", partition_indexes=[0, 1, 2])],
             require_stable=False)
    return {int(p.partition_index): int(p.committed_offset) for p in r.topics[0].partitions}


@pytest.mark.parametrize("config", [(), AUTHORIZED], ids=["native loop", "python path"])
@pytest.mark.parametrize("version", [2, 4])
def test_a_commits_own_retention_time_expires_it(tmp_path, config, version):
    server = Server(str(tmp_path / "store"), config=[
        *config, "offsets.retention.check.interval.ms=100"]).start()
    try:
        with socket.create_connection(("127.0.0.1", server.port), timeout=10) as sock:
            assert _commit(sock, version, 0, 5, 0) == 0
            assert _commit(sock, version, 1, 6, -1) == 0  # none: the server's 7 days
            assert _commit(sock, version, 2, 7, 3_600_000) == 0
            deadline = time.monotonic() + 20
            while _offsets(sock)[0] != -1:
                assert time.monotonic() < deadline, "the offset never expired"
                time.sleep(0.05)
            time.sleep(0.3)  # three passes more: the others stay
            assert _offsets(sock) == {0: -1, 1: 6, 2: 7}
    finally:
        server.stop()
