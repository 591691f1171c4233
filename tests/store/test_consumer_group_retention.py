"""The retention pass over consumer-protocol (KIP-848) groups, as Kafka's ``ConsumerGroup``
and ``cleanupExpiredOffsets`` judge them: offsets of topics a member subscribes to never
expire; the others expire ``retention_ms`` after their last commit (an explicit expire
timestamp wins), in any state; an Empty group left without offsets is deleted, its
tombstones written. The pass once took every consumer group for a standalone one (the
classic coordinator, which alone it asked, does not hold them): a live group lost the
offsets of the very topics it was consuming."""

from __future__ import annotations

from offsetlog import OffsetAndMetadata, TopicPartition
from support.embedded_consumer import BEAT, Member
from support.stores import open_store

RETENTION = 60_000
T0, U0 = TopicPartition("t", 0), TopicPartition("u", 0)


def _live_for(member, clock, ms):
    for _ in range(ms // BEAT):
        clock.advance(BEAT)
        member.beat()


def test_a_live_groups_subscribed_topics_keep_their_offsets(store_dir, clock):
    with open_store(store_dir, clock=clock, partitions=1, retention_ms=RETENTION) as s:
        m = Member(s)
        s.commit_sync("g", {T0: 5, U0: 6}, generation_id=m.epoch, member_id="a")
        _live_for(m, clock, RETENTION - BEAT)
        assert s.expire_offsets() == 0
        _live_for(m, clock, 2 * RETENTION)
        assert s.consumer_groups.describe("g").state() == "Stable"
        assert s.expire_offsets() == 1  # "u": no member subscribes to it
        assert s.fetch("g") == {T0: OffsetAndMetadata(5)}
        assert s.expire_offsets() == 0


def test_an_explicit_expiry_of_a_subscribed_topic_waits_too(store_dir, clock):
    with open_store(store_dir, clock=clock, partitions=1, retention_ms=RETENTION) as s:
        m = Member(s)
        s.commit_sync("g", {T0: 5}, generation_id=m.epoch, member_id="a",
                      retention_time_ms=0)
        _live_for(m, clock, BEAT)
        assert s.expire_offsets() == 0
        m.leave()
        assert s.expire_offsets() == 1


def test_an_empty_group_expires_by_commit_time_and_is_then_deleted(store_dir, clock):
    with open_store(store_dir, clock=clock, partitions=1, retention_ms=RETENTION) as s:
        m = Member(s)
        s.commit_sync("g", {T0: 5}, generation_id=m.epoch, member_id="a")
        clock.advance(RETENTION // 2)
        s.commit_sync("g", {U0: 6}, generation_id=m.epoch, member_id="a")
        m.leave()
        assert s.consumer_groups.describe("g").state() == "Empty"
        clock.advance(RETENTION // 2)
        assert s.expire_offsets() == 1  # t-0: a retention after its commit; u-0 not yet
        assert s.consumer_groups.describe("g") is not None  # an offset left: it stays
        clock.advance(RETENTION // 2)
        assert s.expire_offsets() == 1
        assert s.consumer_groups.describe("g") is None and s.fetch("g") == {}
    with open_store(store_dir, clock=clock, partitions=1) as s:
        assert s.consumer_groups.describe("g") is None  # the tombstones hold on reopen
        assert s.groups() == []


def test_an_empty_group_that_never_committed_is_deleted_at_the_next_pass(store_dir, clock):
    """Even in a log partition holding no offset at all, where the pass once did nothing."""
    with open_store(store_dir, clock=clock, partitions=1, retention_ms=RETENTION) as s:
        Member(s).leave()
        assert s.consumer_groups.describe("g").state() == "Empty"
        assert s.expire_offsets() == 0
        assert s.consumer_groups.describe("g") is None
