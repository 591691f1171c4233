"""The group coordinator wired into OffsetStore: requests, fencing, durability, retention."""

import pytest

from offsetlog import OffsetAndMetadata as OAM
from offsetlog import TopicPartition
from offsetlog.errors import (
    IllegalGenerationError,
    RebalanceInProgressError,
    StoreClosedError,
    UnknownMemberIdError,
)
from offsetlog.group.errors import (
    CoordinatorNotAvailableError,
    GroupIdNotFoundError,
    NonEmptyGroupError,
)
from support.groups import form_group
from support.stores import open_group_store

TP0 = TopicPartition("orders", 0)
SESSION = 10_000
DAY = 24 * 3600 * 1000


open_store = open_group_store


def test_members_commit_within_their_generation_and_others_are_fenced(store_dir, clock):
    with open_store(store_dir, clock) as s:
        gen, (m1,) = form_group(s, clock)
        assert s.describe_group("g").state == "Stable"
        s.commit_sync("g", {TP0: 5}, generation_id=gen, member_id=m1)
        assert s.committed("g", TP0).offset == 5
        with pytest.raises(IllegalGenerationError):
            s.commit_sync("g", {TP0: 6}, generation_id=gen + 1, member_id=m1)
        with pytest.raises(UnknownMemberIdError):
            s.commit_sync("g", {TP0: 6}, generation_id=gen, member_id="intruder")
        with pytest.raises(UnknownMemberIdError):  # standalone commit into a live group
            s.commit_sync("g", {TP0: 6})
        with pytest.raises(UnknownMemberIdError):
            s.commit_async("g", {TP0: 6})
        assert s.committed("g", TP0).offset == 5  # rejected commits wrote nothing


def test_group_metadata_survives_reopen_with_fresh_sessions(store_dir, clock):
    with open_store(store_dir, clock) as s:
        gen, (m1, m2) = form_group(s, clock, clients=("c1", "c2"))
    clock.advance(SESSION - 1)  # the group was down for almost a whole session
    with open_store(store_dir, clock) as s:
        d = s.describe_group("g")
        assert (d.state, d.generation) == ("Stable", gen)
        assert sorted(m.member_id for m in d.members) == sorted([m1, m2])
        clock.advance(SESSION - 1)  # ... but sessions restart at load
        s.poll_groups()
        s.commit_sync("g", {TP0: 1}, generation_id=gen, member_id=m1)
        hb = s.heartbeat("g", member_id=m2, generation_id=gen).result(timeout=10)
        assert hb.error is None


def test_session_expiry_triggers_a_rebalance_and_fences_the_stale_member(store_dir, clock):
    with open_store(store_dir, clock) as s:
        gen, (m1, m2) = form_group(s, clock, clients=("c1", "c2"))
        clock.advance(SESSION // 2)
        assert s.heartbeat("g", member_id=m1, generation_id=gen).result(10).error is None
        clock.advance(SESSION // 2 + 1)  # m2 never heartbeat: its session lapsed
        s.poll_groups()
        hb = s.heartbeat("g", member_id=m1, generation_id=gen).result(10)
        assert isinstance(hb.error, RebalanceInProgressError)
        with pytest.raises(UnknownMemberIdError):
            s.commit_sync("g", {TP0: 9}, generation_id=gen, member_id=m2)
        s.commit_sync("g", {TP0: 9}, generation_id=gen, member_id=m1)  # allowed while preparing


def test_retention_of_an_empty_group_counts_from_when_it_emptied(store_dir, clock):
    retention = 4 * SESSION
    with open_store(store_dir, clock, retention_ms=retention) as s:
        gen, (m1,) = form_group(s, clock)
        s.commit_sync("g", {TP0: 5}, generation_id=gen, member_id=m1)
        for _ in range(20):  # a live group subscribed to the topic keeps its offsets
            clock.advance(SESSION // 2)
            assert s.heartbeat("g", member_id=m1, generation_id=gen).result(10).error is None
        assert s.expire_offsets() == 0
        assert s.leave_group("g", member_id=m1).result(10).error is None
        assert s.describe_group("g").state == "Empty"
        clock.advance(retention - 1)
        assert s.expire_offsets() == 0
        clock.advance(1)
        assert s.expire_offsets() == 1
        assert "g" not in s.groups()  # emptied and offset-less: deleted with a tombstone
    with open_store(store_dir, clock) as s:
        assert s.describe_group("g") is None and s.groups() == []


def test_delete_group_refuses_a_group_with_members(store_dir, clock):
    with open_store(store_dir, clock) as s:
        gen, (m1,) = form_group(s, clock)
        s.commit_sync("g", {TP0: 5}, generation_id=gen, member_id=m1)
        with pytest.raises(NonEmptyGroupError):
            s.delete_group("g")
        assert s.committed("g", TP0).offset == 5
        s.leave_group("g", member_id=m1).result(10)
        s.delete_group("g")
        assert s.groups() == [] and s.describe_group("g") is None
    with open_store(store_dir, clock) as s:
        assert s.groups() == []


def test_close_answers_parked_requests(store_dir, clock):
    s = open_store(store_dir, clock)
    fut = s.join_group("g", client_id="c", session_timeout_ms=SESSION,
                       protocols=[("range", b"")])
    assert not fut.done()  # parked: a new group waits for the initial rebalance delay
    s.close()
    assert fut.done()
    assert isinstance(fut.result().error, CoordinatorNotAvailableError)
    with pytest.raises(StoreClosedError):
        s.join_group("g", client_id="c", session_timeout_ms=SESSION, protocols=[("range", b"")])


def test_deleting_a_loaded_group_writes_exactly_one_metadata_tombstone(store_dir, clock):
    """The coordinator alone decides the GROUP_METADATA tombstone, for a group it formed and
    for one it loaded from the log alike (one tombstone: none would resurrect the group on
    replay, two would be noise)."""
    from offsetlog.log.records import GROUP_METADATA
    from offsetlog.recovery.tools.inspect import iter_records

    def metadata_tombstones() -> int:
        return sum(1 for *_, r in iter_records(store_dir) if r[1] == GROUP_METADATA and r[4] is None)

    with open_store(store_dir, clock) as s:
        gen, (m1,) = form_group(s, clock)
        s.commit_sync("g", {TP0: 5}, generation_id=gen, member_id=m1)
        s.leave_group("g", member_id=m1).result(10)
    with open_store(store_dir, clock) as s:  # now the group is one the coordinator loaded
        assert s.describe_group("g").state == "Empty"
        s.delete_group("g")
    assert metadata_tombstones() == 1
    with open_store(store_dir, clock) as s:
        assert s.groups() == [] and s.describe_group("g") is None
        with pytest.raises(GroupIdNotFoundError):  # gone: Kafka's GROUP_ID_NOT_FOUND,
            s.delete_group("g")                    # and nothing more is written
    assert metadata_tombstones() == 1


def test_a_parked_group_request_cannot_be_cancelled_and_is_still_answered(store_dir, clock):
    """The coordinator answers every request it holds; a cancelled future would refuse that
    answer (and raise in the thread delivering it), so the future says no to cancel()."""
    with open_store(store_dir, clock) as s:
        fut = s.join_group("g", client_id="c", session_timeout_ms=SESSION,
                           rebalance_timeout_ms=SESSION, protocols=[("range", b"")])
        assert not fut.done()
        assert not fut.cancel()
        for _ in range(SESSION // 1_000 + 1):
            if fut.done():
                break
            clock.advance(1_000)
            s.poll_groups()
        assert fut.result(timeout=10).error is None
        s.commit_sync("other", {TP0: 1})  # the store still works


def test_a_group_committed_standalone_first_is_fenced_once_it_becomes_managed(store_dir, clock):
    """The store remembers each group's partition and standalone check after its first
    commit; that check must follow the coordinator, not what it knew back then."""
    with open_store(store_dir, clock) as s:
        s.commit_sync("g", {TP0: 1})  # standalone: the group's route is made and kept
        s.commit_async("g", {TP0: 2}).result(timeout=10)
        gen, (m1,) = form_group(s, clock)
        with pytest.raises(UnknownMemberIdError):
            s.commit_sync("g", {TP0: 3})
        with pytest.raises(UnknownMemberIdError):
            s.commit_async("g", {TP0: 3})
        s.commit_sync("g", {TP0: 4}, generation_id=gen, member_id=m1)
        assert s.committed("g", TP0).offset == 4


def test_offsets_of_a_subscribed_topic_cannot_be_deleted_until_the_group_is_empty(
        store_dir, clock):
    """Kafka's OffsetDelete rule (KIP-496), for the whole call: while members subscribe to
    "orders", its offsets stay (and a call that also names another topic deletes nothing);
    other topics' offsets can go; once the group is empty, everything can."""
    from offsetlog.group.errors import GroupSubscribedToTopicError
    other = TopicPartition("returns", 0)
    with open_store(store_dir, clock) as s:
        gen, (m1,) = form_group(s, clock, topics=("orders",))
        s.commit_sync("g", {TP0: 5, other: 7}, generation_id=gen, member_id=m1)
        with pytest.raises(GroupSubscribedToTopicError) as err:
            s.delete_offsets("g", [TP0, other])
        assert err.value.partitions == [("orders", 0)]
        assert s.fetch("g") == {TP0: OAM(5), other: OAM(7)}  # all or nothing
        s.delete_offsets("g", [other])
        assert s.fetch("g") == {TP0: OAM(5)}
        assert s.leave_group("g", member_id=m1).result(timeout=10).error is None
        assert s.describe_group("g").state == "Empty"
        s.delete_offsets("g", [TP0])
        assert s.fetch("g") == {}
    with open_store(store_dir, clock) as s:
        assert s.fetch("g") == {}


def test_a_non_consumer_group_with_members_refuses_offset_deletes(store_dir, clock):
    with open_store(store_dir, clock) as s:
        fut = s.join_group("conn", client_id="c", session_timeout_ms=SESSION,
                           rebalance_timeout_ms=SESSION, protocol_type="connect",
                           protocols=[("default", b"")])
        for _ in range(SESSION // 1_000 + 1):
            if fut.done():
                break
            clock.advance(1_000)
            s.poll_groups()
        join = fut.result(timeout=10)
        assert s.sync_group("conn", member_id=join.member_id, generation_id=join.generation_id,
                            assignments={join.member_id: b""}).result(timeout=10).error is None
        s.commit_sync("conn", {TP0: 1}, generation_id=join.generation_id,
                      member_id=join.member_id)
        with pytest.raises(NonEmptyGroupError):
            s.delete_offsets("conn", [TP0])
        assert s.committed("conn", TP0).offset == 1


def test_a_steady_members_commits_pass_the_steady_board(store_dir, clock, monkeypatch):
    """Once the coordinator answered a member's heartbeat (Stable, nothing queued), the
    member's commits are passed by its partition's steady board with no call into the
    coordinator, and counted as its heartbeats; a commit the board does not hold as it is
    named is the coordinator's to check."""
    with open_store(store_dir, clock) as s:
        gen, (m1,) = form_group(s, clock)
        coordinator = s._groups._part_of("g").coordinator
        calls = []
        real = coordinator.validate_offset_commit
        monkeypatch.setattr(coordinator, "validate_offset_commit",
                            lambda *a, **kw: calls.append(a) or real(*a, **kw))
        s.commit_sync("g", {TP0: 1}, generation_id=gen, member_id=m1)
        assert len(calls) == 1  # (not on the board yet)
        assert s.heartbeat("g", member_id=m1, generation_id=gen).result(10).error is None
        for offset in range(2, 10):  # 32 s: three sessions, kept by the commits alone
            clock.advance(4_000)
            s.commit_sync("g", {TP0: offset}, generation_id=gen, member_id=m1)
            s.poll_groups()
        assert len(calls) == 1
        assert s.describe_group("g").state == "Stable"
        assert [m.member_id for m in s.describe_group("g").members] == [m1]
        with pytest.raises(IllegalGenerationError):
            s.commit_sync("g", {TP0: 10}, generation_id=gen + 1, member_id=m1)
        assert len(calls) == 2
        assert s.committed("g", TP0).offset == 9


def test_a_group_of_offsets_only_fences_member_commits_as_kafkas_simple_group(store_dir, clock):
    """Kafka makes a *simple group* of a group that commits without joining: Empty, of
    generation 0, without members. A commit naming a member or a generation is then
    UNKNOWN_MEMBER_ID (no such member), where a group the store has no trace of is
    ILLEGAL_GENERATION; transactional offsets pending count as offsets."""
    with open_store(store_dir, clock) as s:
        with pytest.raises(IllegalGenerationError):
            s.commit_sync("g", {TP0: 1}, generation_id=1, member_id="m")
        s.commit_sync("g", {TP0: 1})
        for generation, member in ((1, "m"), (0, ""), (-1, "m")):
            if generation == -1:  # (a standalone commit's member id is ignored, as Kafka)
                s.commit_sync("g", {TP0: 2}, generation_id=generation, member_id=member)
                continue
            with pytest.raises(UnknownMemberIdError):
                s.commit_sync("g", {TP0: 2}, generation_id=generation, member_id=member)
        txn = s.init_transactions("t")
        txn.begin()
        txn.commit_offsets("p", {TP0: 1})
        with pytest.raises(UnknownMemberIdError):
            s.commit_sync("p", {TP0: 2}, generation_id=1, member_id="m")
        txn.abort()
        with pytest.raises(IllegalGenerationError):
            s.commit_sync("p", {TP0: 2}, generation_id=1, member_id="m")
