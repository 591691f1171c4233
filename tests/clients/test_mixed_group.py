"""A mixed group: a member of Kafka's Java client, one of librdkafka (confluent-kafka) and one
of kafka-python form one group with the range assignor, and rebalance when the kafka-python
member leaves; against offsetlog and against Kafka, with the same assignments.

Member ids are ``<client.id>-<uuid>`` on both targets and the range assignor of each client
orders members by id, so with client ids m1-java < m2-librdkafka < m3-kafkapython the
assignment is the same whoever leads.
"""

from __future__ import annotations

import threading
import time

import pytest

from support.client_runners import MemberProcess, java_client
from support.client_sessions import SESSION_MS, on_targets, same, wait_settled
from support.wire_clients import assignment_of, ck_consumer, described, kp_consumer

TOPIC, PARTITIONS = "wide", 6


@pytest.fixture(scope="session")
def java():
    return java_client()


def _settle(target, group, views: dict, timeout: float = 60) -> dict:
    """Poll librdkafka (from here) until the members' own views (``views``: name -> a
    function giving ``(member id, partitions)``) cover the topic once and DescribeGroups
    shows exactly those members, Stable, with those assignments."""
    ck = views.pop("_ck")
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        ck.poll(0.05)
        mine = {name: view() for name, view in views.items()}
        if any(v is None for v in mine.values()):
            continue
        if sorted(p for _, parts in mine.values() for p in parts) != list(range(PARTITIONS)):
            continue
        d = described(target, group)
        if d["state"] == "Stable" and d["members"] == {
                mid: {(TOPIC, p) for p in parts} for mid, parts in mine.values()}:
            return {name: sorted(parts) for name, (_, parts) in mine.items()} | {
                "_protocol": d["protocol"]}
    raise AssertionError(f"mixed group {group} did not settle: {mine}, "
                         f"{described(target, group)}")


def mixed_session(java, target, group) -> dict:
    out = {}
    jm = MemberProcess(java.command("Member", target.bootstrap, group, TOPIC, "range",
                                    "m1-java", "-", SESSION_MS), "java m1-java")
    ck = kp = None
    stop = threading.Event()
    failed: list[BaseException] = []
    poller = None
    try:
        (alone,) = wait_settled([jm], PARTITIONS)
        out["alone"] = alone["partitions"]
        ck = ck_consumer(target, group, **{"client.id": "m2-librdkafka",
                                           "partition.assignment.strategy": "range"})
        ck.subscribe([TOPIC])
        kp = kp_consumer(target, group, topics=(TOPIC,), strategy="range",
                         client_id="m3-kafkapython")

        def keep_polling():
            try:
                while not stop.is_set():
                    kp.poll(timeout_ms=50)
            except BaseException as e:  # noqa: BLE001 - reported by the test
                failed.append(e)

        poller = threading.Thread(target=keep_polling, daemon=True)
        poller.start()

        def java_view():
            jm.drain()
            ev = jm.last("assigned")
            return (ev["memberId"], ev["partitions"]) if ev else None

        def ck_view():
            mid = ck.memberid()
            return (mid, [p for _, p in assignment_of(ck)]) if mid else None

        def kp_view():
            meta = kp.group_metadata()
            return (meta.member_id, [p for _, p in assignment_of(kp)]) if meta.member_id \
                else None

        out["three"] = _settle(target, group, {"_ck": ck, "java": java_view,
                                               "librdkafka": ck_view, "kafka-python": kp_view})
        stop.set()
        poller.join()
        kp.close()  # a LeaveGroup
        kp = None
        out["two"] = _settle(target, group, {"_ck": ck, "java": java_view,
                                             "librdkafka": ck_view})
        assert not failed, failed
    finally:
        stop.set()
        if poller is not None:
            poller.join()
        if kp is not None:
            kp.close()
        if ck is not None:
            ck.close()
        jm.close()
    return out


def test_mixed_group_forms_and_rebalances(java, targets, gid):
    results = on_targets(targets, lambda t: mixed_session(java, t, gid))
    for name, r in results.items():
        assert r["alone"] == [0, 1, 2, 3, 4, 5], name
        assert r["three"] == {"java": [0, 1], "librdkafka": [2, 3], "kafka-python": [4, 5],
                              "_protocol": "range"}, name
        assert r["two"] == {"java": [0, 1, 2], "librdkafka": [3, 4, 5], "_protocol": "range"}
    same(results, "mixed group")
