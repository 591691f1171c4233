"""``ssl.principal.mapping.rules``: Kafka's rules, rule by rule (principal_mapping.py), and
judged by Kafka 4.4: the same rules on a broker with SSL and the StandardAuthorizer and on
``offsetlog serve``, ACLs for the mapped name created by the super user on both; a client
with a certificate is allowed what the mapped principal is granted, and refused what only
the certificate's unmapped name is."""

from __future__ import annotations

import socket
import time
import uuid

import pytest

from offsetlog.bench.kafka_broker import (
    ADMIN,
    STANDARD_AUTHORIZER,
    KafkaBroker,
    KafkaUnavailable,
    check_available,
)
from offsetlog.server.principal_mapping import map_name, parse_rules
from offsetlog.server.scram import make_credential
from offsetlog.store import OffsetStore
from support.kafka_broker import _unavailable
from support.sasl_raw import scram_login
from support.tls_certs import CLIENT_DN, KEYSTORE_PASSWORD
from support.wire_raw import call
from support.wire_server import Server

from .conftest import tls_config

RULES = "RULE:^CN=(.*?),OU=(.*?),.*$/$1@$2/L, DEFAULT"


@pytest.mark.parametrize("rules,name,mapped", [
    (RULES, "CN=Client-1,OU=Payments,O=x,C=NL", "client-1@payments"),
    (RULES, "CN=only", "CN=only"),  # DEFAULT: the name itself
    ("DEFAULT", "CN=a,O=b", "CN=a,O=b"),
    ("RULE:^CN=(.*?),OU=ServiceUsers.*$/$1/,RULE:^CN=(.*?),OU=(.*?),O=(.*?),L=(.*?),ST=(.*?),"
     "C=(.*?)$/$1@$2/U", "CN=Duke,OU=JavaSoft,O=Sun,L=Santa Clara,ST=CA,C=US", "DUKE@JAVASOFT"),
    ("RULE:^CN=(.*?),OU=ServiceUsers.*$/$1/", "CN=kafka,OU=ServiceUsers,O=Org", "kafka"),
    ("RULE:^CN=(.*?),OU=ServiceUsers.*$/$1/", "CN=kafka,OU=Other", None),  # none applies
    ("RULE:^CN=(.*)$/$1$3/", "CN=a", "a$3"),  # a group the pattern lacks: kept as text
    ("RULE:^CN=(.*)$/$12/", "CN=a", "a2"),  # $12 with one group: group 1, then 2
    ("RULE:^CN=(.*)$/u\\/$1/", "CN=a", "u/a"),  # an escaped slash
    ("RULE:^(.*)$/x/", "", "x"),
])
def test_rules(rules, name, mapped):
    assert map_name(parse_rules(rules), name) == mapped


@pytest.mark.parametrize("rules", ["RULE:a/b/X", "RULE:a/b", "NOPE"])
def test_invalid_rules_are_refused(rules):
    with pytest.raises(ValueError, match="Invalid rule"):
        parse_rules(rules)


@pytest.fixture(scope="module")
def sides(certs, tmp_path_factory):
    """[(name, SSL port, admin socket factory)] of Kafka and of offsetlog, both with RULES
    and the authorizer; the topic orders."""
    try:
        check_available()
    except KafkaUnavailable as e:
        _unavailable(str(e))  # a skip, except under CI
    directory = str(tmp_path_factory.mktemp("mapping") / "store")
    with OffsetStore.open(directory) as store:
        store.registries.set_scram_credential(
            ADMIN[0], "SCRAM-SHA-512", make_credential("SCRAM-SHA-512", ADMIN[1]))
    server = Server(directory, config=[
        "listeners=SSL://127.0.0.1:0,SASL_PLAINTEXT://127.0.0.1:0", *tls_config(certs),
        f"ssl.principal.mapping.rules={RULES}", f"authorizer.class.name={STANDARD_AUTHORIZER}",
        f"super.users=User:{ADMIN[0]}"]).start()

    def our_admin():
        sock = socket.create_connection(("127.0.0.1", server.ports["SASL_PLAINTEXT"]),
                                        timeout=10)
        scram_login(sock, *ADMIN)
        return sock

    broker = KafkaBroker(authorizer=True, extra={"ssl.principal.mapping.rules": RULES},
                         secure={"keystore": str(certs.server_p12),
                                 "keystore_password": KEYSTORE_PASSWORD,
                                 "truststore": str(certs.ca), "users": {}})
    with broker:
        with broker.admin_socket() as sock:
            r = call(sock, 19, 7, topics=[dict(name="orders", num_partitions=4,
                                               replication_factor=1, assignments=(),
                                               configs=())], timeout=30_000, validate_only=False)
            assert r.topics[0].error_code.value in (0, 36), r
        yield [("Kafka", broker.ports["SSL"], broker.admin_socket),
               ("offsetlog", server.ports["SSL"], our_admin)]
    server.stop()


def grant(admin, principal: str, group: str) -> None:
    """Read on ``group`` and on the topic orders for ``principal``; waits until in force."""
    with admin() as sock:
        r = call(sock, 30, 3, creations=[dict(
            resource_type=rtype, resource_name=name, resource_pattern_type=3,
            principal=principal, host="*", operation=3, permission_type=3)
            for rtype, name in ((3, group), (2, "orders"))])
        assert all(x.error_code.value == 0 for x in r.results), r
        for _ in range(150):
            r = call(sock, 29, 3, resource_type_filter=3, resource_name_filter=group,
                     pattern_type_filter=3, principal_filter=principal, host_filter=None,
                     operation=1, permission_type=1)
            if r.resources:
                return
            time.sleep(0.1)
        raise AssertionError(f"ACLs of {principal} never listed")


def commit_outcome(port: int, certs, group: str) -> str:
    """What a confluent-kafka consumer with the client certificate gets: "committed", or
    the error it is refused with."""
    from confluent_kafka import Consumer, TopicPartition

    c = Consumer({"bootstrap.servers": f"127.0.0.1:{port}", "security.protocol": "SSL",
                  "ssl.ca.location": str(certs.ca),
                  "ssl.certificate.location": str(certs.client_cert),
                  "ssl.key.location": str(certs.client_key),
                  "group.id": group, "enable.auto.commit": False, "session.timeout.ms": 6000})
    try:
        c.subscribe(["orders"])
        deadline = time.monotonic() + 60
        while not c.assignment() and time.monotonic() < deadline:
            m = c.poll(0.2)
            if m is not None and m.error():
                return m.error().name()
        assert c.assignment(), "neither assigned nor refused"
        c.commit(offsets=[TopicPartition("orders", 0, 7)], asynchronous=False)
        return "committed"
    finally:
        c.close()


def test_the_mapped_name_is_the_principal_the_acls_judge(sides, certs):
    outcomes = {}
    for name, port, admin in sides:
        mapped, unmapped = (f"g-{uuid.uuid4().hex[:8]}" for _ in range(2))
        grant(admin, "User:client-1@payments", mapped)  # what RULES make of CLIENT_DN
        grant(admin, f"User:{CLIENT_DN}", unmapped)  # the certificate's own name
        outcomes[name] = [commit_outcome(port, certs, mapped),
                          commit_outcome(port, certs, unmapped)]
    assert outcomes["offsetlog"] == outcomes["Kafka"] == [
        "committed", "GROUP_AUTHORIZATION_FAILED"]


def test_a_certificate_no_rule_applies_to_is_closed(tmp_path, certs):
    """No rule maps the client certificate's name: its connection is closed after the TLS
    handshake, before any request is answered (Kafka fails building the principal and
    closes); without a certificate the same listener serves (User:ANONYMOUS is not mapped)."""
    import ssl

    server = Server(str(tmp_path / "store"), config=[
        "listeners=SSL://127.0.0.1:0", *tls_config(certs),
        "ssl.principal.mapping.rules=RULE:^CN=nobody$/nobody/"]).start()
    try:
        for with_cert in (True, False):
            ctx = ssl.create_default_context(cafile=str(certs.ca))
            if with_cert:
                ctx.load_cert_chain(str(certs.client_cert), str(certs.client_key))
            raw = socket.create_connection(("127.0.0.1", server.ports["SSL"]), timeout=10)
            with ctx.wrap_socket(raw, server_hostname="127.0.0.1") as sock:
                if with_cert:
                    with pytest.raises((ConnectionError, ssl.SSLError, OSError)):
                        metadata_over(sock)
                else:
                    assert metadata_over(sock).brokers
    finally:
        server.stop()


def metadata_over(sock):
    return call(sock, 3, 12, topics=None, allow_auto_topic_creation=False,
                include_topic_authorized_operations=False)
