"""Admin over the wire (kafka-python's admin client and confluent's AdminClient): list and
describe groups (offsets-only ones too), list / delete / OffsetDelete offsets, delete groups,
with Kafka's errors for a non-empty group and an unknown one."""

from __future__ import annotations

import pytest
from kafka import TopicPartition as KTP
from kafka.structs import OffsetAndMetadata as KOM

from support.wire_clients import assignment_of, kp_admin, kp_consumer, poll_all


def test_offsets_only_group_is_listed_and_described_as_kafka_does(server, group_id):
    c = kp_consumer(server, group_id)
    c.assign([KTP("orders", 0)])
    c.commit({KTP("orders", 0): KOM(3, "", -1)})
    c.close()
    admin = kp_admin(server)
    try:
        listed = {g["group_id"]: g for g in admin.list_groups()}
        assert listed[group_id]["group_state"] == "Empty"
        assert listed[group_id]["protocol_type"] == ""
        d = admin.describe_groups([group_id])[group_id]
        assert d["group_state"] == "Empty" and d["members"] == [] and d["error"] is None
        assert admin.list_group_offsets(group_id)[group_id] == {
            KTP("orders", 0): KOM(3, "", -1)}
    finally:
        admin.close()


def test_confluent_admin_lists_and_describes(server, group_id):
    from confluent_kafka.admin import AdminClient

    c = kp_consumer(server, group_id)
    c.assign([KTP("orders", 1)])
    c.commit({KTP("orders", 1): KOM(8, "", -1)})
    c.close()
    admin = AdminClient({"bootstrap.servers": server.bootstrap})
    listed = admin.list_consumer_groups().result(timeout=20)
    assert group_id in {g.group_id for g in listed.valid}
    desc = admin.describe_consumer_groups([group_id])[group_id].result(timeout=20)
    assert desc.group_id == group_id and desc.members == [] and str(desc.state).endswith("EMPTY")


def test_delete_groups_refuses_a_group_with_members_and_an_unknown_one(server, group_id):
    c = kp_consumer(server, group_id, strategy="range", topics=["orders"])
    admin = kp_admin(server)
    try:
        poll_all([c], lambda: len(assignment_of(c)) == 4)
        c.commit({KTP("orders", 0): KOM(1, "", -1)})
        result = admin.delete_groups([group_id, "no-such-group"])
        assert result == {group_id: "NonEmptyGroupError", "no-such-group": "GroupIdNotFoundError"}
        c.close()  # LeaveGroup: the group is Empty and can go
        assert admin.delete_groups([group_id]) == {group_id: "OK"}
        assert group_id not in {g["group_id"] for g in admin.list_groups()}
        assert admin.list_group_offsets(group_id)[group_id] == {}
    finally:
        admin.close()


def test_offset_delete_refuses_subscribed_topics_per_partition(server, group_id):
    from support.wire_raw import call
    from support.wire_server import raw_socket

    c = kp_consumer(server, group_id, strategy="range", topics=["orders"])
    try:
        poll_all([c], lambda: len(assignment_of(c)) == 4)
        c.commit({KTP("orders", 0): KOM(1, "", -1)})
        with raw_socket(server) as sock:
            r = call(sock, 47, 0, group_id=group_id, topics=[
                dict(name="orders", partitions=[dict(partition_index=0)]),
                dict(name="nope", partitions=[dict(partition_index=0)])])
            assert int(r.error_code) == 0
            # in Kafka's order: the unknown topic (refused before the coordinator) first
            # (tests/kafka/test_diff_acls.py::test_offset_delete judges that order)
            assert [(t.name, int(t.partitions[0].error_code)) for t in r.topics] == [
                ("nope", 3), ("orders", 86)]  # UNKNOWN_TOPIC, GROUP_SUBSCRIBED_TO_TOPIC
            r = call(sock, 47, 0, group_id="no-such-group", topics=[])
            assert int(r.error_code) == 69  # GROUP_ID_NOT_FOUND
    finally:
        c.close()
    admin = kp_admin(server)
    try:  # Empty now: OffsetDelete (kafka-python's delete_group_offsets) deletes
        admin.delete_group_offsets(group_id, [KTP("orders", 0)])
        assert admin.list_group_offsets(group_id)[group_id] == {}
    finally:
        admin.close()


def test_create_topics_and_metadata_auto_creation(server):
    from kafka.admin import NewTopic

    admin = kp_admin(server)
    try:
        admin.create_topics([NewTopic("created", 3, 1)])
        with pytest.raises(Exception, match="TopicAlreadyExists"):
            admin.create_topics([NewTopic("created", 3, 1)], raise_errors=True)
        topics = {t.get("topic", t.get("name")): t for t in admin.describe_topics(["created"])}
        assert len(topics["created"]["partitions"]) == 3
    finally:
        admin.close()
    from support.wire_raw import call
    from support.wire_server import raw_socket

    with raw_socket(server) as sock:
        r = call(sock, 3, 12, topics=[dict(name="fresh", topic_id=None)],
                 allow_auto_topic_creation=True, include_topic_authorized_operations=False)
        (t,) = r.topics
        assert (t.name, int(t.error_code), len(t.partitions)) == ("fresh", 0, 1)
        assert t.topic_id.int != 0  # a stable, non-zero topic id
        r = call(sock, 3, 12, topics=[dict(name="absent", topic_id=None)],
                 allow_auto_topic_creation=False, include_topic_authorized_operations=False)
        assert int(r.topics[0].error_code) == 3
    server.restart()
    admin = kp_admin(server)
    try:
        assert {"created", "fresh", "orders"} <= set(admin.list_topics())
    finally:
        admin.close()


def test_authorized_operations_are_all_of_them_as_without_an_authorizer(server, group_id):
    """Asked for (DescribeGroups v3+, Metadata v8+), Kafka without an authorizer reports
    every operation its ACLs know for the resource type; not asked, none."""
    from confluent_kafka import TopicCollection
    from confluent_kafka.admin import AclOperation, AdminClient

    c = kp_consumer(server, group_id)
    c.assign([KTP("orders", 2)])
    c.commit({KTP("orders", 2): KOM(1, "", -1)})
    c.close()
    admin = AdminClient({"bootstrap.servers": server.bootstrap})
    O = AclOperation
    group = admin.describe_consumer_groups([group_id], include_authorized_operations=True)
    assert set(group[group_id].result(20).authorized_operations) == {
        O.READ, O.DESCRIBE, O.DELETE, O.DESCRIBE_CONFIGS, O.ALTER_CONFIGS}
    (topic,) = admin.describe_topics(TopicCollection(["orders"]),
                                     include_authorized_operations=True).values()
    assert set(topic.result(20).authorized_operations) == {
        O.READ, O.WRITE, O.CREATE, O.DESCRIBE, O.DELETE, O.ALTER, O.DESCRIBE_CONFIGS,
        O.ALTER_CONFIGS}
    cluster = admin.describe_cluster(include_authorized_operations=True).result(20)
    assert set(cluster.authorized_operations) == {
        O.CREATE, O.CLUSTER_ACTION, O.DESCRIBE_CONFIGS, O.ALTER_CONFIGS, O.IDEMPOTENT_WRITE,
        O.ALTER, O.DESCRIBE}
    assert admin.describe_consumer_groups([group_id])[group_id].result(
        20).authorized_operations is None
    kp = kp_admin(server)
    try:
        described = kp.describe_groups([group_id], include_authorized_operations=True)
        assert sorted(described[group_id]["authorized_operations"]) == [
            "ALTER_CONFIGS", "DELETE", "DESCRIBE", "DESCRIBE_CONFIGS", "READ"]
    finally:
        kp.close()
