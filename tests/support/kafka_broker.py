"""Fixtures for tests judged by a real Apache Kafka broker (offsetlog.bench.kafka_broker).

``kafka_broker``: one broker for the whole pytest session, started the first time a test
asks for it. Without Java 17+ or Maven the fixture skips with the reason, except under
``CI=true``, where it fails: CI must never pass by skipping Kafka silently.

``OFFSETLOG_KAFKA_BOOTSTRAP=127.0.0.1:PORT`` uses a broker already running there instead
(started by hand with ``python -m offsetlog.bench.kafka_broker``, for quick reruns).

``kafka_topics``: a function that makes sure topics exist on the session's broker (Kafka
answers UNKNOWN_TOPIC_OR_PARTITION for topics it lacks; the wire server's ``--topic``).
"""

from __future__ import annotations

import os

import pytest

from offsetlog.bench.kafka_broker import KafkaBroker, KafkaUnavailable, check_available


def _unavailable(reason: str):
    if os.environ.get("CI", "").lower() in ("true", "1", "yes"):
        pytest.fail(f"Apache Kafka broker unavailable under CI: {reason}", pytrace=False)
    pytest.skip(f"Apache Kafka broker unavailable: {reason}")


class _External:
    def __init__(self, bootstrap: str) -> None:
        self.bootstrap = bootstrap
        self.port = int(bootstrap.rsplit(":", 1)[1])


@pytest.fixture(scope="session")
def kafka_broker():
    if os.environ.get("OFFSETLOG_KAFKA_BOOTSTRAP"):
        yield _External(os.environ["OFFSETLOG_KAFKA_BOOTSTRAP"])
        return
    try:
        check_available()
    except KafkaUnavailable as e:
        _unavailable(str(e))
    broker = KafkaBroker()
    try:
        broker.start()
    except KafkaUnavailable as e:
        _unavailable(str(e))
    yield broker
    broker.stop()


@pytest.fixture(scope="session")
def kafka_topics(kafka_broker):
    """``ensure(["name:N", ...])``: create the topics the broker lacks (N partitions each)."""
    from kafka.admin import KafkaAdminClient, NewTopic

    made: set[str] = set()
    admin = KafkaAdminClient(bootstrap_servers=kafka_broker.bootstrap, client_id="kafka-topics")

    def ensure(specs) -> None:
        wanted = []
        for spec in specs:
            name, _, n = spec.partition(":")
            if name not in made:
                wanted.append(NewTopic(name, int(n or 1), 1))
        if not wanted:
            return
        existing = set(admin.list_topics())
        new = [t for t in wanted if t.name not in existing]
        if new:
            admin.create_topics(new, timeout_ms=30000)
        from support.wire_server import wait_until

        wait_until(lambda: {t.name for t in wanted} <= set(admin.list_topics()),
                   what="topics on the Kafka broker")
        made.update(t.name for t in wanted)

    yield ensure
    admin.close()


@pytest.fixture(scope="session")
def kafka_acl_broker():
    """A second broker, with Kafka's StandardAuthorizer and SCRAM users
    (``KafkaBroker(authorizer=True, secure=...)``): PLAINTEXT clients are ``User:ANONYMOUS``,
    the users of support/acl_targets.py authenticate on ``ports["SASL_PLAINTEXT"]``
    (``carol`` a super user by name); ``admin_socket()`` is the super user's."""
    from support.acl_targets import SUPER_USERS, USERS

    try:
        check_available()
    except KafkaUnavailable as e:
        _unavailable(str(e))
    broker = KafkaBroker(authorizer=True, secure={"users": USERS}, super_users=SUPER_USERS)
    try:
        broker.start()
    except KafkaUnavailable as e:
        _unavailable(str(e))
    yield broker
    broker.stop()
