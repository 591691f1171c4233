import asyncio

import pytest

from offsetlog import OffsetAndMetadata, TopicPartition
from offsetlog.aio import AsyncOffsetStore
from offsetlog.errors import InvalidCommitError, StoreClosedError

TP = TopicPartition("t", 0)


def test_commit_fetch_close_roundtrip(store_dir):
    async def main():
        async with await AsyncOffsetStore.open(store_dir, partitions=3) as s:
            await asyncio.gather(*(s.commit(f"g{i}", {TP: i}) for i in range(20)))
            await s.commit("g", {TP: OffsetAndMetadata(5, "m")})
            assert await s.fetch("g") == {TP: OffsetAndMetadata(5, "m")}
            assert await s.committed("g3", TP) == OffsetAndMetadata(3)
            assert len(await s.groups()) == 21
            await s.delete_group("g")
            assert await s.fetch("g") == {}
            with pytest.raises(InvalidCommitError):
                await s.commit("g", {TP: -1})
        assert s.closed
        with pytest.raises(StoreClosedError):
            await s.commit("g", {TP: 1})
        async with await AsyncOffsetStore.open(store_dir) as s:
            assert await s.committed("g7", TP) == OffsetAndMetadata(7)

    asyncio.run(main())


def test_commit_does_not_block_the_loop(store_dir):
    async def main():
        ticks = 0

        async def ticker():
            nonlocal ticks
            while True:
                ticks += 1
                await asyncio.sleep(0)

        async with await AsyncOffsetStore.open(store_dir, partitions=1) as s:
            t = asyncio.create_task(ticker())
            for i in range(50):
                await s.commit("g", {TP: i})
            t.cancel()
        assert ticks >= 50  # the loop kept running while commits waited on fsync

    asyncio.run(main())


def test_cancelling_the_awaiting_task_leaves_the_commit_and_the_store_working(store_dir):
    """``asyncio.wait_for`` timing out cancels the awaiting task; the commit it was waiting
    for is still written (it is queued), and the store keeps serving commits."""
    async def main():
        async with await AsyncOffsetStore.open(store_dir, partitions=1) as s:
            tasks = [asyncio.ensure_future(s.commit("g", {TopicPartition("t", i % 3): i}))
                     for i in range(300)]
            await asyncio.sleep(0)
            for t in tasks:
                t.cancel()
            await asyncio.gather(*tasks, return_exceptions=True)
            await asyncio.wait_for(s.commit("g", {TP: 1000}), timeout=30)
            await asyncio.wait_for(s.flush(), timeout=30)
            assert await s.committed("g", TopicPartition("t", 2)) == OffsetAndMetadata(299)

    asyncio.run(main())


def test_an_open_cancelled_by_a_timeout_does_not_leave_the_directory_locked(store_dir,
                                                                            monkeypatch):
    """``wait_for(AsyncOffsetStore.open(...), t)`` timing out on a long recovery: the open
    finishes in its worker thread anyway. Its store used to stay open, held by nobody, with
    the directory locked for the rest of the process (StoreLockedError on every reopen)."""
    import threading
    import time

    import offsetlog.store.opening as store_mod
    from offsetlog.errors import StoreLockedError

    recovering = threading.Event()
    finish = threading.Event()
    real_recover = store_mod.recover

    def slow_recover(*args, **kwargs):
        recovering.set()
        finish.wait(10)
        return real_recover(*args, **kwargs)

    monkeypatch.setattr(store_mod, "recover", slow_recover)

    async def main():
        task = asyncio.ensure_future(AsyncOffsetStore.open(store_dir, partitions=1))
        await asyncio.to_thread(recovering.wait, 10)
        task.cancel()
        with pytest.raises(asyncio.CancelledError):
            await task
        finish.set()
        monkeypatch.setattr(store_mod, "recover", real_recover)
        deadline = time.monotonic() + 10
        while True:
            try:
                s = await AsyncOffsetStore.open(store_dir)
                break
            except StoreLockedError:
                assert time.monotonic() < deadline, "the abandoned store was never closed"
                await asyncio.sleep(0.02)
        async with s:
            await s.commit("g", {TP: 1})

    asyncio.run(main())


def test_the_facade_covers_the_sync_store():
    """Every public method and property of OffsetStore has its AsyncOffsetStore counterpart
    (commit_sync and commit_async are both ``commit``, awaited)."""
    import inspect

    from offsetlog import OffsetStore
    from offsetlog.aio import AsyncTransaction
    from offsetlog.store.transactions import Transaction

    for cls, facade in ((OffsetStore, AsyncOffsetStore), (Transaction, AsyncTransaction)):
        public = {n for n in dir(cls) if not n.startswith("_")} - {"open"}
        missing = sorted(n for n in public if not hasattr(facade, n))
        assert not missing, f"{facade.__name__} lacks {missing}"
        for name in public:
            sync = getattr(cls, name)
            if inspect.isfunction(sync) and inspect.iscoroutinefunction(getattr(facade, name)):
                params = set(inspect.signature(sync).parameters) - {"self"}
                assert params <= set(inspect.signature(getattr(facade, name)).parameters) | {
                    "callback", "timeout"}, name
    import offsetlog.aio
    assert "Example" in offsetlog.aio.__doc__ and "init_transactions" in offsetlog.aio.__doc__


def test_groups_and_transactions_awaited(store_dir, clock):
    from offsetlog import GroupIdNotFoundError, UnstableOffsetCommitError
    from offsetlog.group.consumer_protocol import encode_assignment, encode_subscription

    async def main():
        async with await AsyncOffsetStore.open(store_dir, partitions=2, clock=clock,
                                               retention_check_interval_ms=0) as s:
            joining = asyncio.ensure_future(s.join_group(
                "g", protocols=[("range", encode_subscription(["t"]))], client_id="c",
                session_timeout_ms=10_000, rebalance_timeout_ms=10_000))
            while not joining.done():
                clock.advance(1_000)
                await s.poll_groups()
                await asyncio.sleep(0.01)
            join = joining.result()
            assert join.error is None and join.is_leader
            sync = await s.sync_group("g", member_id=join.member_id,
                                      generation_id=join.generation_id,
                                      assignments={join.member_id: encode_assignment([TP])})
            assert sync.error is None
            assert (await s.heartbeat("g", member_id=join.member_id,
                                      generation_id=join.generation_id)).error is None
            assert (await s.describe_group("g")).state == "Stable"
            await s.commit("g", {TP: 3}, generation_id=join.generation_id,
                           member_id=join.member_id)

            txn = await s.init_transactions("tx")
            async with txn:
                await txn.commit_offsets("solo", {TP: 7})
            assert await s.committed("solo", TP) == OffsetAndMetadata(7)
            await txn.begin()
            await txn.commit_offsets("solo", {TP: 8})
            assert (await txn.pending_offsets())["solo"][TP].offset == 8
            with pytest.raises(UnstableOffsetCommitError):
                await s.fetch("solo", require_stable=True)
            await txn.prepare()
            assert txn.prepared and (await s.transaction_state("tx")).state == "Prepared"
            await txn.abort()
            assert await s.committed("solo", TP) == OffsetAndMetadata(7)
            own = await s.init_transactions("tx", expected_producer=(txn.producer_id,
                                                                     txn.producer_epoch))
            assert own.producer_epoch == txn.producer_epoch + 1

            assert (await s.leave_group("g", member_id=join.member_id)).error is None
            await s.delete_group("g")
            with pytest.raises(GroupIdNotFoundError):
                await s.delete_group("g")
            assert isinstance(await s.snapshot(), list) and isinstance(await s.compact(), list)
            assert s.stats() and s.partition_of("g") in range(s.partitions)

    asyncio.run(main())


def test_commit_with_a_retention_time_of_its_own(store_dir, clock):
    async def main():
        async with await AsyncOffsetStore.open(store_dir, clock=clock, retention_ms=86_400_000,
                                               retention_check_interval_ms=0) as s:
            await s.commit("g", {TP: 1}, retention_time_ms=60_000)
            await s.commit("h", {TP: 2})
            clock.advance(60_000)
            assert await s.expire_offsets() == 1
            assert await s.fetch("g") == {} and await s.fetch("h") == {TP: OffsetAndMetadata(2)}
    asyncio.run(main())
