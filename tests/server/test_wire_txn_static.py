"""A confluent-kafka transactional producer's send_offsets_to_transaction (commit, then
abort) with require_stable fetches in between; static membership rejoining without a
rebalance."""

from __future__ import annotations

import pytest

from support.wire_clients import assignment_of, ck_consumer, described, kp_consumer, poll_all
from support.wire_txn import stable_fetch as _stable_fetch


def test_confluent_transactional_offsets_commit_then_abort(server, group_id):
    from confluent_kafka import Producer
    from confluent_kafka import TopicPartition as CTP

    c = ck_consumer(server, group_id)
    p = Producer({"bootstrap.servers": server.bootstrap, "transactional.id": "tx-1"})
    try:
        p.init_transactions(20)
        meta = c.consumer_group_metadata()
        p.begin_transaction()
        p.send_offsets_to_transaction([CTP("orders", 0, 10)], meta, 20)
        assert _stable_fetch(server, group_id) == (-1, 88)  # pending: UNSTABLE_OFFSET_COMMIT
        p.commit_transaction(20)
        assert _stable_fetch(server, group_id) == (10, 0)
        p.begin_transaction()
        p.send_offsets_to_transaction([CTP("orders", 0, 20)], meta, 20)
        assert _stable_fetch(server, group_id)[1] == 88
        p.abort_transaction(20)
        assert _stable_fetch(server, group_id) == (10, 0)
    finally:
        c.close()


@pytest.mark.parametrize("library", ["kafka-python", "confluent"])
def test_static_member_restart_does_not_rebalance(server, group_id, library):
    def make(instance):
        if library == "kafka-python":
            return kp_consumer(server, group_id, strategy="range", group_instance_id=instance,
                               topics=["orders"])  # subscribed from the start (wire_clients)
        return ck_consumer(server, group_id, **{"group.instance.id": instance,
                                                "partition.assignment.strategy": "range"})

    a, b = make("a"), make("b")
    revoked = []
    if library == "confluent":
        a.subscribe(["orders"], on_revoke=lambda c, parts: revoked.append(parts))
        b.subscribe(["orders"])
    poll_all([a, b], lambda: len(assignment_of(a)) == 2 and len(assignment_of(b)) == 2)
    # (a may have joined alone first and given up half of its partitions when b came: that
    # rebalance is the group forming, not the restart below)
    revoked.clear()
    before = described(server, group_id)
    generation = a._coordinator._generation.generation_id if library == "kafka-python" else 0
    mine = assignment_of(b)
    # a static member leaves no LeaveGroup behind on close (KIP-345): "restart" it
    b.close()
    b = make("b")
    if library == "confluent":
        b.subscribe(["orders"])
    poll_all([a, b], lambda: assignment_of(b) == mine)
    after = described(server, group_id)
    assert after["state"] == "Stable"
    if library == "kafka-python":  # no new generation
        assert a._coordinator._generation.generation_id == generation
    else:  # nothing was revoked from the member that stayed
        assert revoked == []
    # same generation's assignment: a's member id and partitions are untouched
    assert sorted(map(sorted, after["members"].values())) == sorted(
        map(sorted, before["members"].values()))
    assert assignment_of(a) == {tp for tp in [("orders", p) for p in range(4)]} - mine
    a.close()
    b.close()


def test_read_committed_consumer_waits_for_pending_offsets(server, group_id):
    """librdkafka's read_committed consumer (its default) fetches with require_stable and
    retries on the partition's UNSTABLE_OFFSET_COMMIT: its committed() returns the
    transaction's offset once the transaction commits, not the older one. A read_uncommitted
    consumer gets the last committed offset at once."""
    import threading
    import time

    from confluent_kafka import Producer
    from confluent_kafka import TopicPartition as CTP

    member = ck_consumer(server, group_id)
    reader = ck_consumer(server, group_id)
    eager = ck_consumer(server, group_id, **{"isolation.level": "read_uncommitted"})
    p = Producer({"bootstrap.servers": server.bootstrap, "transactional.id": f"tx-{group_id}"})
    try:
        p.init_transactions(20)
        p.begin_transaction()
        p.send_offsets_to_transaction([CTP("orders", 0, 44)], member.consumer_group_metadata(),
                                      20)
        got = {}

        def read():
            got["offsets"] = reader.committed([CTP("orders", 0)], timeout=20)
            got["at"] = time.monotonic()

        t = threading.Thread(target=read)
        t.start()
        time.sleep(1.0)
        assert "offsets" not in got  # still retrying: the offset is unstable
        committed_at = time.monotonic()
        p.commit_transaction(20)
        t.join(30)
        assert [tp.offset for tp in got["offsets"]] == [44] and got["at"] >= committed_at
        p.begin_transaction()
        p.send_offsets_to_transaction([CTP("orders", 0, 55)], member.consumer_group_metadata(),
                                      20)
        assert [tp.offset for tp in eager.committed([CTP("orders", 0)], timeout=10)] == [44]
        p.abort_transaction(20)
    finally:
        for c in (member, reader, eager):
            c.close()
