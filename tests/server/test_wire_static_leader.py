"""A static leader that rejoins a Stable group (a restart: new member id, same
``group.instance.id``) keeps the group's assignment, told as its JoinGroup version allows:
from v9 ``skip_assignment`` (KIP-814), below v9 the old leader's member id and no members,
so it acts as a follower and computes nothing (Kafka's answer; kio requests on a socket)."""

from __future__ import annotations

import pytest

from offsetlog.group.consumer_protocol import (
    decode_assignment,
    encode_assignment,
    encode_subscription,
)
from offsetlog.types import TopicPartition
from support.wire_raw import call
from support.wire_server import raw_socket

SUBSCRIPTION = encode_subscription(["orders"])
ASSIGNMENT = encode_assignment([TopicPartition("orders", p) for p in range(4)])


def _join(sock, version: int, group_id: str, member_id: str = ""):
    body = dict(group_id=group_id, session_timeout=10_000, rebalance_timeout=10_000,
                member_id=member_id, group_instance_id="leader-1", protocol_type="consumer",
                protocols=[dict(name="range", metadata=SUBSCRIPTION)])
    if version >= 9:
        body["reason"] = None
    return call(sock, 11, version, **body)


def _sync(sock, version: int, group_id: str, generation: int, member_id: str, assignments):
    return call(sock, 14, version, group_id=group_id, generation_id=generation,
                member_id=member_id, group_instance_id="leader-1", protocol_type="consumer",
                protocol_name="range", assignments=assignments)


@pytest.mark.parametrize("version", [5, 7, 9])
def test_rejoining_static_leader_keeps_the_assignment(server, group_id, version):
    sync_version = 5 if version >= 7 else 3
    with raw_socket(server) as sock:
        first = _join(sock, version, group_id)
        assert int(first.error_code) == 0 and first.leader == first.member_id
        assert [m.member_id for m in first.members] == [first.member_id]
        s = _sync(sock, sync_version, group_id, first.generation_id, first.member_id,
                  [dict(member_id=first.member_id, assignment=ASSIGNMENT)])
        assert int(s.error_code) == 0 and len(decode_assignment(s.assignment)) == 4

    # the leader restarts: a fresh connection, no member id, the same instance id
    with raw_socket(server) as sock:
        again = _join(sock, version, group_id)
        assert int(again.error_code) == 0
        assert again.member_id and again.member_id != first.member_id
        assert again.generation_id == first.generation_id  # no rebalance
        if version >= 9:
            # KIP-814: it is the leader, but told not to assign
            assert again.skip_assignment and again.leader == again.member_id
            assert [m.member_id for m in again.members] == [again.member_id]
        else:
            # below v9: the old leader's id, no members: it does not think itself the leader
            assert again.leader == first.member_id != again.member_id
            assert list(again.members) == []
        # as a follower it sends no assignments, and gets the current one
        s = _sync(sock, sync_version, group_id, again.generation_id, again.member_id, [])
        assert int(s.error_code) == 0
        assert decode_assignment(s.assignment) == decode_assignment(ASSIGNMENT)
        # the old member id is fenced (KIP-345: the instance now belongs to the new one)
        h = call(sock, 12, 3, group_id=group_id, generation_id=again.generation_id,
                 member_id=first.member_id, group_instance_id="leader-1")
        assert int(h.error_code) == 82  # FENCED_INSTANCE_ID


def test_confluent_consumer_fenced_by_a_second_one_with_its_instance_id(server, group_id):
    """KIP-345: a second consumer with the same group.instance.id takes the instance over;
    librdkafka reports the first one's FENCED_INSTANCE_ID as a fatal error, and the group
    keeps one member, which owns every partition."""
    import time

    from support.wire_clients import assignment_of, ck_consumer, described, poll_all

    first = ck_consumer(server, group_id, **{"group.instance.id": "same"})
    second = None
    try:
        first.subscribe(["orders"])
        poll_all([first], lambda: len(assignment_of(first)) == 4)
        second = ck_consumer(server, group_id, **{"group.instance.id": "same"})
        second.subscribe(["orders"])
        errors = []
        deadline = time.monotonic() + 30
        while time.monotonic() < deadline and not (errors and len(assignment_of(second)) == 4):
            m = first.poll(0.05)
            if m is not None and m.error() is not None:
                errors.append(m.error())
            second.poll(0.05)
        from confluent_kafka import KafkaError

        assert errors and errors[0].code() == KafkaError._FATAL
        assert "fenced" in errors[0].str().lower()
        assert len(assignment_of(second)) == 4
        view = described(server, group_id)
        assert view["state"] == "Stable" and list(view["members"].values()) == [
            {("orders", p) for p in range(4)}]
    finally:
        if second is not None:
            second.close()
        try:
            first.close()
        except Exception:
            pass  # a fenced consumer's close reports the fatal error again
