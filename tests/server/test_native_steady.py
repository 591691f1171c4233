"""The steady board (native/src/steady.rs): a steady member's Heartbeat, and its OffsetCommit's
check, answered in the native request loop with no Python call, with the coordinator's own
answers everywhere else, and its sessions kept as the coordinator would keep them.

The loop runs in-process over a socket pair with a real store on a manual clock; the stand-in
connection's ``heartbeat`` is the real Python path (``groups.heartbeat_code``), counted."""

from __future__ import annotations

import sys
import uuid

import pytest

from offsetlog import OffsetStore, TopicPartition
from offsetlog.group import GroupConfig
from offsetlog.server import errors as E
from offsetlog.server.groups import HeartbeatFields, heartbeat_code
from offsetlog.server.offsets import NATIVE_ARRAY_CODECS, commit_error_code
from support.native_loop import native_loop
from support.wire_raw import call, frame, read_answer

pytestmark = pytest.mark.skipif(not NATIVE_ARRAY_CODECS,
                                reason="OffsetCommit is decoded by kio here")

SESSION_MS = 10_000
T0 = 1_700_000_000_000
REBALANCE_IN_PROGRESS, ILLEGAL_GENERATION, UNKNOWN_MEMBER_ID, FENCED_INSTANCE_ID = 27, 22, 25, 82


class Clock:
    def __init__(self) -> None:
        self.now = T0

    def __call__(self) -> int:
        return self.now


class Topics:
    topics = {"orders": {"partitions": 4, "topic_id": b"\1" * 16}}


class Conn:
    """``Connection``'s side of the loop: its Python paths, counted."""

    closing = False

    def __init__(self, store: OffsetStore) -> None:
        self.store = store
        self.python_heartbeats = 0
        self.python_commits = 0

        class Ctx:
            pass
        self.ctx = Ctx()
        self.ctx.store = store

    def heartbeat(self, group_id, generation, member_id, instance):
        self.python_heartbeats += 1
        return heartbeat_code(self.ctx, HeartbeatFields(group_id, generation, member_id,
                                                        instance))

    def offset_commit(self, version, group_id, generation, member_id, instance, topics,
                      retention_time_ms):
        """(``Connection.offset_commit``'s answer: None, every partition committed, or each
        topic's partitions with their codes)"""
        self.python_commits += 1
        try:
            self.store.commit_sync(group_id, {
                TopicPartition(name, p): offset for name, parts in topics
                for p, offset, _epoch, _metadata in parts}, generation_id=generation,
                member_id=member_id, group_instance_id=instance)
        except Exception as e:
            code = commit_error_code(self.ctx, version, group_id, e)
            return [(name, [(p[0], code) for p in parts]) for name, parts in topics]
        return None

    def commit_error(self, version, group_id, error):
        return commit_error_code(self.ctx, version, group_id, error)

    def answer(self, frame):
        raise AssertionError("only Heartbeat and OffsetCommit are sent here")


def _loop(tmp_path, manual: bool):
    clock = Clock()
    store = OffsetStore.open(tmp_path / "store", clock=clock if manual else None,
                             group_config=GroupConfig(initial_rebalance_delay_ms=0))
    conn = Conn(store)
    try:
        with native_loop(store, conn, Topics()) as sock:
            yield store, conn, sock, clock
    finally:
        store.close()


@pytest.fixture
def loop(tmp_path):
    """The loop, and the store's clock: a manual one, which the loop calls (with the GIL)."""
    yield from _loop(tmp_path, manual=True)


@pytest.fixture(params=["manual clock", "system clock"])
def any_loop(tmp_path, request):
    """Either clock: with the system's (``clock_ms``), the loop passes a Heartbeat without
    the GIL, in the step that read it; with a manual one, once it has the GIL. (The clock
    the tests move is only the store's with the manual one.)"""
    yield from _loop(tmp_path, manual=request.param == "manual clock")


def _heartbeat(sock, group, generation, member, instance=None, version=4) -> int:
    return int(call(sock, 12, version, group_id=group, generation_id=generation,
                    member_id=member, group_instance_id=instance).error_code)


def _commit(sock, group, generation, member, offset, instance=None) -> int:
    r = call(sock, 8, 8, group_id=group, generation_id_or_member_epoch=generation,
             member_id=member, group_instance_id=instance,
             topics=[dict(name="orders", partitions=[dict(
                 partition_index=0, committed_offset=offset, committed_leader_epoch=-1,
                 committed_metadata=None)])])
    return int(r.topics[0].partitions[0].error_code)


def _join(store, group, instance=None, client="c"):
    """A JoinGroup, its answer once the join phase ends."""
    fut = store.join_group(group, protocols=[("range", b"")], client_id=client,
                           session_timeout_ms=SESSION_MS, group_instance_id=instance)
    store.poll_groups()
    return fut.result(10)


def _stable(store, group, instance=None):
    """A member of a Stable group of its own: ``(member id, generation)``."""
    joined = _join(store, group, instance)
    synced = store.sync_group(group, member_id=joined.member_id,
                              generation_id=joined.generation_id,
                              group_instance_id=instance,
                              assignments={joined.member_id: b""})
    assert synced.result(10).error is None
    return joined.member_id, joined.generation_id


def _board(store, group):
    return store._groups._part_of(group).steady


def _group() -> str:
    return f"g-{uuid.uuid4().hex[:8]}"


def _group_elsewhere(store, group) -> str:
    """A group on another log partition than ``group``'s: a deadline that fires clears its
    partition's whole board, so a neighbour's lapse would send ``group``'s next heartbeat to
    the coordinator."""
    while True:
        other = _group()
        if store._groups._part_of(other) is not store._groups._part_of(group):
            return other


@pytest.mark.parametrize("version", range(5))
def test_a_steady_members_heartbeats_take_no_python_call(any_loop, version):
    store, conn, sock, clock = any_loop
    group = _group()
    instance = "i-1" if version >= 3 else None
    member, generation = _stable(store, group, instance)
    # the first: the coordinator answers it, and states the member steady
    assert _heartbeat(sock, group, generation, member, instance, version) == 0
    assert conn.python_heartbeats == 1
    assert len(_board(store, group)) == 1
    for _ in range(5):
        clock.now += 1_000
        assert _heartbeat(sock, group, generation, member, instance, version) == 0
    assert conn.python_heartbeats == 1


def test_the_boards_heartbeats_keep_the_session(loop):
    store, conn, sock, clock = loop
    group = _group()
    lapsing = _group_elsewhere(store, group)
    member, generation = _stable(store, group)
    other, other_generation = _stable(store, lapsing)
    assert _heartbeat(sock, group, generation, member) == 0
    # three sessions long: each heartbeat (every 4 s, natively) counts
    for _ in range(8):
        clock.now += 4_000
        assert _heartbeat(sock, group, generation, member) == 0
        store.poll_groups()
    assert conn.python_heartbeats == 1
    assert [m.member_id for m in store.describe_group(group).members] == [member]
    # the coordinator's deadline may be a stamp behind: when it comes, the stamp is counted
    coordinator = store._groups._part_of(group).coordinator
    assert coordinator.session_deadline(group, member) < clock.now + SESSION_MS
    clock.now += SESSION_MS - 1
    store.poll_groups()
    assert [m.member_id for m in store.describe_group(group).members] == [member]
    assert coordinator.session_deadline(group, member) == clock.now + 1
    # the control: a member whose heartbeats stopped is gone
    assert store.describe_group(lapsing).members == ()
    assert _heartbeat(sock, lapsing, other_generation, other) == UNKNOWN_MEMBER_ID


def test_a_lapsed_session_is_the_coordinators_to_answer(loop):
    store, conn, sock, clock = loop
    group = _group()
    member, generation = _stable(store, group)
    assert _heartbeat(sock, group, generation, member) == 0
    clock.now += SESSION_MS  # (no poll: the deadline has not fired yet)
    assert _heartbeat(sock, group, generation, member) == UNKNOWN_MEMBER_ID
    assert conn.python_heartbeats == 2
    assert store.describe_group(group).members == ()


def test_a_rebalance_takes_the_members_off_the_board(any_loop):
    store, conn, sock, clock = any_loop
    group = _group()
    member, generation = _stable(store, group)
    assert _heartbeat(sock, group, generation, member) == 0
    assert _heartbeat(sock, group, generation, member) == 0
    assert conn.python_heartbeats == 1
    # a second member joins: the group prepares a rebalance, and its members must rejoin
    store.join_group(group, protocols=[("range", b"")], client_id="d",
                     session_timeout_ms=SESSION_MS)
    assert len(_board(store, group)) == 0
    assert _heartbeat(sock, group, generation, member) == REBALANCE_IN_PROGRESS
    assert _commit(sock, group, generation, member, 5) == 0  # (accepted while preparing)
    assert conn.python_heartbeats == 2
    assert len(_board(store, group)) == 0


@pytest.mark.parametrize("case", ["generation", "member", "instance", "not static"])
def test_what_the_board_does_not_hold_is_answered_as_the_coordinator_answers(any_loop, case):
    store, conn, sock, clock = any_loop
    group = _group()
    member, generation = _stable(store, group, "i-1")
    assert _heartbeat(sock, group, generation, member, "i-1") == 0
    args = {"generation": (generation + 1, member, "i-1"),
            "member": (generation, "someone", None),
            "instance": (generation, member, "i-2"),
            "not static": (generation, "someone", "i-1")}[case]
    expected = store.heartbeat(group, generation_id=args[0], member_id=args[1],
                               group_instance_id=args[2]).result(10).error
    assert expected is not None
    before = conn.python_heartbeats
    assert _heartbeat(sock, group, *args) == E.code_of(expected)
    assert conn.python_heartbeats == before + 1
    # and the member itself still passes
    assert _heartbeat(sock, group, generation, member, "i-1") == 0
    assert conn.python_heartbeats == before + 1


def test_a_steady_members_commits_count_as_its_heartbeats(loop):
    store, conn, sock, clock = loop
    group = _group()
    member, generation = _stable(store, group)
    assert _commit(sock, group, generation, member, 1) == 0  # (the Python way: route)
    assert _heartbeat(sock, group, generation, member) == 0  # (on the board now)
    for offset in range(2, 10):
        clock.now += 4_000
        assert _commit(sock, group, generation, member, offset) == 0
        store.poll_groups()
    assert conn.python_heartbeats == 1 and conn.python_commits == 1
    assert store.committed(group, TopicPartition("orders", 0)).offset == 9
    assert [m.member_id for m in store.describe_group(group).members] == [member]
    # a commit the board does not pass is the coordinator's, coded as the Python path codes it
    assert _commit(sock, group, generation - 1, member, 10) == ILLEGAL_GENERATION
    assert _commit(sock, group, generation, member, 10, instance="i-9") == UNKNOWN_MEMBER_ID
    assert store.committed(group, TopicPartition("orders", 0)).offset == 9


def test_a_static_members_new_process_fences_the_old_one(any_loop):
    store, conn, sock, clock = any_loop
    group = _group()
    old, generation = _stable(store, group, "i-1")
    assert _heartbeat(sock, group, generation, old, "i-1") == 0
    # the instance's new process joins: the old member id is replaced (no rebalance)
    new = _join(store, group, "i-1").member_id
    assert new != old
    assert _heartbeat(sock, group, generation, old, "i-1") == FENCED_INSTANCE_ID
    assert _commit(sock, group, generation, old, 3, instance="i-1") == FENCED_INSTANCE_ID


def test_a_deadline_that_changes_the_group_takes_its_members_off_the_board(loop):
    store, conn, sock, clock = loop
    group = _group()
    first, _ = _stable(store, group)
    # b joins, a rejoins: the group's second generation has both
    joins = [store.join_group(group, protocols=[("range", b"")], client_id=c, member_id=m,
                              session_timeout_ms=SESSION_MS)
             for c, m in (("b", ""), ("a", first))]
    store.poll_groups()
    b, a = (f.result(10) for f in joins)
    assert a.generation_id == b.generation_id
    syncs = [store.sync_group(group, member_id=m.member_id, generation_id=m.generation_id,
                              assignments={a.member_id: b"", b.member_id: b""})
             for m in (a, b)]
    assert [s.result(10).error for s in syncs] == [None, None]
    assert _heartbeat(sock, group, a.generation_id, a.member_id) == 0
    assert _heartbeat(sock, group, b.generation_id, b.member_id) == 0
    assert len(_board(store, group)) == 2
    # only a heartbeats on; b's session lapses and its deadline, fired by the timer's poll,
    # evicts it and starts a rebalance: a must rejoin
    for _ in range(3):
        clock.now += 4_000
        assert _heartbeat(sock, group, a.generation_id, a.member_id) == 0
    store.poll_groups()
    assert len(_board(store, group)) == 0
    assert _heartbeat(sock, group, a.generation_id, a.member_id) == REBALANCE_IN_PROGRESS


@pytest.mark.parametrize("manual", [False, True], ids=["system clock", "manual clock"])
def test_with_the_system_clock_a_steady_heartbeat_needs_no_gil(tmp_path, manual):
    """The client waits for the answer in a C call made holding the GIL (``ctypes.PyDLL``):
    it comes only if the loop answered without the GIL (with the system's clock; a manual
    clock is a Python call, and the answer waits until the GIL is let go)."""
    import ctypes
    import select

    libc = ctypes.PyDLL(None)  # (a PyDLL's calls hold the GIL)
    libc.poll.argtypes = [ctypes.c_void_p, ctypes.c_ulong, ctypes.c_int]
    libc.send.argtypes = [ctypes.c_int, ctypes.c_char_p, ctypes.c_size_t, ctypes.c_int]

    class PollFd(ctypes.Structure):
        _fields_ = [("fd", ctypes.c_int), ("events", ctypes.c_short),
                    ("revents", ctypes.c_short)]

    for store, conn, sock, _ in _loop(tmp_path, manual):
        group = _group()
        member, generation = _stable(store, group)
        assert _heartbeat(sock, group, generation, member) == 0  # (on the board now)
        data = frame(12, 4, group_id=group, generation_id=generation, member_id=member,
                     group_instance_id=None)
        fd = PollFd(sock.fileno(), select.POLLIN, 0)
        # Sent holding the GIL too, and no switch of threads asked for in between: a send
        # that let the GIL go (socket.sendall) let the loop take it and answer with it
        switch = sys.getswitchinterval()
        sys.setswitchinterval(60)
        try:
            assert libc.send(sock.fileno(), data, len(data), 0) == len(data)
            answered = libc.poll(ctypes.byref(fd), 1, 2_000)
        finally:
            sys.setswitchinterval(switch)
        assert answered == (0 if manual else 1)
        _, body = read_answer(sock, 12, 4)
        assert body.error_code == 0
        assert conn.python_heartbeats == 1
