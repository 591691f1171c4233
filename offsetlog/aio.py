"""asyncio facade over :class:`~offsetlog.store.OffsetStore`.

Commits are awaited without blocking the event loop: ``commit`` rides on ``commit_async``'s
future (the store's own writer threads do the I/O). Reads are in-memory and answered inline.
Opening and closing touch the disk (recovery, the final fsync) and run in a worker thread::

    async with await AsyncOffsetStore.open(path) as store:
        await store.commit("my-group", {TopicPartition("orders", 0): 42})
        offsets = await store.fetch("my-group")
"""

from __future__ import annotations

import asyncio
import threading
from collections.abc import Iterable, Mapping

from offsetlog.store import OffsetStore
from offsetlog.types import OffsetAndMetadata, TopicPartition


class AsyncOffsetStore:
    def __init__(self, store: OffsetStore) -> None:
        self.store = store

    @classmethod
    async def open(cls, path, **options) -> "AsyncOffsetStore":
        """Open like ``OffsetStore.open`` (same keyword options), off the event loop.

        Cancelled (``asyncio.wait_for`` timing out on a long recovery, say), the open still
        finishes in its thread; the store it opens is then closed, so the directory is not
        left locked by a store nobody holds.
        """
        opening = asyncio.ensure_future(asyncio.to_thread(OffsetStore.open, path, **options))
        try:
            store = await asyncio.shield(opening)
        except asyncio.CancelledError:
            opening.add_done_callback(_close_abandoned)
            raise
        return cls(store)

    async def __aenter__(self) -> "AsyncOffsetStore":
        return self

    async def __aexit__(self, *exc) -> None:
        await self.close()

    async def commit(self, group_id: str, offsets: Mapping[TopicPartition, OffsetAndMetadata | int],
                     *, generation_id: int = -1, member_id: str = "",
                     group_instance_id: str | None = None) -> None:
        """Commit and wait until durable per the fsync policy (``commit_sync`` semantics)."""
        fut = self.store.commit_async(group_id, offsets, generation_id=generation_id,
                                      member_id=member_id, group_instance_id=group_instance_id)
        await asyncio.wrap_future(fut)

    async def fetch(self, group_id: str, partitions: Iterable[TopicPartition] | None = None, *,
                    require_stable: bool = False) -> dict[TopicPartition, OffsetAndMetadata]:
        return self.store.fetch(group_id, partitions, require_stable=require_stable)

    async def committed(self, group_id: str, tp: TopicPartition, *,
                        require_stable: bool = False) -> OffsetAndMetadata | None:
        return self.store.committed(group_id, tp, require_stable=require_stable)

    async def groups(self) -> list[str]:
        return self.store.groups()

    async def delete_offsets(self, group_id: str, partitions: Iterable[TopicPartition]) -> None:
        await asyncio.to_thread(self.store.delete_offsets, group_id, list(partitions))

    async def delete_group(self, group_id: str) -> None:
        await asyncio.to_thread(self.store.delete_group, group_id)

    async def expire_offsets(self, now_ms: int | None = None) -> int:
        return await asyncio.to_thread(self.store.expire_offsets, now_ms)

    async def flush(self) -> None:
        await asyncio.to_thread(self.store.flush)

    async def close(self) -> None:
        await asyncio.to_thread(self.store.close)

    @property
    def closed(self) -> bool:
        return self.store.closed


def _close_abandoned(opening: "asyncio.Future") -> None:
    if opening.cancelled() or opening.exception() is not None:
        return
    # off the event loop: close() drains and fsyncs
    threading.Thread(target=opening.result().close, name="offsetlog-aio-close",
                     daemon=True).start()
