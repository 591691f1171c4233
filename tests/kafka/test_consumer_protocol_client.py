"""A real client on the consumer group protocol (KIP-848): confluent-kafka (librdkafka) with
``group.protocol=consumer`` forms a group of three on ``orders`` (4 partitions), rebalances
when members join and when one leaves, against Apache Kafka and against ``offsetlog serve``.

At every look (after each member's poll) no partition is in two members' assignments (the
protocol revokes before it reassigns), and the group settles with every partition owned by
exactly one member. Waiting is bounded (a failure, not a hang); no durations are asserted."""

from __future__ import annotations

import time
import uuid

import pytest

confluent_kafka = pytest.importorskip("confluent_kafka")

PARTITIONS = set(range(4))  # "orders:4" (tests/kafka/conftest.py)


def consumer(port: int, group: str, name: str):
    c = confluent_kafka.Consumer({
        "bootstrap.servers": f"127.0.0.1:{port}", "group.id": group,
        "group.protocol": "consumer", "client.id": name, "enable.auto.commit": False})
    c.subscribe(["orders"])
    return c


def look(members: dict) -> dict:
    """Poll each member once; their assignments, checked to be disjoint."""
    for c in members.values():
        c.poll(0.1)
    owned = {name: {tp.partition for tp in c.assignment() if tp.topic == "orders"}
             for name, c in members.items()}
    seen: dict = {}
    for name, ps in owned.items():
        for p in ps:
            assert p not in seen, f"partition {p} owned by {seen[p]} and {name} at once"
            seen[p] = name
    return owned


def settle(members: dict, done, timeout_s: float = 90) -> dict:
    deadline = time.monotonic() + timeout_s
    while True:
        owned = look(members)
        if done(owned):
            return owned
        if time.monotonic() > deadline:
            raise AssertionError(f"the group did not settle: {owned}")


def covered(owned: dict) -> bool:
    return (set().union(*owned.values()) == PARTITIONS
            and sum(len(ps) for ps in owned.values()) == len(PARTITIONS)
            and all(owned.values()))


@pytest.mark.parametrize("target", ["kafka", "offsetlog"])
def test_confluent_kafka_group_forms_and_rebalances(targets, target):
    port = targets[0] if target == "kafka" else targets[1]
    group = f"cp-{uuid.uuid4().hex[:10]}"
    members = {"c1": consumer(port, group, "c1")}
    try:
        owned = settle(members, lambda o: o["c1"] == PARTITIONS)
        members["c2"] = consumer(port, group, "c2")
        members["c3"] = consumer(port, group, "c3")
        owned = settle(members, covered)
        assert sorted(len(ps) for ps in owned.values()) == [1, 1, 2]
        members.pop("c2").close()  # leaves the group (epoch -1)
        owned = settle(members, covered)
        assert sorted(len(ps) for ps in owned.values()) == [2, 2]
    finally:
        for c in members.values():
            c.close()
