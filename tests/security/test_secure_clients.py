"""Real clients over SASL_SSL (SCRAM-SHA-512 and -256, PLAIN), SASL_PLAINTEXT and SSL with a
client certificate: kafka-python, confluent-kafka and aiokafka join a group and commit; a
wrong password, an unknown user, a CA the server's certificate is not signed by, and a
plaintext client on a TLS port each fail, and the server goes on serving."""

from __future__ import annotations

import asyncio
import time

import pytest
from confluent_kafka import Consumer as CkConsumer
from confluent_kafka import KafkaException
from confluent_kafka import TopicPartition as CkTP
from kafka import KafkaConsumer, TopicPartition
from kafka.structs import OffsetAndMetadata

from offsetlog.server.tls import principal_of
from support.tls_certs import CLIENT_DN

from .conftest import USERS

MECHANISMS = ["SCRAM-SHA-512", "SCRAM-SHA-256"]


def kp_security(server, certs, protocol, mechanism=None, user="alice", password=None,
                cafile=None, client_cert=False):
    conf = dict(bootstrap_servers=f"127.0.0.1:{server.ports[protocol]}",
                security_protocol=protocol)
    if "SSL" in protocol:
        conf.update(ssl_cafile=str(cafile or certs.ca), ssl_check_hostname=True)
        if client_cert:
            conf.update(ssl_certfile=str(certs.client_cert), ssl_keyfile=str(certs.client_key))
    if "SASL" in protocol:
        conf.update(sasl_mechanism=mechanism, sasl_plain_username=user,
                    sasl_plain_password=USERS.get(user, "x") if password is None else password)
    return conf


def kp_join_and_commit(conf, group_id, offset=5):
    # kafka-python's leader assigns nothing when it joins before its metadata lists the topic,
    # and rejoins only at a metadata refresh (support/wire_clients.py says more): refresh every
    # second, and ask for every topic's metadata first, as the wire tests do
    c = KafkaConsumer("orders", group_id=group_id, enable_auto_commit=False,
                      session_timeout_ms=6000, heartbeat_interval_ms=500,
                      metadata_max_age_ms=1000, **conf)
    try:
        c.topics()
        # kafka-python's join can take long on a loaded machine (its metadata refresh and
        # heartbeat threads share the GIL with the test's): a generous deadline, left early
        deadline = time.monotonic() + 90
        while not c.assignment() and time.monotonic() < deadline:
            c.poll(200)
        assert c.assignment(), "no assignment"
        tp = TopicPartition("orders", 0)
        c.commit({tp: OffsetAndMetadata(offset, "", -1)})
        assert c.committed(tp) == offset
    finally:
        c.close()


@pytest.mark.parametrize("mechanism", MECHANISMS + ["PLAIN"])
def test_kafka_python_over_sasl_ssl(secure_server, certs, group_id, mechanism):
    kp_join_and_commit(kp_security(secure_server, certs, "SASL_SSL", mechanism), group_id)


@pytest.mark.parametrize("mechanism", MECHANISMS)
def test_kafka_python_over_sasl_plaintext(secure_server, certs, group_id, mechanism):
    kp_join_and_commit(kp_security(secure_server, certs, "SASL_PLAINTEXT", mechanism, "bob"),
                       group_id)


def test_kafka_python_over_ssl_with_a_client_certificate(secure_server, certs, group_id):
    kp_join_and_commit(kp_security(secure_server, certs, "SSL", client_cert=True), group_id)


def ck_conf(server, certs, protocol, mechanism=None, user="alice", password=None, ca=None,
            client_cert=False):
    conf = {"bootstrap.servers": f"127.0.0.1:{server.ports[protocol]}",
            "security.protocol": protocol, "socket.timeout.ms": 5000,
            "reconnect.backoff.max.ms": 500}
    if "SSL" in protocol:
        conf["ssl.ca.location"] = str(ca or certs.ca)
        if client_cert:
            conf["ssl.certificate.location"] = str(certs.client_cert)
            conf["ssl.key.location"] = str(certs.client_key)
    if "SASL" in protocol:
        conf.update({"sasl.mechanisms": mechanism, "sasl.username": user,
                     "sasl.password": USERS.get(user, "x") if password is None else password})
    return conf


def ck_join_and_commit(conf, group_id, offset=9):
    c = CkConsumer({**conf, "group.id": group_id, "enable.auto.commit": False,
                    "session.timeout.ms": 6000})
    try:
        c.subscribe(["orders"])
        deadline = time.monotonic() + 30
        while not c.assignment() and time.monotonic() < deadline:
            c.poll(0.2)
        assert c.assignment(), "no assignment"
        c.commit(offsets=[CkTP("orders", 0, offset)], asynchronous=False)
        assert c.committed([CkTP("orders", 0)], timeout=10)[0].offset == offset
    finally:
        c.close()


@pytest.mark.parametrize("mechanism", MECHANISMS + ["PLAIN"])
def test_confluent_kafka_over_sasl_ssl(secure_server, certs, group_id, mechanism):
    ck_join_and_commit(ck_conf(secure_server, certs, "SASL_SSL", mechanism), group_id)


def test_confluent_kafka_over_ssl_with_a_client_certificate(secure_server, certs, group_id):
    ck_join_and_commit(ck_conf(secure_server, certs, "SSL", client_cert=True), group_id)


@pytest.mark.parametrize("mechanism", MECHANISMS)
def test_aiokafka_over_sasl_ssl(secure_server, certs, group_id, mechanism):
    from aiokafka import AIOKafkaConsumer
    from aiokafka.helpers import create_ssl_context
    from aiokafka.structs import OffsetAndMetadata as AioOAM
    from aiokafka.structs import TopicPartition as AioTP

    async def run():
        c = AIOKafkaConsumer(
            "orders", bootstrap_servers=f"127.0.0.1:{secure_server.ports['SASL_SSL']}",
            group_id=group_id, enable_auto_commit=False, security_protocol="SASL_SSL",
            ssl_context=create_ssl_context(cafile=str(certs.ca)), sasl_mechanism=mechanism,
            sasl_plain_username="alice", sasl_plain_password=USERS["alice"])
        await c.start()
        try:
            deadline = time.monotonic() + 30
            while not c.assignment() and time.monotonic() < deadline:
                await c.getmany(timeout_ms=200)
            assert c.assignment()
            await c.commit({AioTP("orders", 0): AioOAM(11, "")})
            assert await c.committed(AioTP("orders", 0)) == 11
        finally:
            await c.stop()

    asyncio.run(run())


# -- failures ---------------------------------------------------------------------------


def ck_error(conf) -> str:
    """The errors confluent-kafka reports (its error callback) for a consumer of ``conf``."""
    errors: list[str] = []
    c = CkConsumer({**conf, "group.id": "g-refused",
                    "error_cb": lambda e: errors.append(str(e))})
    try:
        c.subscribe(["orders"])
        deadline = time.monotonic() + 15
        while not errors and time.monotonic() < deadline:
            c.poll(0.2)
        with pytest.raises(KafkaException):  # and nothing works
            c.list_topics(timeout=2)
    finally:
        c.close()
    return " ".join(errors)


@pytest.mark.parametrize("mechanism", MECHANISMS)
@pytest.mark.parametrize("user,password", [("alice", "wrong"), ("nobody", "alice-secret")])
def test_a_wrong_password_and_an_unknown_user_fail_authentication(
        secure_server, certs, group_id, mechanism, user, password):
    text = ck_error(ck_conf(secure_server, certs, "SASL_SSL", mechanism, user, password))
    assert "Authentication failed" in text and "invalid credentials" in text, text
    # and the server serves the others
    ck_join_and_commit(ck_conf(secure_server, certs, "SASL_SSL", mechanism), group_id)


def test_a_client_that_does_not_trust_the_servers_ca_fails(secure_server, certs):
    text = ck_error(ck_conf(secure_server, certs, "SASL_SSL", "SCRAM-SHA-512",
                            ca=certs.other_ca))
    assert "certificate verify failed" in text, text


def test_a_plaintext_client_on_a_tls_port_is_closed(secure_server, certs):
    conf = ck_conf(secure_server, certs, "SSL")
    conf["security.protocol"] = "PLAINTEXT"
    text = ck_error(conf)
    # as against Kafka: the broker closes the connection, the client finds no broker up
    assert "brokers are down" in text or "Disconnected" in text, text
    # and the server goes on serving TLS clients
    ck_join_and_commit(ck_conf(secure_server, certs, "SSL", client_cert=True), "g-after")


def test_the_principal_of_a_client_certificate_is_its_subject_as_kafka_renders_it(certs):
    from cryptography import x509
    from cryptography.hazmat.primitives.serialization import Encoding

    cert = x509.load_pem_x509_certificate(certs.client_cert.read_bytes())
    assert principal_of(cert.public_bytes(Encoding.DER)) == "User:" + CLIENT_DN
    assert principal_of(None) == "User:ANONYMOUS"
