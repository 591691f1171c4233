"""The native request loop's plain OffsetCommit (native/src/wire_conn.rs, ``plain_commit``):
a simple consumer's commit goes from the frame to the store's native entry with no Python
call, and every other request still takes ``Connection.offset_commit``'s Python path.

The loop runs here in-process over a socket pair, with a real store and a stand-in for the
connection that records which of its methods the loop called."""

from __future__ import annotations

import uuid

import pytest

from offsetlog import OffsetAndMetadata, OffsetStore, TopicPartition
from offsetlog.group import GroupConfig
from offsetlog.server import errors as E
from offsetlog.server.offsets import NATIVE_ARRAY_CODECS, commit_error_code
from support.native_loop import native_loop
from support.wire_raw import call

pytestmark = pytest.mark.skipif(not NATIVE_ARRAY_CODECS,
                                reason="OffsetCommit is decoded by kio here")


class Topics:
    """The server's TopicRegistry as the loop reads it: ``topics[name]["partitions"]``."""

    def __init__(self) -> None:
        self.topics = {"orders": {"partitions": 4, "topic_id": b"\1" * 16}}


class Conn:
    """``Connection``'s side of the loop: the Python path of OffsetCommit answers every
    partition with code 0 after committing through the store, as the real one does for a
    good request, and is counted."""

    closing = False

    def __init__(self, store: OffsetStore) -> None:
        self.store = store
        self.python_commits = 0
        self.retention_times: list[int] = []
        self.errors: list[Exception] = []

    def offset_commit(self, version, group_id, generation, member_id, instance, topics,
                      retention_time_ms):
        self.python_commits += 1
        self.retention_times.append(retention_time_ms)
        self.store.commit_sync(group_id, {
            TopicPartition(name, p): offset for name, parts in topics
            for p, offset, _epoch, _metadata in parts}, generation_id=generation,
            member_id=member_id, group_instance_id=instance)
        return None

    def commit_error(self, version, group_id, error):
        self.errors.append(error)

        class Ctx:
            store = self.store
        return commit_error_code(Ctx, version, group_id, error)

    def answer(self, frame):
        raise AssertionError("only OffsetCommit is sent here")


@pytest.fixture
def loop(tmp_path):
    # (negative offsets taken, as the server's store does; a group's first join at once)
    store = OffsetStore.open(tmp_path / "store", negative_offsets=True,
                             group_config=GroupConfig(initial_rebalance_delay_ms=0))
    conn = Conn(store)
    try:
        with native_loop(store, conn, Topics()) as sock:
            yield store, conn, sock
    finally:
        store.close()


def _commit(sock, group_id, parts, version=8, topic="orders", generation=-1, member="",
            retention=-1):
    r = call(sock, 8, version, group_id=group_id, generation_id_or_member_epoch=generation,
             member_id=member, group_instance_id=None, retention_time=retention,
             topics=[dict(name=topic, partitions=[dict(
                 partition_index=p, committed_offset=o, committed_leader_epoch=e,
                 committed_metadata=m) for p, o, e, m in parts])])
    return [(p.partition_index, int(p.error_code)) for t in r.topics for p in t.partitions]


def _group() -> str:
    return f"g-{uuid.uuid4().hex[:8]}"


def test_a_plain_commit_of_a_known_group_takes_no_python_call(loop):
    store, conn, sock = loop
    group = _group()
    # the first commit of a group goes the Python way: the store checks its name then
    assert _commit(sock, group, [(0, 5, -1, None)]) == [(0, 0)]
    assert conn.python_commits == 1
    for offset in range(6, 10):
        assert _commit(sock, group, [(0, offset, -1, None), (2, offset * 10, -1, "")]) == [
            (0, 0), (2, 0)]
    assert conn.python_commits == 1  # the four after it: natively
    assert {tp: m.offset for tp, m in store.fetch(group).items()} == {
        TopicPartition("orders", 0): 9, TopicPartition("orders", 2): 90}


def test_metadata_and_leader_epochs_take_no_python_call(loop):
    store, conn, sock = loop
    group = _group()
    assert _commit(sock, group, [(0, 5, -1, None)]) == [(0, 0)]
    assert conn.python_commits == 1
    # (Kafka's clients send the epoch of the last record read; -1 and null mean none)
    assert _commit(sock, group, [(0, 6, 4, None), (1, 7, -1, "note"), (2, 8, 0, "é"),
                                 (3, 9, -1, None)]) == [(0, 0), (1, 0), (2, 0), (3, 0)]
    assert conn.python_commits == 1
    expected = {TopicPartition("orders", 0): OffsetAndMetadata(6, "", 4),
                TopicPartition("orders", 1): OffsetAndMetadata(7, "note"),
                TopicPartition("orders", 2): OffsetAndMetadata(8, "é", 0),
                TopicPartition("orders", 3): OffsetAndMetadata(9)}
    assert store.fetch(group) == expected
    store.close()
    with OffsetStore.open(store.path) as reopened:
        assert reopened.fetch(group) == expected


@pytest.mark.parametrize("why, parts, kw", [
    # within the store's 4096 UTF-16 code units, but more UTF-8 bytes than that: counted
    # the long way
    ("wide metadata", [(0, 7, -1, "é" * 3000)], {}),
    ("metadata over the limit", [(0, 7, 2, "x" * 5000)], {}),
    ("a negative offset", [(0, -1, -1, None)], {}),
    ("an unknown topic", [(0, 7, -1, None)], {"topic": "nope"}),
    ("a partition past the topic's count", [(4, 7, -1, None)], {}),
    ("a partition named twice", [(1, 7, -1, None), (1, 8, -1, None)], {}),
    ("a retention time of its own (v2-4)", [(0, 7, -1, None)], {"version": 2, "retention": 0}),
])
def test_anything_else_takes_the_python_path(loop, why, parts, kw):
    store, conn, sock = loop
    group = _group()
    _commit(sock, group, [(0, 1, -1, None)])  # (its route cached: a plain one would go on)
    before = conn.python_commits
    _commit(sock, group, parts, **kw)
    assert conn.python_commits == before + 1, why
    assert conn.retention_times[-1] == kw.get("retention", -1)


@pytest.mark.parametrize("version", [2, 3, 4])
def test_versions_2_to_4_without_a_retention_time_commit_natively(loop, version):
    store, conn, sock = loop
    group = _group()
    _commit(sock, group, [(0, 1, -1, None)], version=version)
    assert _commit(sock, group, [(0, 2, -1, None)], version=version, retention=-1) == [(0, 0)]
    assert conn.python_commits == 1
    assert conn.retention_times == [-1]


def test_a_fenced_plain_commit_is_answered_as_the_python_path_codes_it(loop):
    store, conn, sock = loop
    group = _group()
    assert _commit(sock, group, [(0, 1, -1, None)]) == [(0, 0)]
    # a member joins: the group is the coordinator's now, and a simple consumer's commit
    # is checked by it (Kafka's validateOffsetCommit)
    store.join_group(group, protocols=[("range", b"")], client_id="c")
    with pytest.raises(Exception) as fenced:
        store.commit_sync(group, {TopicPartition("orders", 0): 2})
    code = E.code_of(fenced.value)
    assert code != 0
    for version in (8, 9):
        assert _commit(sock, group, [(0, 2, -1, None), (1, 3, -1, None)], version=version) \
            == [(0, code), (1, code)]
    assert conn.python_commits == 1
    assert [type(e) for e in conn.errors] == [type(fenced.value)] * 2
    assert store.committed(group, TopicPartition("orders", 0)).offset == 1


def _member(store, group):
    """A member of a stable classic group of its own: ``(member id, generation)``."""
    joined = store.join_group(group, protocols=[("range", b"")], client_id="c")
    store.poll_groups()
    joined = joined.result(10)
    synced = store.sync_group(group, member_id=joined.member_id,
                              generation_id=joined.generation_id,
                              assignments={joined.member_id: b""})
    assert synced.result(10).error is None
    return joined.member_id, joined.generation_id


def test_a_members_commit_is_checked_by_the_coordinator_and_takes_no_python_call(loop):
    store, conn, sock = loop
    group = _group()
    member, generation = _member(store, group)
    # the group's first commit: the Python way, which checks its name
    assert _commit(sock, group, [(0, 1, -1, None)], generation=generation,
                   member=member) == [(0, 0)]
    assert conn.python_commits == 1
    assert _commit(sock, group, [(0, 2, -1, None), (3, 30, -1, "")], generation=generation,
                   member=member) == [(0, 0), (3, 0)]
    assert conn.python_commits == 1  # natively, with the coordinator's check
    assert store.committed(group, TopicPartition("orders", 0)).offset == 2
    # fenced as the coordinator fences it, and coded as the Python path codes it
    for stale, other in ((generation + 1, member), (generation, "someone-else")):
        with pytest.raises(Exception) as fenced:
            store.commit_sync(group, {TopicPartition("orders", 0): 3},
                              generation_id=stale, member_id=other)
        code = E.code_of(fenced.value)
        assert code != 0
        assert _commit(sock, group, [(0, 3, -1, None)], generation=stale,
                       member=other) == [(0, code)]
    assert conn.python_commits == 1
    assert store.committed(group, TopicPartition("orders", 0)).offset == 2
