"""Kafka's Java client on the consumer group protocol (KIP-848): members subscribed with a
``SubscriptionPattern`` (the regex goes to the coordinator) and by name, against
``offsetlog serve`` and a real Apache Kafka broker side by side.

Each target gets its own topics for the case (names carry the group id). Two members by
regex and one by name settle with every partition of the matching topics owned by exactly
one member, the regex members holding only matching topics; a matching topic created later
is picked up by the regex members. (The members' printed assignments lag what their background threads have already
given up, so a passing overlap between two processes' printouts is not checked here.)
Waiting is bounded; no durations are asserted."""

from __future__ import annotations

import time

import pytest

from support.client_runners import MemberProcess, java_client


@pytest.fixture(scope="module")
def java():
    return java_client()


def create_topics(bootstrap: str, specs: dict) -> None:
    from kafka.admin import KafkaAdminClient, NewTopic

    admin = KafkaAdminClient(bootstrap_servers=bootstrap, client_id="java-cp-topics")
    try:
        admin.create_topics([NewTopic(n, p, 1) for n, p in specs.items()], timeout_ms=30_000)
    finally:
        admin.close()


def settle(members: dict, want: set, timeout_s: float = 90) -> dict:
    """Read the members' events until their latest assignments are disjoint, cover ``want``
    exactly and leave none empty."""
    deadline = time.monotonic() + timeout_s
    while True:
        for m in members.values():
            m.drain()
        owned = {}
        for name, m in members.items():
            ev = m.last("assigned")
            owned[name] = set(ev["partitions"]) if ev else set()
        seen: dict = {}
        overlap = False
        for ps in owned.values():
            for tp in ps:
                overlap |= tp in seen
                seen[tp] = True
        # settled: disjoint, covering, none empty. A passing overlap is not a failure here:
        # each process prints its assignment from its application thread, after its
        # background thread may already have given a partition up and told the coordinator
        # (the raw sessions of tests/kafka check the coordinator's books at every heartbeat)
        if not overlap and set(seen) == want and all(owned.values()):
            return owned
        if time.monotonic() > deadline:
            raise AssertionError(f"the group did not settle on {sorted(want)}: {owned}")
        time.sleep(0.1)


def session(java, bootstrap: str, gid: str, assignor: str) -> dict:
    p = gid
    create_topics(bootstrap, {f"{p}-orders-eu": 3, f"{p}-orders-us": 2, f"{p}-pay": 2})
    members = {
        "r1": MemberProcess(java.command("ConsumerMember", bootstrap, gid,
                                         f"re:{p}-orders-.*", assignor, "r1"), "r1"),
        "r2": MemberProcess(java.command("ConsumerMember", bootstrap, gid,
                                         f"re:{p}-orders-.*", assignor, "r2"), "r2"),
        "n": MemberProcess(java.command("ConsumerMember", bootstrap, gid,
                                        f"{p}-pay,{p}-orders-us", assignor, "n"), "n"),
    }
    try:
        want = ({f"{p}-orders-eu:{i}" for i in range(3)} | {f"{p}-orders-us:{i}" for i in range(2)}
                | {f"{p}-pay:{i}" for i in range(2)})
        first = settle(members, want)
        for name in ("r1", "r2"):
            assert all(tp.startswith(f"{p}-orders-") for tp in first[name]), first
        create_topics(bootstrap, {f"{p}-orders-asia": 2, f"{p}-misc": 1})
        second = settle(members, want | {f"{p}-orders-asia:{i}" for i in range(2)})
        asia = {tp for ps in second.values() for tp in ps if "-orders-asia:" in tp}
        assert asia <= second["r1"] | second["r2"]  # only the regex members subscribe to it
        return {"first": first, "second": second}
    finally:
        for m in members.values():
            m.close()


@pytest.mark.parametrize("assignor", ["uniform", "range"])
def test_java_regex_and_names_members(java, targets, gid, assignor):
    for name in sorted(targets, key=lambda n: n != "kafka"):  # the judge first
        session(java, targets[name].bootstrap, f"{gid}-{name[0]}", assignor)
