"""The client matrix (issue 26, item 3): Kafka's Java client, franz-go, kafkajs and a mixed
group, each session run against ``offsetlog serve`` and against a real Apache Kafka broker,
and where the outcome is deterministic the two outcomes compared for equality.

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

