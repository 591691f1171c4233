"""What operators do to a group's offsets and members with Kafka's admin clients, judged by
those clients: altering and resetting offsets (refused per partition while the group has
members, as Kafka refuses an admin's commit into a live group), ListOffsets, and removing a
static member (KIP-345's LeaveGroup v3+ from an admin)."""

from __future__ import annotations

import uuid

from kafka import TopicPartition as KTP
from kafka.admin import MemberToRemove
from kafka.errors import NoError, UnknownMemberIdError
from kafka.structs import OffsetAndMetadata as KOM

from support.wire_clients import assignment_of, ck_consumer, kp_admin, kp_consumer, poll_all
from support.wire_raw import call
from support.wire_server import raw_socket, wait_until


def _ck_admin(server):
    from confluent_kafka.admin import AdminClient

    return AdminClient({"bootstrap.servers": server.bootstrap})


def _alter(admin, group_id, offsets):
    """confluent-kafka's alter_consumer_group_offsets: ``{partition: (offset, error)}``."""
    from confluent_kafka import ConsumerGroupTopicPartitions
    from confluent_kafka import TopicPartition as CTP

    futures = admin.alter_consumer_group_offsets([ConsumerGroupTopicPartitions(
        group_id, [CTP("orders", p, o) for p, o in offsets.items()])])
    (result,) = [f.result(15) for f in futures.values()]
    return {tp.partition: (tp.offset, tp.error) for tp in result.topic_partitions}


def _listed(admin, group_id):
    """confluent-kafka's list_consumer_group_offsets of orders 0-3: ``{partition: offset}``,
    -1001 (librdkafka's OFFSET_INVALID) for none."""
    from confluent_kafka import ConsumerGroupTopicPartitions
    from confluent_kafka import TopicPartition as CTP

    futures = admin.list_consumer_group_offsets([ConsumerGroupTopicPartitions(
        group_id, [CTP("orders", p) for p in range(4)])])
    (result,) = [f.result(15) for f in futures.values()]
    assert all(tp.error is None for tp in result.topic_partitions)
    return {tp.partition: tp.offset for tp in result.topic_partitions}


def test_confluent_alters_offsets_only_while_the_group_is_empty(server, group_id):
    from confluent_kafka import KafkaError

    admin = _ck_admin(server)
    assert _alter(admin, group_id, {0: 5, 1: 7}) == {0: (5, None), 1: (7, None)}
    assert _listed(admin, group_id) == {0: 5, 1: 7, 2: -1001, 3: -1001}
    c = ck_consumer(server, group_id)
    try:
        c.subscribe(["orders"])
        poll_all([c], lambda: len(assignment_of(c)) == 4)
        # an admin's commit (no member, generation -1) into a group with members
        (offset, error), = _alter(admin, group_id, {0: 9}).values()
        assert error is not None and error.code() == KafkaError.UNKNOWN_MEMBER_ID
        assert _listed(admin, group_id)[0] == 5  # nothing was written
    finally:
        c.close()  # leaves: the group is Empty again
    assert _alter(admin, group_id, {0: 11}) == {0: (11, None)}
    assert _listed(admin, group_id) == {0: 11, 1: 7, 2: -1001, 3: -1001}


def test_kafka_python_alters_and_resets_offsets(server, group_id):
    admin = kp_admin(server)
    try:
        tp = KTP("orders", 2)
        assert admin.alter_group_offsets(group_id, {tp: KOM(42, "m", -1)}) == {tp: NoError}
        assert admin.list_group_offsets(group_id)[group_id] == {tp: KOM(42, "m", -1)}
        # to the earliest offset: ListOffsets says 0 (this server keeps no messages)
        reset = admin.reset_group_offsets(group_id, {tp: -2})
        assert reset == {tp: {"error": NoError, "offset": 0}}
        assert admin.list_group_offsets(group_id)[group_id][tp].offset == 0
    finally:
        admin.close()


def test_confluent_list_offsets_of_an_empty_log(server):
    from confluent_kafka import TopicPartition as CTP
    from confluent_kafka.admin import OffsetSpec

    admin = _ck_admin(server)  # kept: a client destroyed meanwhile never resolves its futures
    futures = admin.list_offsets({CTP("orders", 0): OffsetSpec.earliest(),
                                  CTP("orders", 1): OffsetSpec.latest(),
                                  CTP("orders", 2): OffsetSpec.for_timestamp(1_700_000_000_000),
                                  CTP("orders", 3): OffsetSpec.max_timestamp()})
    got = {tp.partition: f.result(15) for tp, f in futures.items()}
    # the log is empty: its start and end are 0 (at leader epoch 0), and no record has a
    # timestamp: offset -1 and no leader epoch, as Kafka answers for an empty partition
    assert {p: (r.offset, r.leader_epoch) for p, r in got.items()} == {
        0: (0, 0), 1: (0, 0), 2: (-1, None), 3: (-1, None)}


def test_list_offsets_v8_earliest_local(server):
    """KIP-405's earliest-local offset (-4, v8) is the log's start as earliest is: 0; a
    timestamp finds nothing (-1, leader epoch -1)."""
    with raw_socket(server) as sock:
        r = call(sock, 2, 8, replica_id=-1, isolation_level=0, topics=[dict(
            name="orders", partitions=[
                dict(partition_index=0, current_leader_epoch=-1, timestamp=-4),
                dict(partition_index=1, current_leader_epoch=-1, timestamp=1_700_000_000_000),
            ])])
    got = {int(p.partition_index): (int(p.error_code), int(p.offset), int(p.leader_epoch))
           for p in r.topics[0].partitions}
    assert got == {0: (0, 0, 0), 1: (0, -1, -1)}


def test_kafka_python_removes_a_static_member(server, group_id):
    instance = f"inst-{uuid.uuid4().hex[:6]}"
    admin = kp_admin(server)
    k = kp_consumer(server, group_id, group_instance_id=instance, topics=["orders"])
    try:
        poll_all([k], lambda: len(assignment_of(k)) == 4)
        before = admin.describe_groups([group_id])[group_id]["members"]
        assert [m["group_instance_id"] for m in before] == [instance]
        removed = admin.remove_group_members(group_id, [
            MemberToRemove(group_instance_id=instance),
            MemberToRemove(group_instance_id="nobody")])
        assert removed == {instance: NoError, "nobody": UnknownMemberIdError}
        # gone at once (no session timeout to wait for): the group is Empty
        view = admin.describe_groups([group_id])[group_id]
        assert (view["group_state"], view["members"]) == ("Empty", [])
        # the consumer learns it on its next heartbeat and joins again, as a new member
        poll_all([k], lambda: admin.describe_groups([group_id])[group_id]["members"])
        wait_until(lambda: (admin.describe_groups([group_id])[group_id]["group_state"]
                            == "Stable"), what="the group after the member rejoined")
        after = admin.describe_groups([group_id])[group_id]["members"]
        assert [m["group_instance_id"] for m in after] == [instance]
        assert after[0]["member_id"] != before[0]["member_id"]
    finally:
        k.close()
        admin.close()
