"""Consumer groups over the wire, judged by real clients: every assignment strategy each
client offers, two libraries in one group, rebalances on join, leave and session expiry, and
each partition owned by exactly one member of a generation."""

from __future__ import annotations

import select
import signal
import subprocess
import sys
import textwrap

import pytest

from support.wire_clients import (
    assignment_of,
    check_exclusive,
    ck_consumer,
    described,
    kp_consumer,
    poll_all,
    settled,
)
from support.wire_server import wait_until


@pytest.mark.parametrize("strategy", ["range", "roundrobin", "sticky", "cooperative-sticky"])
def test_kafka_python_strategies_split_the_partitions(server, group_id, strategy):
    a = kp_consumer(server, group_id, strategy=strategy, topics=["orders"])
    b = kp_consumer(server, group_id, strategy=strategy, topics=["orders"])
    try:
        # Until both hold the same generation's assignment: under the eager protocol a member
        # keeps the last one until its next poll revokes it, so the two views may overlap for a
        # moment mid-rebalance (then the check below would judge a client's lag, not the group),
        # or make up a whole split while the leader starts one more rebalance (see settled).
        poll_all([a, b], lambda: assignment_of(a) and assignment_of(b)
                 and len(assignment_of(a)) + len(assignment_of(b)) == 4
                 and len(assignment_of(a) | assignment_of(b)) == 4
                 and settled(server, group_id, [a, b]))
        check_exclusive([assignment_of(a), assignment_of(b)], "orders", 4)
        view = described(server, group_id)
        assert view["state"] == "Stable" and view["protocol"] == strategy
        check_exclusive(list(view["members"].values()), "orders", 4)
    finally:
        a.close()
        b.close()


@pytest.mark.parametrize("strategy", ["range", "roundrobin", "cooperative-sticky"])
def test_confluent_strategies_split_the_partitions(server, group_id, strategy):
    a = ck_consumer(server, group_id, **{"partition.assignment.strategy": strategy})
    b = ck_consumer(server, group_id, **{"partition.assignment.strategy": strategy})
    try:
        a.subscribe(["orders"])
        b.subscribe(["orders"])
        poll_all([a, b], lambda: len(assignment_of(a)) == 2 and len(assignment_of(b)) == 2)
        check_exclusive([assignment_of(a), assignment_of(b)], "orders", 4)
        view = described(server, group_id)
        assert view["protocol"] == strategy
        check_exclusive(list(view["members"].values()), "orders", 4)
    finally:
        a.close()
        b.close()


def test_two_libraries_in_one_group_rebalance_on_join_and_leave(server, group_id):
    kp = kp_consumer(server, group_id, strategy="range", topics=["orders"])
    ck = ck_consumer(server, group_id, **{"partition.assignment.strategy": "range"})
    try:
        poll_all([kp], lambda: len(assignment_of(kp)) == 4)
        ck.subscribe(["orders"])  # a join: the group rebalances, two and two
        poll_all([kp, ck], lambda: len(assignment_of(kp)) == 2 and len(assignment_of(ck)) == 2
                 and settled(server, group_id, [kp, ck]))
        check_exclusive([assignment_of(kp), assignment_of(ck)], "orders", 4)
        view = described(server, group_id)
        assert len(view["members"]) == 2
        check_exclusive(list(view["members"].values()), "orders", 4)
        ck.close()  # a leave: kafka-python gets everything back
        poll_all([kp], lambda: len(assignment_of(kp)) == 4 and settled(server, group_id, [kp]))
        assert len(described(server, group_id)["members"]) == 1
    finally:
        kp.close()


CHILD = textwrap.dedent("""
    import sys, time
    from kafka import KafkaConsumer
    c = KafkaConsumer(bootstrap_servers=sys.argv[1], group_id=sys.argv[2],
                      enable_auto_commit=False, session_timeout_ms=2000,
                      heartbeat_interval_ms=200)
    c.subscribe(["orders"])
    said = False
    while True:
        c.poll(timeout_ms=100)
        if c.assignment() and not said:
            print("assigned", flush=True)
            said = True
""")


def _first_line(child: subprocess.Popen, timeout: float = 60) -> str:
    """The child's first line, or "" if none comes in ``timeout`` seconds (a client stuck
    without an assignment fails the test instead of hanging the suite)."""
    ready, _, _ = select.select([child.stdout], [], [], timeout)
    return child.stdout.readline().strip() if ready else ""


def test_a_member_that_stops_heartbeating_is_evicted(server, group_id):
    survivor = kp_consumer(server, group_id, strategy="range", topics=["orders"])
    child = subprocess.Popen([sys.executable, "-c", CHILD, server.bootstrap, group_id],
                             stdout=subprocess.PIPE, text=True)
    try:
        assert _first_line(child) == "assigned"
        poll_all([survivor], lambda: len(described(server, group_id)["members"]) == 2
                 and len(assignment_of(survivor)) == 2)
        child.send_signal(signal.SIGKILL)  # no LeaveGroup: only its session can end it
        child.wait()
        poll_all([survivor], lambda: len(assignment_of(survivor)) == 4, timeout=20)
        view = wait_until(lambda: (v := described(server, group_id))["state"] == "Stable"
                          and len(v["members"]) == 1 and v, what="eviction")
        check_exclusive(list(view["members"].values()), "orders", 4)
    finally:
        child.kill()
        survivor.close()
