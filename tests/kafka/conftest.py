"""The two targets of the differential suite: the session's Apache Kafka broker and one
``offsetlog serve``, each with the same topics and the same group settings."""

from __future__ import annotations

import uuid

import pytest

from support.consumer_settle import wait_until_assignable
from support.wire_server import Server

#: the topics every case may use, on both targets
TOPICS = ["orders:4", "events:2"]


@pytest.fixture(scope="session")
def offsetlog_target(tmp_path_factory):
    s = Server(str(tmp_path_factory.mktemp("diff") / "store"), topics=TOPICS).start()
    yield s
    if s.proc is not None:
        s.stop()


@pytest.fixture(scope="session")
def targets(kafka_broker, kafka_topics, offsetlog_target):
    """``(kafka port, offsetlog port)``."""
    kafka_topics(TOPICS)
    wait_until_assignable(kafka_broker.port, TOPICS)
    return kafka_broker.port, offsetlog_target.port


@pytest.fixture
def gid():
    """A fresh group (and transactional) id per case, the same on both targets."""
    return f"dg-{uuid.uuid4().hex[:10]}"
