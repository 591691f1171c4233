"""Stores for the CLI tests: ``group_store`` has a consumer group with two members, a
standalone group, and transactions committed, aborted and still open."""

import pytest

from offsetlog import OffsetAndMetadata, TopicPartition
from offsetlog.group.consumer_protocol import encode_assignment, encode_subscription

from support.stores import open_store

T0, T1, T2 = (TopicPartition("orders", p) for p in range(3))


def build_group_store(path, clock) -> None:
    with open_store(path, clock=clock, partitions=3) as s:
        futs = [s.join_group("billing", client_id=c, client_host=f"/10.0.0.{i}",
                             group_instance_id=f"billing-{i}" if i == 1 else None,
                             session_timeout_ms=10_000, rebalance_timeout_ms=10_000,
                             protocols=[("range", encode_subscription(["orders"]))])
                for i, c in enumerate(("c1", "c2"), 1)]
        for _ in range(12):
            if all(f.done() for f in futs):
                break
            clock.advance(1_000)
            s.poll_groups()
        joins = [f.result(10) for f in futs]
        leader = next(j for j in joins if j.is_leader)
        other = next(j for j in joins if not j.is_leader)
        assignments = {leader.member_id: encode_assignment([T0, T1]),
                       other.member_id: encode_assignment([T2])}
        for j in joins:
            s.sync_group("billing", member_id=j.member_id, generation_id=j.generation_id,
                         assignments=assignments if j is leader else None).result(10)
        s.commit_sync("billing", {T0: 10, T1: OffsetAndMetadata(11, "note", 4)},
                      generation_id=leader.generation_id, member_id=leader.member_id)
        s.commit_sync("solo", {T2: 7})
        txn = s.init_transactions("tx-a")
        with txn:
            txn.commit_offsets("solo", {T0: 100})
        txn.begin()
        txn.commit_offsets("solo", {T1: 200})
        txn.abort()
        txn.begin()
        txn.commit_offsets("solo", {T2: 300})  # left open: pending


@pytest.fixture
def populated(store_dir):
    with open_store(store_dir, partitions=3) as s:
        s.commit_sync("alpha", {TopicPartition("orders", 0): 5,
                                TopicPartition("orders", 1): OffsetAndMetadata(9, "note", 3)})
        s.commit_sync("beta", {TopicPartition("clicks", 2): 11})
        s.delete_offsets("beta", [TopicPartition("clicks", 2)])
    return store_dir


@pytest.fixture
def group_store(store_dir, clock):
    build_group_store(store_dir, clock)
    return store_dir
