"""Attacks on authentication, over raw sockets (kio encodes the requests): requests before
authentication, SASL out of order, oversized and truncated tokens, a replayed client-final
message, a nonce that does not extend the client's, many half-open TLS handshakes. Each
time the connection is closed (or refused), the server keeps serving others, and nothing
is written."""

from __future__ import annotations

import socket
import ssl
import time

import pytest
from kafka.net.sasl.scram import ScramClient

from offsetlog.server import errors as E
from offsetlog.store import OffsetStore
from support.wire_raw import call, frame

from .conftest import USERS

HANDSHAKE, AUTHENTICATE, API_VERSIONS, OFFSET_COMMIT, METADATA = 17, 36, 18, 8, 3


def sasl_socket(server) -> socket.socket:
    return socket.create_connection(("127.0.0.1", server.ports["SASL_PLAINTEXT"]), timeout=5)


def closed(sock: socket.socket) -> bool:
    """The server has closed ``sock`` (EOF or a reset within 5 s)."""
    try:
        sock.settimeout(5)
        return sock.recv(1) == b""
    except ConnectionError:
        return True
    except socket.timeout:
        return False


def authenticate(sock, mechanism="SCRAM-SHA-256", user="alice", password=None):
    """A whole SCRAM exchange; the client (kafka-python's), its final message, the answer."""
    assert call(sock, HANDSHAKE, 1, mechanism=mechanism).error_code == E.NONE
    client = ScramClient(user, USERS.get(user, "x") if password is None else password,
                         mechanism)
    first = call(sock, AUTHENTICATE, 2, auth_bytes=client.first_message())
    assert first.error_code == E.NONE
    client.process_server_first_message(first.auth_bytes)
    final = client.final_message()
    return client, final, call(sock, AUTHENTICATE, 2, auth_bytes=final)


def commit_frame(group="evil"):
    return frame(OFFSET_COMMIT, 8, group_id=group, generation_id_or_member_epoch=-1,
                 member_id="", group_instance_id=None, retention_time_ms=-1,
                 topics=[dict(name="orders", partitions=[dict(
                     partition_index=0, committed_offset=1, committed_leader_epoch=-1,
                     committed_metadata="")])])


def assert_nothing_written(server):
    server.stop()
    with OffsetStore.open(server.directory) as store:
        assert store.groups() == []
    server.start()


def test_a_full_exchange_authenticates_and_the_server_proves_itself(secure_server):
    with sasl_socket(secure_server) as s:
        client, _, answer = authenticate(s)
        assert answer.error_code == E.NONE
        client.process_server_final_message(answer.auth_bytes)  # raises unless proven
        # authenticated: ordinary requests are served
        assert call(s, METADATA, 9, topics=None, allow_auto_topic_creation=False,
                    include_topic_authorized_operations=False,
                    include_cluster_authorized_operations=False).brokers


@pytest.mark.parametrize("before", ["nothing", "handshake"])
def test_a_request_before_authentication_closes_the_connection_unanswered(secure_server,
                                                                         before):
    with sasl_socket(secure_server) as s:
        # ApiVersions is answered before authentication, with the SASL APIs in it
        keys = {k.api_key for k in call(s, API_VERSIONS, 3, client_software_name="t",
                                        client_software_version="1").api_keys}
        assert {17, 36, 50, 51} <= keys
        if before == "handshake":
            call(s, HANDSHAKE, 1, mechanism="SCRAM-SHA-512")
        s.sendall(commit_frame())
        assert closed(s)
    assert_nothing_written(secure_server)


def test_sasl_authenticate_before_the_handshake_fails(secure_server):
    with sasl_socket(secure_server) as s:
        answer = call(s, AUTHENTICATE, 2, auth_bytes=b"n,,n=alice,r=abc")
        assert answer.error_code == E.ILLEGAL_SASL_STATE
        assert closed(s)


def test_an_unknown_mechanism_and_plain_without_tls_are_refused(secure_server):
    for mechanism in ("GSSAPI", "PLAIN"):  # PLAIN: only on SASL_SSL by default
        with sasl_socket(secure_server) as s:
            answer = call(s, HANDSHAKE, 1, mechanism=mechanism)
            assert answer.error_code == E.UNSUPPORTED_SASL_MECHANISM
            assert "PLAIN" not in answer.mechanisms
            assert closed(s)


@pytest.mark.parametrize("token", [b"", b"n,,n=alice", b"n,,n=alice,r=" + b"x" * 70_000,
                                   b"\x00" * 100, b"n,,n=alice,r=abc,"])
def test_malformed_oversized_and_truncated_tokens_fail(secure_server, token):
    with sasl_socket(secure_server) as s:
        call(s, HANDSHAKE, 1, mechanism="SCRAM-SHA-256")
        answer = call(s, AUTHENTICATE, 2, auth_bytes=token)
        assert answer.error_code == E.SASL_AUTHENTICATION_FAILED
        assert closed(s)


def test_a_truncated_frame_then_silence_is_closed_by_the_authentication_deadline(
        tmp_path, certs):
    from support.wire_server import Server

    from .conftest import LISTENERS, add_users, tls_config
    directory = str(tmp_path / "store")
    add_users(directory)
    server = Server(directory, config=[LISTENERS, *tls_config(certs),
                                       "authentication.timeout.ms=1000"]).start()
    try:
        with sasl_socket(server) as s:
            s.sendall(frame(HANDSHAKE, 1, mechanism="SCRAM-SHA-256")[:-3])
            started = time.monotonic()
            assert closed(s)
            assert time.monotonic() - started < 4
    finally:
        server.stop()


def test_a_replayed_client_final_fails(secure_server):
    with sasl_socket(secure_server) as s:
        _, final, answer = authenticate(s)
        assert answer.error_code == E.NONE
    with sasl_socket(secure_server) as s:
        call(s, HANDSHAKE, 1, mechanism="SCRAM-SHA-256")
        call(s, AUTHENTICATE, 2, auth_bytes=ScramClient("alice", "x", "SCRAM-SHA-256")
             .first_message())
        answer = call(s, AUTHENTICATE, 2, auth_bytes=final)
        assert answer.error_code == E.SASL_AUTHENTICATION_FAILED
        assert closed(s)


def test_a_nonce_that_does_not_extend_the_clients_fails(secure_server):
    with sasl_socket(secure_server) as s:
        call(s, HANDSHAKE, 1, mechanism="SCRAM-SHA-256")
        client = ScramClient("alice", USERS["alice"], "SCRAM-SHA-256")
        first = call(s, AUTHENTICATE, 2, auth_bytes=client.first_message())
        client.process_server_first_message(first.auth_bytes)
        final = client.final_message()
        # the nonce's last two characters changed to ones they are not (they are random)
        tail = b"yy" if client.nonce.endswith(b"zz") else b"zz"
        forged = final.replace(b"r=" + client.nonce, b"r=" + client.nonce[:-2] + tail)
        assert forged != final
        answer = call(s, AUTHENTICATE, 2, auth_bytes=forged)
        assert answer.error_code == E.SASL_AUTHENTICATION_FAILED
        assert closed(s)


def test_a_wrong_password_cannot_commit(secure_server):
    with sasl_socket(secure_server) as s:
        _, _, answer = authenticate(s, password="guess")
        assert answer.error_code == E.SASL_AUTHENTICATION_FAILED
        assert "invalid credentials" in answer.error_message
        s.sendall(commit_frame())
        assert closed(s)
    assert_nothing_written(secure_server)


def test_sasl_after_authentication_and_on_plaintext_is_an_illegal_state(secure_server):
    with sasl_socket(secure_server) as s:
        authenticate(s)
        assert call(s, HANDSHAKE, 1, mechanism="PLAIN").error_code == E.ILLEGAL_SASL_STATE
    with socket.create_connection(("127.0.0.1", secure_server.ports["PLAINTEXT"])) as s:
        assert call(s, AUTHENTICATE, 2, auth_bytes=b"x").error_code == E.ILLEGAL_SASL_STATE


def test_many_half_open_tls_handshakes_do_not_stop_the_server(tmp_path, certs):
    """500 connections to the TLS port that send half a ClientHello and wait, beyond
    max.connections: the oldest unauthenticated ones are closed to make room, the deadline
    closes the rest, and an authenticating client gets through all the while."""
    from support.wire_server import Server

    from .conftest import LISTENERS, add_users, tls_config
    directory = str(tmp_path / "store")
    add_users(directory)
    server = Server(directory, config=[LISTENERS, *tls_config(certs),
                                       "max.connections=200",
                                       "authentication.timeout.ms=3000"]).start()
    hello = _client_hello()
    try:
        flood = []
        for _ in range(500):
            s = socket.create_connection(("127.0.0.1", server.ports["SASL_SSL"]), timeout=5)
            s.sendall(hello[:len(hello) // 2])
            flood.append(s)
        ctx = ssl.create_default_context(cafile=str(certs.ca))
        # (served while the flood is held: the socket's timeout fails the test otherwise)
        with socket.create_connection(("127.0.0.1", server.ports["SASL_SSL"]), timeout=10) as raw:
            with ctx.wrap_socket(raw, server_hostname="127.0.0.1") as s:
                _, _, answer = authenticate(s)
                assert answer.error_code == E.NONE
        for s in flood:
            s.close()
    finally:
        server.stop()


def _client_hello() -> bytes:
    """The first bytes a TLS client sends (a real ClientHello, from memory BIOs)."""
    ctx = ssl.create_default_context()
    incoming, outgoing = ssl.MemoryBIO(), ssl.MemoryBIO()
    obj = ctx.wrap_bio(incoming, outgoing, server_hostname="localhost")
    with pytest.raises(ssl.SSLWantReadError):
        obj.do_handshake()
    return outgoing.read()


def test_max_connections_per_ip(tmp_path, certs):
    from support.wire_server import Server

    from .conftest import LISTENERS, add_users, tls_config
    directory = str(tmp_path / "store")
    add_users(directory)
    server = Server(directory, config=[LISTENERS, *tls_config(certs),
                                       "max.connections.per.ip=3",
                                       "max.connections.per.ip.overrides=10.0.0.1:100"]).start()
    try:
        port = server.ports["PLAINTEXT"]
        held = [socket.create_connection(("127.0.0.1", port)) for _ in range(3)]
        for s in held:
            assert call(s, API_VERSIONS, 0).error_code == E.NONE
        extra = socket.create_connection(("127.0.0.1", port))
        assert closed(extra)
        held.pop().close()
        time.sleep(0.3)
        with socket.create_connection(("127.0.0.1", port)) as s:
            assert call(s, API_VERSIONS, 0).error_code == E.NONE
        for s in held:
            s.close()
    finally:
        server.stop()
