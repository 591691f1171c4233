"""Commits and fetches over the wire: metadata kept exactly, per-partition errors, and
durability across a restart and a kill -9."""

from __future__ import annotations

import asyncio

import pytest
from kafka import TopicPartition as KTP
from kafka.structs import OffsetAndMetadata as KOM

from offsetlog import OffsetStore, TopicPartition
from support.wire_clients import ck_consumer, kp_consumer
from support.wire_raw import call
from support.wire_server import raw_socket


def test_kafka_python_commit_and_fetch_with_metadata(server, group_id):
    c = kp_consumer(server, group_id)
    try:
        c.assign([KTP("orders", 0), KTP("orders", 1)])
        c.commit({KTP("orders", 0): KOM(42, "batch-9", -1), KTP("orders", 1): KOM(7, "", 3)})
        assert c.committed(KTP("orders", 0), metadata=True) == KOM(42, "batch-9", -1)
        assert c.committed(KTP("orders", 1), metadata=True) == KOM(7, "", 3)
        assert c.committed(KTP("orders", 2)) is None
    finally:
        c.close()


def test_aiokafka_commit_and_fetch_with_metadata(server, group_id):
    from aiokafka import AIOKafkaConsumer
    from aiokafka.structs import OffsetAndMetadata
    from aiokafka.structs import TopicPartition as ATP

    async def run():
        c = AIOKafkaConsumer(bootstrap_servers=server.bootstrap, group_id=group_id,
                             enable_auto_commit=False)
        await c.start()
        try:
            c.assign([ATP("orders", 2)])
            await c.commit({ATP("orders", 2): OffsetAndMetadata(99, "aio")})
            return await c.committed(ATP("orders", 2))
        finally:
            await c.stop()

    assert asyncio.run(run()) == 99


def test_confluent_metadata_arrives_as_sent(server, group_id):
    # The binding sends metadata with a trailing NUL; the server stores what arrives (read
    # back with kafka-python: the binding itself reads metadata as a C string)
    c = ck_consumer(server, group_id)
    from confluent_kafka import TopicPartition as CTP
    try:
        c.commit(offsets=[CTP("orders", 3, 11, metadata="hello")], asynchronous=False)
        assert [tp.offset for tp in c.committed([CTP("orders", 3)], timeout=10)] == [11]
    finally:
        c.close()
    k = kp_consumer(server, group_id)
    try:
        assert k.committed(KTP("orders", 3), metadata=True).metadata in ("hello", "hello\x00")
    finally:
        k.close()


def test_per_partition_answers_unknown_partition_and_long_metadata(server, group_id):
    # Kafka answers OffsetCommit per partition: the good partition is committed, the others
    # get their own codes (kafka-python retries UNKNOWN_TOPIC_OR_PARTITION, so raw requests)
    with raw_socket(server) as sock:
        parts = [dict(partition_index=0, committed_offset=5, committed_leader_epoch=-1,
                      committed_metadata="ok"),
                 dict(partition_index=9, committed_offset=1, committed_leader_epoch=-1,
                      committed_metadata=""),
                 dict(partition_index=1, committed_offset=1, committed_leader_epoch=-1,
                      committed_metadata="x" * 4097)]
        r = call(sock, 8, 9, group_id=group_id, generation_id_or_member_epoch=-1,
                 member_id="", group_instance_id=None,
                 topics=[dict(name="orders", partitions=parts)])
        # in Kafka's order: the unknown partition (refused before the coordinator) first
        assert [(p.partition_index, int(p.error_code)) for p in r.topics[0].partitions] == [
            (9, 3), (0, 0), (1, 12)]
        r = call(sock, 9, 7, group_id=group_id, topics=None, require_stable=False)
        assert [(p.partition_index, p.committed_offset, p.metadata)
                for t in r.topics for p in t.partitions] == [(0, 5, "ok")]
        # a generation for a group the coordinator does not know: v9 GROUP_ID_NOT_FOUND
        r = call(sock, 8, 9, group_id=group_id + "-new", generation_id_or_member_epoch=3,
                 member_id="m", group_instance_id=None,
                 topics=[dict(name="orders", partitions=parts[:1])])
        assert int(r.topics[0].partitions[0].error_code) == 69
        r = call(sock, 8, 8, group_id=group_id + "-new", generation_id_or_member_epoch=3,
                 member_id="m", group_instance_id=None,
                 topics=[dict(name="orders", partitions=parts[:1])])
        assert int(r.topics[0].partitions[0].error_code) == 22  # ILLEGAL_GENERATION
        # ... and for one with offsets (Kafka's simple group, Empty): UNKNOWN_MEMBER_ID
        for version in (8, 9):
            r = call(sock, 8, version, group_id=group_id, generation_id_or_member_epoch=3,
                     member_id="m", group_instance_id=None,
                     topics=[dict(name="orders", partitions=parts[:1])])
            assert int(r.topics[0].partitions[0].error_code) == 25


def test_negative_offsets_are_stored_as_kafka_stores_them(server, group_id):
    # Kafka's coordinator does not check committed offsets (clients do theirs), and some
    # clients commit -1 and -2 as markers: they are kept and fetched back, across a restart
    parts = [dict(partition_index=p, committed_offset=o, committed_leader_epoch=-1,
                  committed_metadata="") for p, o in ((0, -2), (1, -1), (2, -(1 << 63)))]
    with raw_socket(server) as sock:
        r = call(sock, 8, 9, group_id=group_id, generation_id_or_member_epoch=-1,
                 member_id="", group_instance_id=None,
                 topics=[dict(name="orders", partitions=parts)])
        assert [int(p.error_code) for p in r.topics[0].partitions] == [0, 0, 0]
    server.restart()
    with raw_socket(server) as sock:
        r = call(sock, 9, 7, group_id=group_id, topics=None, require_stable=False)
    assert [(p.partition_index, p.committed_offset) for t in r.topics for p in t.partitions] \
        == [(0, -2), (1, -1), (2, -(1 << 63))]


def _commit(server, group_id, offset):
    c = kp_consumer(server, group_id)
    try:
        c.commit({KTP("orders", 0): KOM(offset, "m", -1)})
    finally:
        c.close()


def _committed(server, group_id):
    c = kp_consumer(server, group_id)
    try:
        return c.committed(KTP("orders", 0), metadata=True)
    finally:
        c.close()


def test_commits_survive_a_restart(server, group_id):
    _commit(server, group_id, 1234)
    assert server.stop() == 0  # SIGTERM: a clean exit
    server.start()
    assert _committed(server, group_id) == KOM(1234, "m", -1)


def test_an_answered_commit_survives_kill_9(server, group_id):
    _commit(server, group_id, 4321)
    server.kill9()
    with OffsetStore.open(server.directory) as store:  # the log itself, no server
        assert store.committed(group_id, TopicPartition("orders", 0)).offset == 4321
        assert "orders" in store.topics()
    server.start()
    assert _committed(server, group_id) == KOM(4321, "m", -1)


class _Store:
    """A store whose commits are fenced as the coordinator fences a generation for a group
    it does not know, and whose group appears or disappears meanwhile."""

    class config:
        metadata_max_bytes = 4096

    def __init__(self, known_after_commit: bool) -> None:
        self.known_after_commit = known_after_commit
        self.committed = False

    def commit_sync(self, group_id, offsets, **kw):
        from offsetlog.errors import IllegalGenerationError
        self.committed = True
        raise IllegalGenerationError("offset-commit: there is no group with generation 3")

    def describe_group(self, group_id):
        assert self.committed, "asked before the commit: the answer could be stale"
        return object() if self.known_after_commit else None


@pytest.mark.parametrize("version, known, code", [(9, False, 69), (9, True, 22), (8, False, 22)])
def test_group_id_not_found_is_decided_after_the_fencing(version, known, code):
    from kio.index import load_request_schema

    from offsetlog.server.codec import Header, build
    from offsetlog.server.config import ServerConfig
    from offsetlog.server.context import Call, Context
    from offsetlog.server.offsets import offset_commit

    class Topics:
        def has_partition(self, name, p):
            return True

    body = build(load_request_schema(8, version), group_id="g",
                 generation_id_or_member_epoch=3, member_id="m", group_instance_id=None,
                 topics=[dict(name="orders", partitions=[dict(
                     partition_index=0, committed_offset=1, committed_leader_epoch=-1,
                     committed_metadata="")])])
    store = _Store(known)
    ctx = Context(store=store, config=ServerConfig(), topics=Topics(), host="h", port=1)
    reply = offset_commit(ctx, Call(8, version, Header(8, version, 1, "t", 0), body), 0)
    from offsetlog.server.work import Outcome
    answer = reply.finish([Outcome(reply.blocking())])  # (the commit's error is answered)
    assert store.committed
    assert int(answer.topics[0].partitions[0].error_code) == code
