"""A live group across a server restart, judged by confluent-kafka's consumers: the group's
state (generation, members, assignments) is in the store's log, so consumers that reconnect
within their session timeout go on as the same members with the same partitions, and their
commits (fenced by the generation) are accepted, after SIGTERM and after kill -9 alike."""

from __future__ import annotations

import time

import pytest

from support.wire_clients import assignment_of, ck_consumer, described, poll_all


@pytest.mark.parametrize("how", ["sigterm", "kill9"])
def test_consumers_go_on_as_the_same_members_after_a_restart(server, group_id, how):
    from confluent_kafka import TopicPartition as CTP

    conf = {"partition.assignment.strategy": "range"}
    a, b = ck_consumer(server, group_id, **conf), ck_consumer(server, group_id, **conf)
    try:
        a.subscribe(["orders"])
        b.subscribe(["orders"])
        poll_all([a, b], lambda: len(assignment_of(a)) == 2 and len(assignment_of(b)) == 2)
        before = described(server, group_id)
        assert before["state"] == "Stable"
        assert set(before["members"]) == {a.memberid(), b.memberid()}
        if how == "kill9":
            server.kill9()
            server.start()
        else:
            server.restart()
        deadline = time.monotonic() + 6  # two session timeouts: time enough to rebalance
        while time.monotonic() < deadline:
            a.poll(0.05)
            b.poll(0.05)
        after = described(server, group_id)
        assert after == before  # no rebalance: same members, same partitions, Stable
        assert {a.memberid(), b.memberid()} == set(before["members"])
        # a commit carries the member's generation: accepted, so it is still current
        mine = sorted(p for _, p in assignment_of(a))
        a.commit(offsets=[CTP("orders", p, 300 + p) for p in mine], asynchronous=False)
        got = a.committed([CTP("orders", p) for p in mine], timeout=10)
        assert [tp.offset for tp in got] == [300 + p for p in mine]
    finally:
        a.close()
        b.close()
