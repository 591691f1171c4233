"""A small program using offsetlog's public API, as a user writes one; tests/typing checks it
with ``mypy --strict``. It is type-checked, never run."""

from __future__ import annotations

import asyncio
from collections.abc import Mapping
from concurrent.futures import Future

from offsetlog import (GroupIdNotFoundError, OffsetAndMetadata, OffsetlogError, OffsetStore,
                       StoreNotFoundError, TopicPartition, UnstableOffsetCommitError)
from offsetlog.aio import AsyncOffsetStore
from offsetlog.assignors import PartitionAssignor, Subscription, register_assignor
from offsetlog.partitioner import partition_for


class FirstTakesAll(PartitionAssignor):
    name = "first-takes-all"

    def assign(self, partitions_per_topic: Mapping[str, int],
               subscriptions: Mapping[str, Subscription]) -> dict[str, list[TopicPartition]]:
        first = min(subscriptions)
        return {first: [TopicPartition(t, p) for t in subscriptions[first].topics
                        for p in range(partitions_per_topic.get(t, 0))]}


def sync_use(path: str) -> int:
    register_assignor(FirstTakesAll)
    FirstTakesAll().assign({"orders": 2}, {"m1": Subscription(["orders"])})
    with OffsetStore.open(path, partitions=3, fsync="always") as store:
        tp = TopicPartition("orders", 0)
        store.commit_sync("billing", {tp: 1, TopicPartition("orders", 1): OffsetAndMetadata(2)})
        fut: Future[None] = store.commit_async("billing", {tp: 3})
        fut.result()
        got: OffsetAndMetadata | None = store.committed("billing", tp)
        offsets: dict[TopicPartition, OffsetAndMetadata] = store.fetch("billing")
        groups: list[str] = store.groups()
        txn = store.init_transactions("tx")
        with txn:
            txn.commit_offsets("billing", {tp: 4})
        try:
            store.delete_group("nobody")
        except GroupIdNotFoundError:
            pass
        try:
            store.fetch("billing", require_stable=True)
        except UnstableOffsetCommitError as e:
            print(e.partitions)
        expired: int = store.expire_offsets()
        return (got.offset if got else 0) + len(offsets) + len(groups) + expired + partition_for(
            "billing", store.partitions)


async def async_use(path: str) -> None:
    try:
        store = await AsyncOffsetStore.open(path, create=False)
    except StoreNotFoundError as e:
        print(e.path)
        return
    except OffsetlogError:
        raise
    async with store:
        await store.commit("billing", {TopicPartition("orders", 0): 5})
        value: OffsetAndMetadata | None = await store.committed("billing",
                                                                TopicPartition("orders", 0))
        txn = await store.init_transactions("tx")
        async with txn:
            await txn.commit_offsets("billing", {TopicPartition("orders", 0): 6})
        print(value)


if __name__ == "__main__":
    asyncio.run(async_use("/tmp/offsets"))
