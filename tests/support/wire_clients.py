"""Real Kafka clients, configured for fast tests, and the checks the tests share."""

from __future__ import annotations

import time

from kafka import KafkaAdminClient, KafkaConsumer

from offsetlog.group.consumer_protocol import decode_assignment

SESSION_MS = 3000
HEARTBEAT_MS = 300


def kp_consumer(server, group_id, *, strategy=None, **kw) -> KafkaConsumer:
    from kafka.coordinator.assignors.cooperative_sticky import CooperativeStickyAssignor
    from kafka.coordinator.assignors.range import RangePartitionAssignor
    from kafka.coordinator.assignors.roundrobin import RoundRobinPartitionAssignor
    from kafka.coordinator.assignors.sticky.sticky_assignor import StickyPartitionAssignor

    strategies = {"range": RangePartitionAssignor, "roundrobin": RoundRobinPartitionAssignor,
                  "sticky": StickyPartitionAssignor,
                  "cooperative-sticky": CooperativeStickyAssignor}
    if strategy:
        kw["partition_assignment_strategy"] = [strategies[strategy]]
    # A leader that joins before its metadata lists the topic assigns nothing ("No partition
    # metadata for topic orders") and only rejoins once a metadata refresh shows it: every
    # second, not kafka-python's 5 minutes (confluent's consumers below do the same). Asking
    # for every topic's metadata first makes the usual case not depend on that refresh at all.
    kw.setdefault("metadata_max_age_ms", 1000)
    consumer = KafkaConsumer(bootstrap_servers=server.bootstrap, group_id=group_id,
                             enable_auto_commit=False, session_timeout_ms=SESSION_MS,
                             heartbeat_interval_ms=HEARTBEAT_MS, max_poll_interval_ms=10_000,
                             request_timeout_ms=15_000, **kw)
    consumer.topics()
    return consumer


def ck_consumer(server, group_id, **conf):
    from confluent_kafka import Consumer

    base = {"bootstrap.servers": server.bootstrap, "group.id": group_id,
            "enable.auto.commit": False, "session.timeout.ms": SESSION_MS,
            "heartbeat.interval.ms": HEARTBEAT_MS, "topic.metadata.refresh.interval.ms": 1000}
    base.update(conf)
    return Consumer(base)


def kp_admin(server) -> KafkaAdminClient:
    return KafkaAdminClient(bootstrap_servers=server.bootstrap, request_timeout_ms=15_000)


def poll_all(consumers, until, timeout: float = 30):
    """Poll every consumer (kafka-python or confluent) until ``until()`` holds."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        for c in consumers:
            if hasattr(c, "consume"):  # confluent
                c.poll(0.05)
            else:
                c.poll(timeout_ms=50)
        if until():
            return
    raise AssertionError("timed out polling")


def assignment_of(c) -> set:
    return {(tp.topic, tp.partition) for tp in c.assignment()}


def check_exclusive(assignments: list[set], topic: str, partitions: int) -> None:
    """Each partition owned by exactly one member."""
    seen = [tp for a in assignments for tp in a]
    assert sorted(seen) == [(topic, p) for p in range(partitions)], assignments


def described(server, group_id) -> dict:
    """What the server's DescribeGroups says (through kafka-python's admin client): state,
    protocol and member id -> assigned partitions."""
    admin = kp_admin(server)
    try:
        desc = admin.describe_groups([group_id])[group_id]
    finally:
        admin.close()
    members = {}
    for m in desc["members"]:
        a = m["member_assignment"]
        members[m["member_id"]] = {(p["topic"], q) for p in a["assigned_partitions"]
                                   for q in p["partitions"]} if a else set()
    return {"state": desc["group_state"], "protocol": desc["protocol_data"],
            "members": members}


def decode(assignment: bytes) -> set:
    return {(tp.topic, tp.partition) for tp in decode_assignment(assignment)}
