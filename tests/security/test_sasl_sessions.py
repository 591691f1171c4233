"""SASL sessions judged by Kafka 4.4: SaslHandshake v0 (the tokens raw after it), session
lifetimes and re-authentication (KIP-368, ``connections.max.reauth.ms``), a connection whose
session expired closed at its next request, and ``connection.failed.authentication.delay.ms``
(KIP-306). The same raw exchanges against a broker and against ``offsetlog serve`` with the
same users and settings, the answers compared; librdkafka re-authenticates on its own."""

from __future__ import annotations

import dataclasses
import socket
import struct
import time

import pytest
from kafka.net.sasl.scram import ScramClient

from offsetlog.bench.kafka_broker import KafkaBroker, KafkaUnavailable, check_available
from offsetlog.bench.wire_floors import exactly
from support.kafka_broker import _unavailable
from support.kafka_diff import diff, normalise
from support.sasl_raw import scram_login
from support.wire_raw import call
from support.wire_server import Server

from .conftest import add_users

USERS = {"alice": "alice-secret", "bob": "bob-secret"}
REAUTH_MS = 2000
SETTINGS = {"connections.max.reauth.ms": str(REAUTH_MS)}


@pytest.fixture(scope="module")
def ports(tmp_path_factory):
    """{"Kafka": port, "offsetlog": port}: SASL_PLAINTEXT listeners, the same SCRAM users
    (and PLAIN), sessions of REAUTH_MS."""
    try:
        check_available()
    except KafkaUnavailable as e:
        _unavailable(str(e))  # a skip, except under CI
    directory = str(tmp_path_factory.mktemp("sessions") / "store")
    add_users(directory, USERS)
    server = Server(directory, config=[
        "listeners=SASL_PLAINTEXT://127.0.0.1:0",
        "sasl.enabled.mechanisms=SCRAM-SHA-512,SCRAM-SHA-256,PLAIN",
        "sasl.plain.over.plaintext.enable=true",
        *(f"{k}={v}" for k, v in SETTINGS.items())]).start()
    with KafkaBroker(secure={"users": USERS}, extra=SETTINGS) as broker:
        yield {"Kafka": broker.ports["SASL_PLAINTEXT"],
               "offsetlog": server.ports["SASL_PLAINTEXT"]}
    server.stop()


def connect(port: int) -> socket.socket:
    return socket.create_connection(("127.0.0.1", port), timeout=10)


def closed(sock: socket.socket) -> bool:
    """The server closed ``sock`` without answering (EOF or reset within 10 s)."""
    try:
        return sock.recv(1) == b""
    except ConnectionError:
        return True


def metadata(sock):
    return call(sock, 3, 12, topics=None, allow_auto_topic_creation=False,
                include_topic_authorized_operations=False)


def raw(sock, token: bytes) -> bytes:
    sock.sendall(struct.pack(">i", len(token)) + token)
    return exactly(sock, struct.unpack(">i", exactly(sock, 4))[0])


def same(answers: dict) -> None:
    """The answers are equal, normalised: the order of SaslHandshake's mechanisms is none
    (Kafka's comes from a hash set); of SCRAM's messages (random nonces and salts, and the
    proofs made of them) the attribute names are compared, the proofs checked by the client."""
    def one(a):
        if hasattr(a, "mechanisms"):
            return a.error_code, sorted(a.mechanisms)
        if hasattr(a, "auth_bytes"):
            return dataclasses.replace(a, auth_bytes=[
                part.split(b"=")[0] for part in bytes(a.auth_bytes).split(b",") if part])
        return a

    def view(got):
        return [one(a) for a in got]
    kafka, ours = normalise(view(answers["Kafka"])), normalise(view(answers["offsetlog"]))
    problems = diff(kafka, ours)
    assert not problems, "offsetlog answers differently from Kafka:\n  " + "\n  ".join(problems)


def scram(sock, user, password, version=2, mechanism="SCRAM-SHA-512"):
    """SaslAuthenticate's two rounds (after a handshake): both answers."""
    client = ScramClient(user, password, mechanism)
    first = call(sock, 36, version, auth_bytes=client.first_message())
    if first.error_code.value:
        return [first]
    client.process_server_first_message(first.auth_bytes)
    final = call(sock, 36, version, auth_bytes=client.final_message())
    if not final.error_code.value:
        client.process_server_final_message(final.auth_bytes)  # raises unless proven
    return [first, final]


def test_sasl_handshake_v0_takes_raw_tokens(ports):
    answers = {}
    for name, port in ports.items():
        got = []
        with connect(port) as sock:  # SCRAM: the client's two tokens, the server's two
            got.append(call(sock, 17, 0, mechanism="SCRAM-SHA-512"))
            client = ScramClient("alice", USERS["alice"], "SCRAM-SHA-512")
            client.process_server_first_message(raw(sock, client.first_message()))
            client.process_server_final_message(raw(sock, client.final_message()))  # proven
            got.append(metadata(sock).brokers != ())
        with connect(port) as sock:  # PLAIN: one token, answered with an empty one
            got.append(call(sock, 17, 0, mechanism="PLAIN"))
            got.append(raw(sock, f"\0bob\0{USERS['bob']}".encode()))
            got.append(metadata(sock).brokers != ())
        with connect(port) as sock:  # a wrong password: closed, nothing answered
            call(sock, 17, 0, mechanism="SCRAM-SHA-512")
            client = ScramClient("alice", "wrong", "SCRAM-SHA-512")
            client.process_server_first_message(raw(sock, client.first_message()))
            sock.sendall(struct.pack(">i", 10**3) + client.final_message().ljust(10**3))
            got.append(closed(sock))
        answers[name] = got
    same(answers)
    assert answers["Kafka"][1:] == [True, answers["Kafka"][2], b"", True, True]


def test_sessions_last_connections_max_reauth_ms_and_are_renewed_on_the_connection(ports):
    answers = {}
    for name, port in ports.items():
        got = []
        with connect(port) as sock:
            got.append(call(sock, 17, 1, mechanism="SCRAM-SHA-512"))
            got += scram(sock, "alice", USERS["alice"])
            for _ in range(2):  # re-authenticate twice (a second apart: Kafka's least)
                time.sleep(1.1)
                got.append(call(sock, 17, 1, mechanism="SCRAM-SHA-512"))
                got += scram(sock, "alice", USERS["alice"])
                got.append(metadata(sock).brokers != ())
        with connect(port) as sock:  # as another user: refused, closed
            call(sock, 17, 1, mechanism="SCRAM-SHA-512")
            scram(sock, "alice", USERS["alice"])
            call(sock, 17, 1, mechanism="SCRAM-SHA-512")
            got += scram(sock, "bob", USERS["bob"])
            got.append(closed(sock))
        with connect(port) as sock:  # a wrong password on re-authentication: refused, closed
            call(sock, 17, 1, mechanism="SCRAM-SHA-512")
            scram(sock, "alice", USERS["alice"])
            call(sock, 17, 1, mechanism="SCRAM-SHA-512")
            got += scram(sock, "alice", "wrong")
            got.append(closed(sock))
        answers[name] = got
    same(answers)
    kafka = answers["Kafka"]
    assert kafka[2].session_lifetime.total_seconds() * 1000 == REAUTH_MS
    assert [a.error_code.name for a in kafka if hasattr(a, "session_lifetime")].count(
        "sasl_authentication_failed") == 2  # another user's, a wrong password


@pytest.mark.parametrize("version", [0, 2])
def test_a_connection_whose_session_expired_is_closed_at_its_next_request(ports, version):
    """SaslAuthenticate v0 has no session lifetime to tell the client, and Kafka closes its
    connections all the same."""
    for name, port in ports.items():
        with connect(port) as sock:
            call(sock, 17, 1, mechanism="SCRAM-SHA-512")
            assert scram(sock, "alice", USERS["alice"], version)[-1].error_code.value == 0
            assert metadata(sock).brokers, name
            time.sleep(REAUTH_MS / 1000 + 0.2)
            sock.sendall(struct.pack(">i", 10) + bytes(10))  # any request (this one is junk)
            assert closed(sock), name


def test_sasl_after_authentication_without_reauthentication_is_an_illegal_state(
        kafka_acl_broker, tmp_path):
    """connections.max.reauth.ms 0 (the default): no re-authentication; both answer
    ILLEGAL_SASL_STATE with the same message."""
    from support.acl_targets import USERS as ACL_USERS

    directory = str(tmp_path / "store")
    add_users(directory, {"alice": ACL_USERS["alice"]})
    server = Server(directory, config=["listeners=SASL_PLAINTEXT://127.0.0.1:0"]).start()
    answers = {}
    try:
        for name, port in (("Kafka", kafka_acl_broker.ports["SASL_PLAINTEXT"]),
                           ("offsetlog", server.ports["SASL_PLAINTEXT"])):
            with connect(port) as sock:
                scram_login(sock, "alice", ACL_USERS["alice"])
                answers[name] = [call(sock, 17, 1, mechanism="SCRAM-SHA-512"),
                                 call(sock, 36, 2, auth_bytes=b"n,,n=alice,r=abc")]
                answers[name].append(answers[name][-1].error_message)
    finally:
        server.stop()
    same(answers)
    assert answers["Kafka"][-1] == ("SaslAuthenticate request received after successful "
                                    "authentication")


def test_a_failed_authentication_is_answered_after_the_delay(tmp_path):
    """connection.failed.authentication.delay.ms: the failure is not answered before it, and
    the server serves others meanwhile."""
    directory = str(tmp_path / "store")
    add_users(directory, USERS)
    server = Server(directory, config=["listeners=SASL_PLAINTEXT://127.0.0.1:0",
                                       "connection.failed.authentication.delay.ms=60000"]).start()
    try:
        port = server.ports["SASL_PLAINTEXT"]
        with connect(port) as guesser:
            call(guesser, 17, 1, mechanism="SCRAM-SHA-512")
            client = ScramClient("alice", "guess", "SCRAM-SHA-512")
            first = call(guesser, 36, 2, auth_bytes=client.first_message())
            client.process_server_first_message(first.auth_bytes)
            guesser.sendall(_frame_of(36, 2, auth_bytes=client.final_message()))
            with connect(port) as other:  # served while the guesser waits
                scram_login(other, "bob", USERS["bob"])
                assert metadata(other).brokers
            guesser.settimeout(1.0)
            with pytest.raises(socket.timeout):
                guesser.recv(1)  # neither answered nor closed yet
    finally:
        server.stop()


def _frame_of(api_key, version, **body):
    from support.wire_raw import frame

    return frame(api_key, version, **body)


def test_librdkafka_re_authenticates_and_keeps_its_connections(tmp_path):
    """A confluent-kafka consumer over sessions of 4 s for 2.5 sessions: it re-authenticates
    on its connections, which the server closes none of (librdkafka logs no disconnection),
    stays in its group and commits; without re-authentication the server would have closed
    them (the test above). librdkafka begins to re-authenticate at 90% of a session, and
    waits for its long-polling Fetch first: its fetch.wait.max.ms (500 ms by default) must be
    less than a tenth of the session, or the session ends first, on Kafka as here."""
    import logging

    from confluent_kafka import Consumer, TopicPartition

    class Lines(logging.Handler):
        def __init__(self):
            super().__init__()
            self.lines = []

        def emit(self, record):
            self.lines.append(record.getMessage())

    lines = Lines()
    logger = logging.getLogger("librdkafka-reauth")
    logger.addHandler(lines)
    logger.setLevel(logging.DEBUG)
    lifetime_ms = 4000
    directory = str(tmp_path / "store")
    add_users(directory, USERS)
    server = Server(directory, config=["listeners=SASL_PLAINTEXT://127.0.0.1:0",
                                       f"connections.max.reauth.ms={lifetime_ms}"]).start()
    c = Consumer({"bootstrap.servers": f"127.0.0.1:{server.ports['SASL_PLAINTEXT']}",
                  "security.protocol": "SASL_PLAINTEXT", "sasl.mechanisms": "SCRAM-SHA-512",
                  "sasl.username": "alice", "sasl.password": USERS["alice"],
                  "group.id": "reauth", "enable.auto.commit": False,
                  "fetch.wait.max.ms": 100, "session.timeout.ms": 6000,
                  "debug": "security", "logger": logger})
    try:
        c.subscribe(["orders"])
        deadline = time.monotonic() + 30
        while not c.assignment() and time.monotonic() < deadline:
            c.poll(0.2)
        assert c.assignment()
        until = time.monotonic() + 2.5 * lifetime_ms / 1000
        while time.monotonic() < until:
            c.poll(0.2)
        c.commit(offsets=[TopicPartition("orders", 0, 3)], asynchronous=False)
        assert c.committed([TopicPartition("orders", 0)], timeout=10)[0].offset == 3
    finally:
        c.close()
        server.stop()
    said = "\n".join(lines.lines)
    assert "Received session lifetime 4000 ms" in said
    assert said.count("Auth in state REAUTH") >= 2, said[-3000:]  # again and again
    assert "Disconnected" not in said and "FAIL" not in said, said[-3000:]
