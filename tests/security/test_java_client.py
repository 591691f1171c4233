"""Kafka's Java client (the broker's version, tests/clients/java/Member.java with its
security settings from CLIENT_PROPERTIES) joins a group and commits over SASL_SSL with
SCRAM-SHA-512 and -256 and over SSL with a client certificate, and reports a wrong
password as Kafka's SaslAuthenticationException."""

from __future__ import annotations

import os

import pytest

from support.client_runners import MemberProcess, java_client

from .conftest import USERS


@pytest.fixture(scope="module")
def java():
    return java_client()


def props(tmp_path, certs, protocol, mechanism=None, password=None, client_cert=False):
    lines = [f"security.protocol={protocol}", "ssl.truststore.type=PEM",
             f"ssl.truststore.location={certs.ca}"]
    if client_cert:
        # Kafka's PEM keystore: the key and the certificate, in one file
        both = tmp_path / "client-keystore.pem"
        both.write_bytes(certs.client_key.read_bytes() + certs.client_cert.read_bytes())
        lines += ["ssl.keystore.type=PEM", f"ssl.keystore.location={both}"]
    if mechanism:
        pw = USERS["alice"] if password is None else password
        lines += [f"sasl.mechanism={mechanism}",
                  "sasl.jaas.config=org.apache.kafka.common.security.scram.ScramLoginModule "
                  f'required username="alice" password="{pw}";']
    path = tmp_path / "client.properties"
    path.write_text("\n".join(lines) + "\n")
    return str(path)


def run_member(java, server, protocol, group_id, properties):
    env = {**os.environ, "CLIENT_PROPERTIES": properties}
    m = MemberProcess(java.command("Member", f"127.0.0.1:{server.ports[protocol]}", group_id,
                                   "orders", "range", "java-sec", "-", 6000),
                      "java secure", env=env)
    try:
        assigned = m.wait_for(lambda e: e.get("event") == "assigned", timeout=60,
                              what="assignment")
        assert assigned["partitions"] == [0, 1, 2, 3]
        m.send("commit 0 42")
        done = m.wait_for(lambda e: e.get("event") == "committed", what="commit")
        assert done["error"] is None
        m.send("committed")
        assert m.wait_for(lambda e: e.get("event") == "offsets")["offsets"]["0"] == 42
    finally:
        m.close()


@pytest.mark.parametrize("mechanism", ["SCRAM-SHA-512", "SCRAM-SHA-256"])
def test_java_over_sasl_ssl(java, secure_server, certs, tmp_path, group_id, mechanism):
    run_member(java, secure_server, "SASL_SSL", group_id,
               props(tmp_path, certs, "SASL_SSL", mechanism))


def test_java_over_ssl_with_a_client_certificate(java, secure_server, certs, tmp_path,
                                                 group_id):
    run_member(java, secure_server, "SSL", group_id,
               props(tmp_path, certs, "SSL", client_cert=True))


def test_java_re_authenticates_before_its_sessions_end(java, tmp_path, certs, group_id):
    """connections.max.reauth.ms (KIP-368): the Java client re-authenticates its connections
    before their sessions end, so the server closes none of them over 2.5 sessions, and the
    member stays in its group and commits. (The Java client re-authenticates at its next
    request after 85-95% of a session, and its consumer asks at least every fetch.max.wait.ms,
    500 ms: a session of 6 s leaves it time.)"""
    import time

    from support.wire_server import Server

    from .conftest import add_users

    lifetime_ms = 6000
    directory = str(tmp_path / "store")
    add_users(directory)
    server = Server(directory, config=["listeners=SASL_PLAINTEXT://127.0.0.1:0",
                                       f"connections.max.reauth.ms={lifetime_ms}"]).start()
    env = {**os.environ, "CLIENT_PROPERTIES": props(tmp_path, certs, "SASL_PLAINTEXT",
                                                    "SCRAM-SHA-512")}
    m = MemberProcess(java.command("Member", server.bootstrap, group_id, "orders", "range",
                                   "java-reauth", "-", 6000), "java reauth", env=env)
    try:
        assigned = m.wait_for(lambda e: e.get("event") == "assigned", timeout=60,
                              what="assignment")
        assert assigned["partitions"] == [0, 1, 2, 3]
        time.sleep(2.5 * lifetime_ms / 1000)
        m.send("commit 0 43")
        assert m.wait_for(lambda e: e.get("event") == "committed", what="commit")["error"] is None
        m.send("committed")
        assert m.wait_for(lambda e: e.get("event") == "offsets")["offsets"]["0"] == 43
    finally:
        m.close()
        server.stop()
    assert "its SASL session expired" not in "".join(server.log)
