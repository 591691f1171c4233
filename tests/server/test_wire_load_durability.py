"""Commits answered under load are durable: the server killed with SIGKILL while eight
connections commit (each on its connection's thread, sharing the log partitions' group
commits), every offset answered is in the store on reopen."""

from __future__ import annotations

import threading
import time

import pytest

from offsetlog import OffsetStore, TopicPartition
from support.wire_raw import call
from support.wire_server import Server, raw_socket

CLIENTS = 8


@pytest.fixture
def server(tmp_path):
    s = Server(str(tmp_path / "store")).start()
    yield s
    if s.proc is not None and s.proc.poll() is None:
        s.stop()


def test_every_commit_answered_under_load_survives_kill9(server):
    acked = [0] * CLIENTS
    stop = threading.Event()

    def client(i: int) -> None:
        try:
            with raw_socket(server) as sock:
                offset = 0
                while not stop.is_set():
                    offset += 1
                    r = call(sock, 8, 8, group_id=f"load-{i}", generation_id_or_member_epoch=-1,
                             member_id="", group_instance_id=None, topics=[dict(
                                 name="orders", partitions=[dict(
                                     partition_index=i % 4, committed_offset=offset,
                                     committed_leader_epoch=-1, committed_metadata="")])])
                    assert r.topics[0].partitions[0].error_code == 0
                    acked[i] = offset
        except (OSError, EOFError, ConnectionError):
            pass  # the server was killed

    threads = [threading.Thread(target=client, args=(i,)) for i in range(CLIENTS)]
    for t in threads:
        t.start()
    deadline = time.monotonic() + 20
    while min(acked) < 50 and time.monotonic() < deadline:
        time.sleep(0.05)
    server.kill9()
    stop.set()
    for t in threads:
        t.join(10)
    assert min(acked) >= 50, acked
    with OffsetStore.open(server.directory) as store:
        for i in range(CLIENTS):
            got = store.fetch(f"load-{i}")[TopicPartition("orders", i % 4)].offset
            # the answered one, or the next if it was written but not yet answered
            assert acked[i] <= got <= acked[i] + 1, (i, acked[i], got)
