"""advertised.listeners: Metadata and FindCoordinator give each listener's clients its
advertised address, and a client follows it (through a forwarding port, which sees the
client's connections after the bootstrap one); Kafka's refusals of bad settings."""

from __future__ import annotations

import socket
import threading

import pytest

from offsetlog.bench.kafka_broker import free_port
from offsetlog.server.config import ConfigError, ServerConfig
from offsetlog.server.main import check_listeners
from support.wire_raw import call
from support.wire_server import Server


class Forwarder:
    """127.0.0.1:port -> 127.0.0.1:target, counting the connections it forwards."""

    def __init__(self, target: int) -> None:
        self.target = target
        self.listener = socket.create_server(("127.0.0.1", 0))
        self.port = self.listener.getsockname()[1]
        self.accepted = 0
        threading.Thread(target=self._accept, daemon=True).start()

    def _accept(self) -> None:
        while True:
            try:
                client, _ = self.listener.accept()
            except OSError:
                return
            self.accepted += 1
            upstream = socket.create_connection(("127.0.0.1", self.target))
            for a, b in ((client, upstream), (upstream, client)):
                threading.Thread(target=self._pipe, args=(a, b), daemon=True).start()

    @staticmethod
    def _pipe(src: socket.socket, dst: socket.socket) -> None:
        try:
            while data := src.recv(65536):
                dst.sendall(data)
        except OSError:
            pass
        finally:
            for s in (src, dst):
                try:
                    s.shutdown(socket.SHUT_RDWR)
                except OSError:
                    pass

    def close(self) -> None:
        self.listener.close()


@pytest.fixture
def advertised(tmp_path):
    """A server whose PLAINTEXT listener advertises a forwarding port to it; its INTERNAL
    listener advertises nothing (its own address)."""
    real = free_port()
    forwarder = Forwarder(real)
    server = Server(str(tmp_path / "store"), config=[
        f"listeners=PLAINTEXT://127.0.0.1:{real},INTERNAL://127.0.0.1:0",
        "listener.security.protocol.map=PLAINTEXT:PLAINTEXT,INTERNAL:PLAINTEXT",
        f"advertised.listeners=PLAINTEXT://127.0.0.1:{forwarder.port}"]).start()
    yield server, forwarder
    server.stop()
    forwarder.close()


def addresses(port: int) -> list[tuple[str, int]]:
    with socket.create_connection(("127.0.0.1", port), timeout=10) as sock:
        meta = call(sock, 3, 12, topics=None, allow_auto_topic_creation=False,
                    include_topic_authorized_operations=False)
        fc = call(sock, 10, 4, key_type=0, coordinator_keys=["g"])
    return [(b.host, b.port) for b in meta.brokers] + [(c.host, c.port)
                                                       for c in fc.coordinators]


def test_metadata_and_find_coordinator_answer_the_advertised_address(advertised):
    server, forwarder = advertised
    assert addresses(server.ports["PLAINTEXT"]) == [("127.0.0.1", forwarder.port)] * 2
    internal = server.ports["INTERNAL"]
    assert addresses(internal) == [("127.0.0.1", internal)] * 2


def test_a_client_follows_the_advertised_address(advertised):
    from confluent_kafka import Consumer, TopicPartition

    server, forwarder = advertised
    c = Consumer({"bootstrap.servers": f"127.0.0.1:{server.ports['PLAINTEXT']}",
                  "group.id": "adv", "enable.auto.commit": False,
                  "session.timeout.ms": 6000})
    try:
        c.subscribe(["orders"])
        for _ in range(150):
            if c.assignment():
                break
            c.poll(0.2)
        assert c.assignment()
        c.commit(offsets=[TopicPartition("orders", 0, 5)], asynchronous=False)
        assert c.committed([TopicPartition("orders", 0)], timeout=10)[0].offset == 5
    finally:
        c.close()
    assert forwarder.accepted >= 1  # the broker and coordinator connections went through it


@pytest.mark.parametrize("value,message", [
    ("OTHER://h:1", "must be equal to or a subset of the ones defined in listeners"),
    ("PLAINTEXT://0.0.0.0:1", "nonroutable meta-address 0.0.0.0"),
    ("PLAINTEXT://h", "expected NAME://HOST:PORT"),
])
def test_bad_advertised_listeners_are_refused(value, message):
    config = ServerConfig.parse(["listeners=PLAINTEXT://127.0.0.1:0",
                                 f"advertised.listeners={value}"])
    with pytest.raises(ConfigError, match=message):
        check_listeners(config, None, False)
