"""A mixed-protocol group, judged by the clients themselves: a kafka-python member (the classic
protocol) and a Java member with ``group.protocol=consumer`` (KIP-848) in one group, against
Apache Kafka and ``offsetlog serve`` side by side (KIP-848's online migration, both ways):

1. one member alone owns every partition: kafka-python in a classic group, or the Java member
   in a consumer group;
2. the other joins: a classic group is upgraded to a consumer group (kafka-python lives on in
   it as a classic member, told to rejoin, assigned by the server's assignor through
   SyncGroup), or kafka-python joins the consumer group as a classic member; the two settle
   with every partition owned by exactly one of them;
3. the Java member leaves: the group is downgraded to a classic group, rebalances, and
   kafka-python owns every partition again; DescribeGroups shows it as a classic group.

Waiting is bounded; no durations are asserted."""

from __future__ import annotations

import sys
import time
from pathlib import Path

import pytest

from support.client_runners import MemberProcess, java_client
from support.wire_clients import described

SCRIPT = Path(__file__).parent / "pymember.py"
PARTITIONS = 4


@pytest.fixture(scope="module")
def java():
    return java_client()


def create_topic(bootstrap: str, name: str) -> None:
    from kafka.admin import KafkaAdminClient, NewTopic

    admin = KafkaAdminClient(bootstrap_servers=bootstrap, client_id="migration-topics")
    try:
        admin.create_topics([NewTopic(name, PARTITIONS, 1)], timeout_ms=30_000)
    finally:
        admin.close()


def owned(member: MemberProcess, topic: str) -> set:
    """The member's latest assignment as ``topic:p`` (kafka-python prints partition numbers,
    the Java member ``topic:p``)."""
    member.drain()
    ev = member.last("assigned")
    if ev is None:
        return set()
    return {p if isinstance(p, str) else f"{topic}:{p}" for p in ev["partitions"]}


def settle(members: dict, topic: str, timeout_s: float = 90) -> dict:
    """Until the members' latest assignments are disjoint, cover the topic and leave none
    empty."""
    want = {f"{topic}:{p}" for p in range(PARTITIONS)}
    deadline = time.monotonic() + timeout_s
    while True:
        views = {name: owned(m, topic) for name, m in members.items()}
        every = [tp for ps in views.values() for tp in ps]
        if len(every) == len(set(every)) and set(every) == want and all(views.values()):
            return views
        if time.monotonic() > deadline:
            raise AssertionError(f"the group did not settle on {sorted(want)}: {views}")
        time.sleep(0.1)


def session(java, target, gid: str, first: str) -> dict:
    topic = f"{gid}-mix"
    create_topic(target.bootstrap, topic)

    def start(name):
        if name == "py":
            return MemberProcess([sys.executable, "-u", str(SCRIPT), "kafka-python",
                                  target.bootstrap, gid, topic, "range", "py", "-", "10000"],
                                 "kafka-python py")
        return MemberProcess(java.command("ConsumerMember", target.bootstrap, gid, topic,
                                          "uniform", "j"), "java j")

    second = "j" if first == "py" else "py"
    members = {first: start(first)}
    try:
        out = {"alone": settle(dict(members), topic)}
        members[second] = start(second)
        out["both"] = settle(dict(members), topic)
        members.pop("j").close()  # the consumer-protocol member leaves: a classic group again
        out["downgraded"] = settle(dict(members), topic)
        d = described(target, gid)  # DescribeGroups describes it as the classic group it is
        deadline = time.monotonic() + 60
        while d["state"] != "Stable" and time.monotonic() < deadline:
            time.sleep(0.2)
            d = described(target, gid)
        out["described"] = (d["state"], len(d["members"]), sorted(
            f"{t}:{p}" for ps in d["members"].values() for t, p in ps))
        return out
    finally:
        for m in members.values():
            m.close()


@pytest.mark.parametrize("first", ["py", "j"])
def test_classic_and_consumer_protocol_members_migrate_both_ways(java, targets, gid, first):
    """``first`` = py: a classic group upgraded by the Java member, then downgraded; j: a
    consumer group that kafka-python joins as a classic member, downgraded when the Java
    member leaves."""
    results = {}
    for name in sorted(targets, key=lambda n: n != "kafka"):  # the judge first
        results[name] = session(java, targets[name], f"{gid}-{name[0]}", first)
    for name, r in results.items():
        topic = f"{gid}-{name[0]}-mix"
        every = sorted(f"{topic}:{p}" for p in range(PARTITIONS))
        assert sorted(r["alone"][first]) == every, (name, r)
        assert len(r["both"]["py"]) == len(r["both"]["j"]) == PARTITIONS // 2, (name, r)
        assert sorted(r["downgraded"]["py"]) == every, (name, r)
        assert r["described"] == ("Stable", 1, every), (name, r)
