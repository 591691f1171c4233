"""Kafka 4.4 as the judge of authentication: the same client settings against a real broker
run with SSL and SASL_SSL listeners (SCRAM users made by ``kafka-storage format
--add-scram``; offsetlog/bench/kafka_broker.py) and against ``offsetlog serve``: the client
joins and commits on both, and a wrong password, an unknown user, an untrusted CA and a
plaintext client on a TLS port fail on both, reported the same way by librdkafka."""

from __future__ import annotations

import re

import pytest
from kafka.admin import KafkaAdminClient, NewTopic

from offsetlog.bench.kafka_broker import KafkaBroker, KafkaUnavailable, check_available
from support.kafka_broker import _unavailable
from support.tls_certs import KEYSTORE_PASSWORD

from .conftest import USERS
from .test_secure_clients import ck_conf, ck_error, ck_join_and_commit


@pytest.fixture(scope="module")
def kafka(certs):
    try:
        check_available()
    except KafkaUnavailable as e:
        _unavailable(str(e))
    broker = KafkaBroker(secure={"keystore": str(certs.server_p12),
                                 "keystore_password": KEYSTORE_PASSWORD,
                                 "truststore": str(certs.ca),
                                 "users": {"alice": USERS["alice"]}})
    try:
        broker.start()
    except KafkaUnavailable as e:
        _unavailable(str(e))
    admin = KafkaAdminClient(bootstrap_servers=broker.bootstrap)
    admin.create_topics([NewTopic("orders", 4, 1)])
    admin.close()
    yield broker
    broker.stop()


@pytest.fixture
def targets(kafka, secure_server):
    return {"kafka": kafka, "offsetlog": secure_server}


def normalized(text: str) -> str:
    """librdkafka's error text without what differs between runs (addresses, timings,
    client names)."""
    text = re.sub(r"\S*127\.0\.0\.1:\d+\S*", "ADDR", text)
    text = re.sub(r"\(after \d+ms[^)]*\)", "", text)
    text = re.sub(r"rdkafka#\S+", "", text)
    if "certificate verify failed" in text:
        # librdkafka words the same OpenSSL failure two ways depending on which of its
        # threads reports it first (seen against Kafka under load)
        return "certificate verify failed"
    return re.sub(r"\s+", " ", text).strip()


def first_error(conf) -> str:
    """The first error librdkafka reports for ``conf``, normalized ("" if none)."""
    errors = ck_error(conf).split("KafkaError")
    return normalized(errors[1]) if len(errors) > 1 else ""


@pytest.mark.parametrize("mechanism", ["SCRAM-SHA-512", "SCRAM-SHA-256", "PLAIN"])
def test_both_accept_the_right_password(targets, certs, group_id, mechanism):
    for name, target in targets.items():
        ck_join_and_commit(ck_conf(target, certs, "SASL_SSL", mechanism), f"{group_id}-{name}")


def test_both_accept_a_client_certificate_over_ssl(targets, certs, group_id):
    for name, target in targets.items():
        ck_join_and_commit(ck_conf(target, certs, "SSL", client_cert=True),
                           f"{group_id}-{name}")


@pytest.mark.parametrize("case", ["wrong password", "unknown user", "untrusted CA",
                                  "plaintext on TLS"])
@pytest.mark.parametrize("mechanism", ["SCRAM-SHA-512", "SCRAM-SHA-256"])
def test_failures_are_reported_alike(targets, certs, case, mechanism):
    reports = {}
    for name, target in targets.items():
        if case == "wrong password":
            conf = ck_conf(target, certs, "SASL_SSL", mechanism, "alice", "wrong")
        elif case == "unknown user":
            conf = ck_conf(target, certs, "SASL_SSL", mechanism, "nobody", "x")
        elif case == "untrusted CA":
            conf = ck_conf(target, certs, "SASL_SSL", mechanism, ca=certs.other_ca)
        else:
            conf = ck_conf(target, certs, "SSL")
            conf["security.protocol"] = "PLAINTEXT"
        reports[name] = first_error(conf)
    assert reports["kafka"] == reports["offsetlog"], reports
    assert reports["kafka"], reports
