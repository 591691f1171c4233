"""The embedded member on the consumer group protocol (``GroupMember(...,
group_protocol="consumer")``, offsetlog/member/consumer_member.py): several members in one
process, the store's coordinator assigning, driven by hand (``tick`` and ``poll(0)`` under a
manual clock). After every step: the coordinator's books give no partition to two members, and
no two members that are in the group at their epoch own the same partition in their own view.
Settled: every partition of the subscribed topics owned by exactly one member."""

from __future__ import annotations

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from offsetlog import TopicPartition
from offsetlog.errors import FencedInstanceIdError
from offsetlog.member import GroupMember, RebalanceListener
from offsetlog.member.consumer_member import ConsumerGroupMember
from support.stores import ManualClock, open_store

TOPICS = {"orders": 4, "wide": 6}
ALL = {TopicPartition(t, p) for t, n in TOPICS.items() for p in range(n)}
SESSION_MS = 45_000  # group.consumer.session.timeout.ms's default
INTERVAL_MS = 5_000


class Recorder(RebalanceListener):
    def __init__(self):
        self.calls = []

    def on_partitions_revoked(self, partitions):
        self.calls.append(("revoked", sorted(partitions)))

    def on_partitions_assigned(self, partitions):
        self.calls.append(("assigned", sorted(partitions)))

    def on_partitions_lost(self, partitions):
        self.calls.append(("lost", sorted(partitions)))


def new_member(store, clock, name, group="g", **kw):
    m = GroupMember(store, group, partitions_per_topic=TOPICS, client_id=name,
                    group_protocol="consumer", heartbeat_thread=False, clock=clock, **kw)
    m.subscribe(list(TOPICS), listener=Recorder())
    return m


def books(store, group="g") -> dict:
    """member id -> (epoch, owned) on the coordinator's books; no partition twice."""
    g = store.consumer_groups.describe(group)
    if g is None:
        return {}
    owner = {}
    for mid, m in g.members.items():
        for tp in m.owned():
            assert tp not in owner, f"{tp} given to {owner[tp]} and {mid}"
            owner[tp] = mid
    return {mid: (m.member_epoch, m.owned()) for mid, m in g.members.items()}


def check(store, members) -> None:
    """No two members in the group at their epoch own one partition, in their own view."""
    b = books(store)
    seen = {}
    for m in members:
        if m.closed or b.get(m.member_id, (None,))[0] != m.member_epoch:
            continue
        for tp in m.assignment():
            assert tp not in seen, f"{tp} owned by {seen[tp]} and {m.member_id}"
            seen[tp] = m.member_id


def step(store, clock, members, advance=INTERVAL_MS) -> None:
    clock.advance(advance)
    store.consumer_groups.poll(clock())
    for m in members:
        m.tick()
        check(store, members)
        m.poll(0)
        check(store, members)


def settle(store, clock, members, rounds=20) -> None:
    for _ in range(rounds):
        step(store, clock, members)
        g = store.consumer_groups.describe("g")
        owned = [tp for m in members for tp in m.assignment()]
        if (g.state() == "Stable" and len(g.members) == len(members)
                and set(owned) == ALL and len(owned) == len(ALL)):
            return
    raise AssertionError(f"not settled: {[(m.member_id, m.assignment()) for m in members]}")


@pytest.fixture
def store(store_dir):
    clock = ManualClock()
    s = open_store(store_dir, clock=clock, partitions=3)
    s.test_clock = clock
    yield s
    s.close()


def test_members_form_rebalance_and_leave(store):
    clock = store.test_clock
    a = new_member(store, clock, "a", server_assignor="range")
    assert isinstance(a, ConsumerGroupMember) and a.group_protocol == "consumer"
    settle(store, clock, [a])
    assert a.assignment() == ALL and a.member_epoch >= 1
    b, c = new_member(store, clock, "b"), new_member(store, clock, "c")
    settle(store, clock, [a, b, c])
    # range over orders:4 and wide:6, members in member id order
    assert sorted(len(m.assignment()) for m in (a, b, c)) == [3, 3, 4]
    assert a._listener.calls[0] == ("assigned", sorted(ALL))
    assert a._listener.calls[1][0] == "revoked"
    b.close()
    assert ("revoked", sorted(set().union(*(
        set(p) for kind, p in b._listener.calls if kind == "assigned")))) in b._listener.calls
    settle(store, clock, [a, c])
    assert b.member_id not in store.consumer_groups.describe("g").members


def test_a_partition_moves_only_once_its_owner_has_given_it_up(store):
    clock = store.test_clock
    a = new_member(store, clock, "a", server_assignor="range")
    settle(store, clock, [a])
    b = new_member(store, clock, "b", server_assignor="range")
    for _ in range(4):  # a heartbeats (told to give half up) but does not poll: keeps it all
        clock.advance(INTERVAL_MS)
        for m in (a, b):
            m.tick()
        b.poll(0)
        check(store, [a, b])
        assert a.assignment() == ALL and b.assignment() == set()
    a.poll(0)  # a revokes (on_partitions_revoked) and tells the coordinator at once
    assert a._listener.calls[-1][0] == "revoked" and len(a.assignment()) == 5
    a.tick()  # owed: sent without waiting for the interval
    clock.advance(INTERVAL_MS)
    b.tick()
    b.poll(0)
    check(store, [a, b])
    assert b.assignment() == ALL - a.assignment()


def test_commits_carry_the_member_epoch(store):
    clock = store.test_clock
    a = new_member(store, clock, "a", enable_auto_commit=False)
    settle(store, clock, [a])
    tp = TopicPartition("orders", 1)
    a.seek(tp, 41)
    a.commit_sync()
    assert a.committed(tp).offset == 41
    b = new_member(store, clock, "b")
    settle(store, clock, [a, b])
    # a moved to a newer epoch: its commits still go through at that epoch
    mine = sorted(a.assignment())[0]
    a.seek(mine, 7)
    a.commit_sync({mine: 8})
    assert a.committed(mine).offset == 8
    done = []
    a.commit_async({mine: 9}, callback=lambda offsets, e: done.append((offsets, e))).result(10)
    a.poll(0)
    assert done == [({mine: 9}, None)] and a.committed(mine).offset == 9


def test_a_member_that_stops_heartbeating_is_removed_and_its_partitions_move(store):
    clock = store.test_clock
    a, b = new_member(store, clock, "a"), new_member(store, clock, "b")
    settle(store, clock, [a, b])
    had = a.assignment()
    # b carries on, a stays silent past the session timeout
    for _ in range(SESSION_MS // INTERVAL_MS + 2):
        step(store, clock, [b])
    assert a.member_id not in store.consumer_groups.describe("g").members
    settle(store, clock, [b])
    # a learns it was fenced on its next heartbeat: its partitions are lost, and it rejoins
    a.tick()
    a.poll(0)
    assert ("lost", sorted(had)) in a._listener.calls and a.member_epoch == 0
    settle(store, clock, [a, b])


def test_a_static_member_comes_back_to_its_partitions(store):
    clock = store.test_clock
    a = new_member(store, clock, "a", group_instance_id="A")
    b = new_member(store, clock, "b")
    settle(store, clock, [a, b])
    had, epoch = a.assignment(), store.consumer_groups.describe("g").group_epoch
    a.close()  # leaves with epoch -2: its place is kept
    a2 = new_member(store, clock, "a2", group_instance_id="A")
    settle(store, clock, [a2, b])
    assert a2.assignment() == had
    assert store.consumer_groups.describe("g").group_epoch == epoch  # no rebalance
    # the instance id is a2's now; a third member with it is refused
    a3 = new_member(store, clock, "a3", group_instance_id="A")
    a3.tick()
    with pytest.raises(Exception) as refused:
        a3.poll(0)
    assert type(refused.value).__name__ == "UnreleasedInstanceIdError"
    assert not isinstance(refused.value, FencedInstanceIdError)


def test_classic_settings_are_refused(store):
    with pytest.raises(ValueError, match="session_timeout_ms"):
        GroupMember(store, "g", partitions_per_topic=TOPICS, group_protocol="consumer",
                    session_timeout_ms=10_000)
    with pytest.raises(ValueError, match="group_protocol"):
        GroupMember(store, "g", partitions_per_topic=TOPICS, group_protocol="nope")


@settings(max_examples=50, deadline=None,
          suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(st.lists(st.tuples(st.sampled_from(["join", "leave", "silence", "step", "tick", "tick",
                                           "poll", "advance"]),
                          st.integers(0, 9)), min_size=1, max_size=40),
       st.sampled_from(["uniform", "range"]))
def test_random_joins_leaves_and_silences_keep_ownership_single(tmp_path_factory, ops,
                                                                 assignor):
    """Heartbeats and polls of single members interleave freely: a member may have been
    told to give a partition up and not have polled yet."""
    clock = ManualClock()
    with open_store(tmp_path_factory.mktemp("cm") / "s", clock=clock, partitions=3) as store:
        live: list = []
        silent: list = []
        made = 0
        for op, i in ops:
            if op == "join" and len(live) < 10:
                live.append(new_member(store, clock, f"m{made}", server_assignor=assignor))
                made += 1
            elif op == "leave" and live:
                live.pop(i % len(live)).close()
            elif op == "silence" and live:
                silent.append(live.pop(i % len(live)))  # never heartbeats again
            elif op == "tick" and live:  # a heartbeat, its answer not yet polled
                live[i % len(live)].tick()
            elif op == "poll" and live:
                live[i % len(live)].poll(0)
            elif op == "advance":
                clock.advance(INTERVAL_MS)
                store.consumer_groups.poll(clock())
            elif op == "step":
                step(store, clock, live)
            check(store, live + silent)
        if live:
            for _ in range(SESSION_MS // INTERVAL_MS + 2):  # the silent ones time out
                step(store, clock, live)
            settle(store, clock, live, rounds=30)
        for m in live + silent:
            m.close()


def test_threads_and_real_time(store_dir):
    """Members as a service runs them: heartbeat threads, real time, each polled by a thread
    of its own; they settle with every partition owned once, and leave cleanly."""
    import threading
    import time

    from offsetlog.group.consumer import ConsumerGroupConfig

    with open_store(store_dir, partitions=3) as store:
        store.consumer_groups.configure(ConsumerGroupConfig(heartbeat_interval_ms=50))
        members = [GroupMember(store, "g", partitions_per_topic=TOPICS, client_id=f"t{i}",
                               group_protocol="consumer") for i in range(3)]
        stop = threading.Event()

        def run(m):
            m.subscribe(list(TOPICS))
            while not stop.is_set():
                m.poll(50)

        threads = [threading.Thread(target=run, args=(m,), daemon=True) for m in members]
        for t in threads:
            t.start()
        deadline = time.monotonic() + 30
        try:
            while True:
                books(store)
                owned = [tp for m in members for tp in m.assignment()]
                g = store.consumer_groups.describe("g")
                if (g is not None and g.state() == "Stable" and set(owned) == ALL
                        and len(owned) == len(ALL)):
                    break
                assert time.monotonic() < deadline, owned
                time.sleep(0.02)
        finally:
            stop.set()
            for t in threads:
                t.join(10)
            for m in members:
                m.close()
        assert store.consumer_groups.describe("g").members == {}
