"""The client matrix (issue 26, items 2 and 3): Kafka's Java client (test_java.py), franz-go
(test_franzgo.py), kafkajs (test_kafkajs.py), kafka-python, confluent-kafka and aiokafka
(test_python_clients.py) and a mixed group of three of them (test_mixed_group.py), each
session run against ``offsetlog serve`` and against a real Apache Kafka broker side by side,
and where the outcome is deterministic the two outcomes compared for equality. The sessions
themselves are in tests/support/client_sessions.py, the client programs' harness in
tests/support/client_runners.py.

``targets``: ``{"offsetlog": Server, "kafka": broker}``, both with the topics of ``TOPICS``.
Without Java or Maven the broker fixture skips (fails under CI=true); the sessions then run
against offsetlog alone and compare nothing.
"""

from __future__ import annotations

import uuid

import pytest

from support.wire_server import Server

#: the topics every session may use, on both targets (the broker gets them from its admin)
TOPICS = ["orders:4", "wide:6"]


@pytest.fixture(scope="session")
def clients_server(tmp_path_factory):
    s = Server(str(tmp_path_factory.mktemp("clients") / "store"), topics=TOPICS).start()
    yield s
    if s.proc is not None:
        s.stop()


@pytest.fixture(scope="session")
def targets(request, clients_server) -> dict:
    out = {"offsetlog": clients_server}
    try:
        broker = request.getfixturevalue("kafka_broker")
    except pytest.skip.Exception as e:  # not under CI: the fixture fails there instead
        import warnings

        warnings.warn(f"client sessions run against offsetlog alone: {e}")
        return out
    request.getfixturevalue("kafka_topics")(TOPICS)
    out["kafka"] = broker
    return out


@pytest.fixture
def gid() -> str:
    """A fresh group id (the same on both targets: each has its own groups)."""
    return f"cg-{uuid.uuid4().hex[:10]}"

