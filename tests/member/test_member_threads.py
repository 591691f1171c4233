"""The member on the real clock: its heartbeat thread, and members on their own threads."""

from __future__ import annotations

import threading
import time

from offsetlog.member import GroupMember, RebalanceListener
from support import stores
from support.member_harness import check_exact_cover, partitions

GROUP = "svc"


def open_store(store_dir):
    return stores.open_store(store_dir, partitions=3, group_config=stores.counted_group_config(
        initial_rebalance_delay_ms=0, min_session_timeout_ms=100))


def wait_for(predicate, timeout=10.0):
    deadline = time.monotonic() + timeout
    while not predicate():
        assert time.monotonic() < deadline, "timed out"
        time.sleep(0.01)


def join(member, timeout=10.0):
    deadline = time.monotonic() + timeout
    while not member.poll(timeout_ms=50):
        assert time.monotonic() < deadline, "never got partitions"


def in_group(store, member) -> bool:
    d = store.describe_group(GROUP)
    return d is not None and member.member_id in {m.member_id for m in d.members}


def test_the_heartbeat_thread_keeps_an_idle_member_in_the_group(store_dir):
    with open_store(store_dir) as store:
        beating = GroupMember(store, GROUP, partitions_per_topic={"t": 2}, client_id="a",
                              session_timeout_ms=500, heartbeat_interval_ms=50,
                              max_poll_interval_ms=10_000)
        beating.subscribe(["t"])
        join(beating)
        silent = GroupMember(store, GROUP, partitions_per_topic={"t": 2}, client_id="b",
                             session_timeout_ms=500, heartbeat_interval_ms=50,
                             max_poll_interval_ms=10_000, heartbeat_thread=False)
        silent.subscribe(["t"])
        wait_for(lambda: beating.poll(timeout_ms=20) and silent.poll(timeout_ms=20)
                 and len(beating.assignment()) == 1)
        # neither polls for over two session timeouts; only the one with a heartbeat stays
        time.sleep(1.2)
        assert in_group(store, beating) and not in_group(store, silent)
        beating.close()
        silent.close()
        assert store.describe_group(GROUP).state == "Empty"


def test_the_heartbeat_thread_leaves_when_poll_stalls(store_dir):
    lost = []

    class Listener(RebalanceListener):
        def on_partitions_lost(self, parts):
            lost.append(parts)

    with open_store(store_dir) as store:
        m = GroupMember(store, GROUP, partitions_per_topic={"t": 2}, client_id="a",
                        session_timeout_ms=5_000, heartbeat_interval_ms=50,
                        max_poll_interval_ms=300)
        m.subscribe(["t"], Listener())
        join(m)
        wait_for(lambda: store.describe_group(GROUP).state == "Empty", timeout=3)
        assert m.member_id == ""  # it left, long before its session would have ended
        m.poll()
        assert lost == [sorted(partitions("t", 2))]
        join(m)
        m.close()


def test_members_on_their_own_threads_share_the_partitions(store_dir):
    """Three services, each a thread polling, processing and committing in a loop, with
    cooperative rebalancing: a member joins, another leaves; no commit ever fails."""
    failures: list[BaseException] = []
    stop = {name: threading.Event() for name in "abc"}
    with open_store(store_dir) as store:
        members = {n: GroupMember(store, GROUP, partitions_per_topic={"t": 6}, client_id=n,
                                  assignors=("cooperative-sticky",), session_timeout_ms=2_000,
                                  heartbeat_interval_ms=50, max_poll_interval_ms=5_000,
                                  auto_commit_interval_ms=50)
                   for n in "abc"}

        def service(name):
            m = members[name]
            m.subscribe(["t"])
            try:
                while not stop[name].is_set():
                    for tp in m.poll(timeout_ms=10):
                        m.record_consumed(tp, (m.position(tp) or 0) + 1)
                    m.commit_sync()
            except BaseException as e:  # noqa: BLE001
                failures.append(e)
            finally:
                m.close()

        threads = {n: threading.Thread(target=service, args=(n,)) for n in "abc"}
        try:
            threads["a"].start()
            threads["b"].start()
            wait_for(lambda: len(members["a"].assignment()) == 3
                     and len(members["b"].assignment()) == 3)
            threads["c"].start()
            wait_for(lambda: all(len(members[n].assignment()) == 2 for n in "abc"))
            stop["b"].set()
            threads["b"].join()
            wait_for(lambda: all(len(members[n].assignment()) == 3 for n in "ac"))
            check_exact_cover([members["a"], members["c"]], partitions("t", 6))
        finally:
            for n in "abc":
                stop[n].set()
                if threads[n].is_alive():
                    threads[n].join()
        assert failures == []
        committed = store.fetch(GROUP)
        assert set(committed) == partitions("t", 6)
        assert all(o.offset > 0 for o in committed.values())
