"""Real Kafka clients, configured for fast tests, and the checks the tests share."""

from __future__ import annotations

import threading
import time

from kafka import KafkaAdminClient, KafkaConsumer
from kafka.structs import MemberState

from offsetlog.group.consumer_protocol import decode_assignment

SESSION_MS = 3000
HEARTBEAT_MS = 300


def kp_consumer(server, group_id, *, topics=(), strategy=None, **kw) -> KafkaConsumer:
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
    # second, not kafka-python's 5 minutes (confluent's consumers below do the same).
    kw.setdefault("metadata_max_age_ms", 1000)
    consumer = KafkaConsumer(*topics, bootstrap_servers=server.bootstrap, group_id=group_id,
                             enable_auto_commit=False, session_timeout_ms=SESSION_MS,
                             heartbeat_interval_ms=HEARTBEAT_MS, max_poll_interval_ms=10_000,
                             request_timeout_ms=15_000, **kw)
    # Every topic's metadata, so the usual case does not depend on that refresh at all; asked
    # for once subscribed, because the leader also compares the partitions it assigned with its
    # view of the subscribed topics, which only metadata answers after subscribe() update. One
    # that assigned before such an answer rejoins when it comes (a rebalance of its own), and
    # kafka-python 3.0 may never take that join in: assigning removes its reason to rejoin, so
    # if that happens while no poll() waits for the join, later polls do not look at it; the
    # member stops heartbeating, is evicted, and never rejoins.
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
    """Poll every consumer (kafka-python or confluent) until ``until()`` holds: each
    kafka-python consumer from a thread of its own that keeps polling meanwhile, confluent's
    from this thread between the checks (librdkafka's ``assignment()`` can block for good while
    another thread polls).

    Not kafka-python's in turn: kafka-python 3.0 joins on its I/O thread and takes a finished
    join in only if a poll() of that consumer is waiting for it; a join that finishes between
    two polls is dropped and made again. Polled in turn, a consumer's join often finishes while
    another consumer is polled. From the leader, the new JoinGroup starts another rebalance
    (Kafka's coordinator rebalances when the leader rejoins), which the leader again joins
    first and the others only once their heartbeat tells them: the same happens again, for
    dozens of generations (a cooperative follow-up rebalance starts just so).
    """
    stop = threading.Event()
    failed: list[BaseException] = []

    def keep_polling(c) -> None:
        try:
            while not stop.is_set():
                c.poll(timeout_ms=50)
        except BaseException as e:  # raised in the test's thread below
            failed.append(e)

    confluent = [c for c in consumers if hasattr(c, "consume")]
    threads = [threading.Thread(target=keep_polling, args=(c,), daemon=True)
               for c in consumers if not hasattr(c, "consume")]
    for t in threads:
        t.start()
    try:
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline and not failed:
            for c in confluent:
                c.poll(0.05)
            if until():
                return
            if not confluent:
                time.sleep(0.05)
    finally:
        stop.set()
        for t in threads:
            t.join()
    if failed:
        raise failed[0]
    raise AssertionError("timed out polling")


def settled(server, group_id, consumers) -> bool:
    """Whether the group has finished rebalancing: the server's group is Stable, its members are
    exactly ``consumers``, each holding what the server assigned it, and every kafka-python
    consumer has taken in the join it made (``group_metadata().state``).

    Assignments alone do not tell: a consumer holds its last assignment until it takes the next
    one in, so they may look complete while the group rebalances again (see ``poll_all``).
    """
    ids = {}
    for c in consumers:
        if hasattr(c, "consume"):  # confluent
            ids[c.memberid()] = c
        else:
            meta = c.group_metadata()
            if meta.state != MemberState.STABLE:
                return False
            ids[meta.member_id] = c
    view = described(server, group_id)
    return (view["state"] == "Stable" and view["members"].keys() == ids.keys()
            and all(view["members"][mid] == assignment_of(c) for mid, c in ids.items()))


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
