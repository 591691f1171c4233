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

import contextlib
import os
import shutil
import subprocess

import pytest

from offsetlog.bench.kafka_broker import (
    KafkaBroker,
    KafkaUnavailable,
    cache_dir,
    check_available,
    fetch_libs,
    find_java,
)


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


@contextlib.contextmanager
def separate_targets(directory: str, topics: list[str], *, extra: dict, config: list[str]):
    """``(kafka port, offsetlog port)`` of a broker of its own, started with ``extra`` (broker
    properties), and an ``offsetlog serve`` in ``directory`` with ``config`` (``--config``),
    both with ``topics`` ("name:N"), ready for clients: for cases whose settings would change
    what the session's shared pair answers to every other case. Ask for the session's
    ``kafka_broker`` first, so that a machine without Java skips as there."""
    from kafka.admin import KafkaAdminClient, NewTopic

    from support.consumer_settle import wait_until_assignable
    from support.wire_server import Server, wait_until

    broker = KafkaBroker(extra=extra)
    try:
        broker.start()
    except KafkaUnavailable as e:
        pytest.fail(f"a broker with {extra} did not start: {e}")
    try:
        admin = KafkaAdminClient(bootstrap_servers=broker.bootstrap, client_id="own-topics")
        try:
            admin.create_topics([NewTopic(n, int(c), 1) for n, c in
                                 (t.split(":") for t in topics)], timeout_ms=30_000)
            wait_until(lambda: {t.split(":")[0] for t in topics} <= set(admin.list_topics()),
                       what="topics on the broker of its own")
        finally:
            admin.close()
        wait_until_assignable(broker.port, topics)
        ours = Server(directory, topics=topics, config=config).start()
        try:
            yield broker.port, ours.port
        finally:
            ours.stop()
    finally:
        broker.stop()


def kafka_tools() -> tuple[str, str]:
    """``(java, classpath)`` for Kafka's command-line tools (kafka-tools: AclCommand,
    ConfigCommand, ConsumerGroupCommand, with the csv reader its exports need): the broker's
    jars and those, fetched with Maven once into the Kafka cache. Without them the test skips
    (fails under CI), whichever test asks first."""
    try:
        java = find_java()
        libs = fetch_libs()
    except KafkaUnavailable as e:
        _unavailable(f"Kafka's jars: {e}")
    tools = cache_dir() / "tools"
    if not (tools / "complete").exists():
        mvn = shutil.which("mvn")
        if not mvn:
            _unavailable("mvn not found: it fetches Kafka's tools jar")
        tools.mkdir(parents=True, exist_ok=True)
        jackson = next(libs.glob("jackson-databind-*.jar")).name[len("jackson-databind-"):-4]
        for artifact in (f"org.apache.kafka:kafka-tools:{libs.parent.name}",
                         f"com.fasterxml.jackson.dataformat:jackson-dataformat-csv:{jackson}"):
            r = subprocess.run([mvn, "-q", "-B", "dependency:copy", f"-Dartifact={artifact}",
                                f"-DoutputDirectory={tools}"], capture_output=True, text=True)
            if r.returncode != 0:
                _unavailable(f"Maven could not fetch {artifact}: "
                             f"{(r.stdout + r.stderr)[-500:]}")
        (tools / "complete").write_text("ok\n")
    return java, f"{libs}/*:{tools}/*"
