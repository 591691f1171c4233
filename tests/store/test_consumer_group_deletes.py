"""``delete_group`` and ``delete_offsets`` of consumer-protocol (KIP-848) groups, as Kafka's
DeleteGroups and OffsetDelete treat a ``ConsumerGroup``: a group with members is not deleted
(NonEmptyGroupError) and keeps the offsets of topics its members subscribe to
(GroupSubscribedToTopicError); an Empty one is deleted, its records tombstoned. Both calls
once asked only the classic coordinator, which does not hold these groups: a live group's
offsets were deleted, and its records never."""

from __future__ import annotations

import pytest

from offsetlog import OffsetAndMetadata, TopicPartition
from offsetlog.group.errors import (
    GroupIdNotFoundError,
    GroupSubscribedToTopicError,
    NonEmptyGroupError,
)
from support.embedded_consumer import Member
from support.stores import open_store

T0, U0 = TopicPartition("t", 0), TopicPartition("u", 0)


def test_a_group_with_a_member_is_not_deleted(store_dir, clock):
    with open_store(store_dir, clock=clock, partitions=1) as s:
        m = Member(s)
        s.commit_sync("g", {T0: 5}, generation_id=m.epoch, member_id="a")
        with pytest.raises(NonEmptyGroupError):
            s.delete_group("g")
        assert s.fetch("g") == {T0: OffsetAndMetadata(5)}
        assert s.consumer_groups.describe("g").state() == "Stable"


@pytest.mark.parametrize("committed", [True, False])
def test_an_empty_group_is_deleted_with_its_records(store_dir, clock, committed):
    with open_store(store_dir, clock=clock, partitions=1) as s:
        m = Member(s)
        if committed:
            s.commit_sync("g", {T0: 5}, generation_id=m.epoch, member_id="a")
        m.leave()
        s.delete_group("g")
        assert s.consumer_groups.describe("g") is None and s.fetch("g") == {}
        with pytest.raises(GroupIdNotFoundError):
            s.delete_group("g")
    with open_store(store_dir, clock=clock, partitions=1) as s:
        assert s.consumer_groups.describe("g") is None and s.fetch("g") == {}


def test_offsets_of_a_subscribed_topic_are_not_deleted_while_a_member_subscribes(
        store_dir, clock):
    with open_store(store_dir, clock=clock, partitions=1) as s:
        m = Member(s)  # subscribed to "t"
        s.commit_sync("g", {T0: 5, U0: 6}, generation_id=m.epoch, member_id="a")
        with pytest.raises(GroupSubscribedToTopicError) as e:
            s.delete_offsets("g", [T0, U0])
        assert e.value.partitions == [("t", 0)]
        assert s.fetch("g") == {T0: OffsetAndMetadata(5), U0: OffsetAndMetadata(6)}
        s.delete_offsets("g", [U0])
        assert s.fetch("g") == {T0: OffsetAndMetadata(5)}
        m.leave()
        s.delete_offsets("g", [T0])
        assert s.fetch("g") == {}
