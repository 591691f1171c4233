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
