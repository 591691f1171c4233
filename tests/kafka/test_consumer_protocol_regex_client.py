"""A real client subscribing by regular expression on the consumer group protocol:
confluent-kafka (librdkafka) with ``group.protocol=consumer`` and a ``^``-topic (its regex
subscription, sent to the coordinator as SubscribedTopicRegex), two members, against Apache
Kafka and ``offsetlog serve``. The group settles with every partition of the matching topics
owned by exactly one member and none of the others; a matching topic created later is picked
up. At every look no partition is in two assignments. Waiting is bounded; no durations are
asserted."""

from __future__ import annotations

import socket
import time
import uuid

import pytest

confluent_kafka = pytest.importorskip("confluent_kafka")
from confluent_kafka.admin import AdminClient, NewTopic  # noqa: E402

from support.wire_raw import call  # noqa: E402


def create_topics(port: int, specs: dict) -> None:
    admin = AdminClient({"bootstrap.servers": f"127.0.0.1:{port}"})
    for f in admin.create_topics([NewTopic(n, p, 1) for n, p in specs.items()]).values():
        f.result(30)


def consumer(port: int, group: str, pattern: str):
    c = confluent_kafka.Consumer({
        "bootstrap.servers": f"127.0.0.1:{port}", "group.id": group,
        "group.protocol": "consumer", "enable.auto.commit": False,
        "topic.metadata.refresh.interval.ms": 1000})
    c.subscribe([pattern])
    return c


def settle(members, want: set, timeout_s: float = 90) -> list:
    deadline = time.monotonic() + timeout_s
    while True:
        for c in members:
            c.poll(0.1)
        owned = [{(tp.topic, tp.partition) for tp in c.assignment()} for c in members]
        seen: set = set()
        for ps in owned:
            assert not (ps & seen), f"a partition owned twice: {owned}"
            seen |= ps
        if seen == want and all(owned):
            return owned
        if time.monotonic() > deadline:
            raise AssertionError(f"the group did not settle on {sorted(want)}: {owned}")


@pytest.mark.parametrize("target", ["kafka", "offsetlog"])
def test_confluent_kafka_regex_subscription(targets, target):
    port = dict(zip(("kafka", "offsetlog"), targets))[target]
    p = f"rx{uuid.uuid4().hex[:8]}"
    create_topics(port, {f"{p}-orders-eu": 2, f"{p}-orders-us": 1, f"{p}-pay": 2})
    members = [consumer(port, f"{p}-g", f"^{p}-orders-.*") for _ in range(2)]
    try:
        first = {(f"{p}-orders-eu", 0), (f"{p}-orders-eu", 1), (f"{p}-orders-us", 0)}
        settle(members, first)
        with socket.create_connection(("127.0.0.1", port), timeout=10) as sock:
            g = call(sock, 69, 1, group_ids=[f"{p}-g"],
                     include_authorized_operations=False).groups[0]
        # the regex went to the coordinator as librdkafka words it, "(^...)"
        assert [(m.subscribed_topic_regex, list(m.subscribed_topic_names))
                for m in g.members] == [(f"(^{p}-orders-.*)", [])] * 2
        create_topics(port, {f"{p}-orders-asia": 3})
        settle(members, first | {(f"{p}-orders-asia", i) for i in range(3)})
    finally:
        for c in members:
            c.close()
