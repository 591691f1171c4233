"""A lone commit runs on the event loop's thread as ``commit_sync`` (no hand-off); under load,
or after a commit held the loop too long, commits are queued with ``commit_async`` and
answered on the loop's thread, which leads the store's async writer (connection.py)."""

from __future__ import annotations

import asyncio
import threading
import time
from types import SimpleNamespace

import pytest

from offsetlog import OffsetStore
from offsetlog.server import connection
from offsetlog.server.config import ServerConfig
from offsetlog.server.connection import INLINE_ALONE_S, INLINE_PAUSE_S, Connections
from offsetlog.server.main import serve
from offsetlog.server.topics import TopicRegistry
from offsetlog.server.workers import Workers
from support.wire_raw import call

# -- the rules, with a fake clock ----------------------------------------------------------


class FakeClock:
    def __init__(self) -> None:
        self.now = 1000.0

    def __call__(self) -> float:
        return self.now


def _connections(workers_idle: bool = True):
    clock = FakeClock()
    workers = SimpleNamespace(idle=workers_idle)
    ctx = SimpleNamespace(config=SimpleNamespace(connections_max_idle_ms=600_000))

    async def make():
        return Connections(ctx, workers, clock=lambda: 0, monotonic=clock)

    return asyncio.run(make()), clock, workers


def test_one_connection_alone_commits_inline():
    conns, clock, _ = _connections()
    a = object()
    for _ in range(3):
        assert conns.may_inline(a)
        clock.now += 0.0005  # back to back, well inside INLINE_ALONE_S


def test_another_connection_committing_recently_queues_commits():
    conns, clock, _ = _connections()
    a, b = object(), object()
    assert conns.may_inline(a)
    clock.now += INLINE_ALONE_S / 5
    assert not conns.may_inline(b)  # a committed just now: the loop must keep reading
    clock.now += INLINE_ALONE_S / 5
    assert not conns.may_inline(a)  # and now b has
    clock.now += INLINE_ALONE_S * 2
    assert conns.may_inline(b)  # quiet again


def test_a_busy_worker_queues_commits():
    conns, clock, workers = _connections(workers_idle=False)
    a = object()
    assert not conns.may_inline(a)
    workers.idle = True
    assert conns.may_inline(a)


def test_a_queued_commit_waiting_for_its_write_queues_commits():
    conns, clock, _ = _connections()
    a = object()
    conns.queued = 1  # its write is in the store's pool: an inline commit would wait for it
    assert not conns.may_inline(a)
    conns.queued = 0
    assert conns.may_inline(a)


def test_a_slow_inline_commit_pauses_inlining():
    conns, clock, _ = _connections()
    a = object()
    conns.ran_inline(connection.INLINE_STALL_S / 2)
    assert conns.may_inline(a)
    conns.ran_inline(connection.INLINE_STALL_S * 2)
    assert not conns.may_inline(a)
    clock.now += INLINE_PAUSE_S - 0.5
    assert not conns.may_inline(a)
    clock.now += 1.0
    assert conns.may_inline(a)


def test_workers_count_their_jobs():
    workers = Workers(2, name="test-workers")
    try:
        assert workers.idle
        release = threading.Event()
        workers.submit(release.wait)
        assert not workers.idle
        release.set()
        deadline = time.monotonic() + 10
        while not workers.idle and time.monotonic() < deadline:
            time.sleep(0.005)
        assert workers.idle
    finally:
        workers.shutdown()


# -- a real server in a thread: which thread ran each commit -------------------------------


@pytest.fixture
def served(tmp_path):
    """``(port, calls, delays)``: a server on a loop in thread ``server-loop``; ``calls``
    lists ``(how, thread name)`` of each commit the server made (``"sync"`` for
    ``commit_sync``, ``"async"`` for ``commit_async``, whose answer is sent from the thread
    that resolves its future: ``"async answered"``)."""
    store = OffsetStore.open(str(tmp_path / "store"))
    threads: list = []
    real, real_async = store.commit_sync, store.commit_async
    delays: list[float] = []

    def commit_sync(*args, **kwargs):
        threads.append(("sync", threading.current_thread().name))
        if delays:
            time.sleep(delays.pop())
        return real(*args, **kwargs)

    def commit_async(*args, **kwargs):
        threads.append(("async", threading.current_thread().name))
        fut = real_async(*args, **kwargs)
        fut.add_done_callback(lambda f: threads.append(
            ("async answered", threading.current_thread().name)))
        return fut

    store.commit_sync = commit_sync
    store.commit_async = commit_async
    registry = TopicRegistry(store)
    registry.create("orders", 4, exist_ok=True)
    config = ServerConfig.parse([])
    ready = threading.Event()
    bound: list[int] = []
    holder: dict = {}

    def run():
        async def main():
            holder["loop"] = asyncio.get_running_loop()
            holder["stop"] = asyncio.Event()
            await serve(store, config, registry, "127.0.0.1", 0, stop=holder["stop"],
                        ready=lambda host, port: (bound.append(port), ready.set()))
        asyncio.run(main())

    t = threading.Thread(target=run, name="server-loop", daemon=True)
    t.start()
    assert ready.wait(30)
    try:
        yield bound[0], threads, delays
    finally:
        holder["loop"].call_soon_threadsafe(holder["stop"].set)
        t.join(30)
        store.close()


def _commit(sock, offset: int, group: str = "inline") -> int:
    r = call(sock, 8, 8, group_id=group, generation_id_or_member_epoch=-1, member_id="",
             group_instance_id=None, topics=[dict(name="orders", partitions=[dict(
                 partition_index=0, committed_offset=offset, committed_leader_epoch=-1,
                 committed_metadata="")])])
    return int(r.topics[0].partitions[0].error_code)


def test_a_lone_client_commits_on_the_loop_then_a_stall_queues_them(served):
    import socket

    port, calls, delays = served
    with socket.create_connection(("127.0.0.1", port)) as sock:
        sock.settimeout(30)
        for i in range(5):
            assert _commit(sock, i) == 0
        assert calls == [("sync", "server-loop")] * 5
        delays.append(connection.INLINE_STALL_S * 2)  # the next commit holds the loop
        assert _commit(sock, 5) == 0
        assert calls[5] == ("sync", "server-loop")
        for i in range(6, 9):
            assert _commit(sock, i) == 0
        # queued, and answered on the loop's thread, which leads the store's async writer
        assert calls[6:] == [("async", "server-loop"), ("async answered", "server-loop")] * 3


def test_commits_from_two_connections_at_once_are_queued_and_answered_on_the_loop(served):
    import socket

    port, calls, _ = served
    with socket.create_connection(("127.0.0.1", port)) as a, \
            socket.create_connection(("127.0.0.1", port)) as b:
        a.settimeout(30)
        b.settimeout(30)
        for i in range(4):  # well inside INLINE_ALONE_S of each other
            assert _commit(a, i, "g-a") == 0
            assert _commit(b, i, "g-b") == 0
    assert calls[0] == ("sync", "server-loop")  # the very first was alone
    assert ("async", "server-loop") in calls[1:]
    assert {name for how, name in calls if how != "sync"} == {"server-loop"}
