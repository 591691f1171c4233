"""A lone commit runs on the event loop's thread (no worker wake-up); under load, or after a
commit held the loop too long, commits go to the worker threads (connection.py)."""

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


def test_another_connection_committing_recently_sends_commits_to_workers():
    conns, clock, _ = _connections()
    a, b = object(), object()
    assert conns.may_inline(a)
    clock.now += INLINE_ALONE_S / 5
    assert not conns.may_inline(b)  # a committed just now: the loop must keep reading
    clock.now += INLINE_ALONE_S / 5
    assert not conns.may_inline(a)  # and now b has
    clock.now += INLINE_ALONE_S * 2
    assert conns.may_inline(b)  # quiet again


def test_a_busy_worker_sends_commits_to_workers():
    conns, clock, workers = _connections(workers_idle=False)
    a = object()
    assert not conns.may_inline(a)
    workers.idle = True
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
    """``(port, store, threads)``: a server on a loop in thread ``server-loop``; ``threads``
    lists the name of the thread that ran each ``commit_sync``."""
    store = OffsetStore.open(str(tmp_path / "store"))
    threads: list[str] = []
    real = store.commit_sync
    delays: list[float] = []

    def commit_sync(*args, **kwargs):
        threads.append(threading.current_thread().name)
        if delays:
            time.sleep(delays.pop())
        return real(*args, **kwargs)

    store.commit_sync = commit_sync
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


def _commit(sock, offset: int) -> int:
    r = call(sock, 8, 8, group_id="inline", generation_id_or_member_epoch=-1, member_id="",
             group_instance_id=None, topics=[dict(name="orders", partitions=[dict(
                 partition_index=0, committed_offset=offset, committed_leader_epoch=-1,
                 committed_metadata="")])])
    return int(r.topics[0].partitions[0].error_code)


def test_a_lone_client_commits_on_the_loop_then_a_stall_moves_them_to_workers(served):
    import socket

    port, threads, delays = served
    with socket.create_connection(("127.0.0.1", port)) as sock:
        sock.settimeout(30)
        for i in range(5):
            assert _commit(sock, i) == 0
        assert threads == ["server-loop"] * 5
        delays.append(connection.INLINE_STALL_S * 2)  # the next commit holds the loop
        assert _commit(sock, 5) == 0
        assert threads[5] == "server-loop"
        for i in range(6, 9):
            assert _commit(sock, i) == 0
        assert all(name.startswith("offsetlog-serve-") for name in threads[6:]), threads
