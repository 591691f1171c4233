"""asyncio facade over :class:`~offsetlog.store.OffsetStore`: everything the sync store does,
awaited.

* Commits ride on ``commit_async``'s future (the store's own writer threads do the I/O), so
  awaiting one never blocks the event loop.
* Group requests (``join_group``, ``sync_group``, ``heartbeat``, ``leave_group``) return the
  store's futures; here they are awaited. Answers are the same response objects, a Kafka error
  in ``response.error``.
* Anything that may wait on the disk (transactions, deletes, expiry, compaction, snapshots,
  flush, open, close) runs in a worker thread. In-memory reads are answered inline.

Example, consuming with exactly-once bookkeeping::

    import asyncio
    from offsetlog import TopicPartition
    from offsetlog.aio import AsyncOffsetStore

    async def main():
        async with await AsyncOffsetStore.open("/var/lib/myservice/offsets") as store:
            await store.commit("billing", {TopicPartition("orders", 0): 42})
            print(await store.fetch("billing"))

            txn = await store.init_transactions("billing-service-1")
            async with txn:                  # begin(); commit() on success, abort() on error
                await txn.commit_offsets("billing", {TopicPartition("orders", 0): 43})

            join = await store.join_group("billing", protocols=[("range", b"")],
                                          client_id="worker-1", session_timeout_ms=10_000)

    asyncio.run(main())
"""

from __future__ import annotations

import asyncio
import threading
from collections.abc import Iterable, Mapping
from concurrent.futures import Future
from typing import Any, TypeVar

from offsetlog.errors import OffsetlogError
from offsetlog.group import GroupDescription, MemberIdentity
from offsetlog.group.responses import (
    HeartbeatResponse,
    JoinGroupResponse,
    LeaveGroupResponse,
    SyncGroupResponse,
)
from offsetlog.recovery.report import RecoveryReport
from offsetlog.store import OffsetStore
from offsetlog.store.async_writer import drive_from_loop
from offsetlog.store.snapshots import SnapshotResult
from offsetlog.store.transactions import Transaction
from offsetlog.txn.state import TxnMetadata
from offsetlog.types import OffsetAndMetadata, TopicPartition

T = TypeVar("T")

Offsets = Mapping[TopicPartition, "OffsetAndMetadata | int"]


async def _wait(fut: "Future[T]") -> T:
    return await asyncio.wrap_future(fut)


class AsyncOffsetStore:
    """The asyncio face of an :class:`OffsetStore` (``self.store``). Open it with
    :meth:`open`; ``async with`` closes it."""

    def __init__(self, store: OffsetStore) -> None:
        self.store = store
        self._undrive = None

    @classmethod
    async def open(cls, path: str, **options: Any) -> "AsyncOffsetStore":
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

    async def __aexit__(self, *exc: object) -> None:
        await self.close()

    def __repr__(self) -> str:
        return f"<AsyncOffsetStore {self.store!r}>"

    # -- commits and reads -----------------------------------------------------------------

    async def commit(self, group_id: str, offsets: Offsets, *, generation_id: int = -1,
                     member_id: str = "", group_instance_id: str | None = None,
                     retention_time_ms: int | None = None) -> None:
        """Commit and wait until durable per the fsync policy (``commit_sync`` semantics)."""
        # (the keyword only when given: a call with it takes the store's Python path)
        extra = {} if retention_time_ms is None else {"retention_time_ms": retention_time_ms}
        fut = self.store.commit_async(group_id, offsets, generation_id=generation_id,
                                      member_id=member_id, group_instance_id=group_instance_id,
                                      **extra)
        await asyncio.wrap_future(fut)

    #: the sync store's names for the same call
    commit_sync = commit
    commit_async = commit

    async def fetch(self, group_id: str, partitions: Iterable[TopicPartition] | None = None, *,
                    require_stable: bool = False) -> dict[TopicPartition, OffsetAndMetadata]:
        return self.store.fetch(group_id, partitions, require_stable=require_stable)

    async def committed(self, group_id: str, tp: TopicPartition, *,
                        require_stable: bool = False) -> OffsetAndMetadata | None:
        return self.store.committed(group_id, tp, require_stable=require_stable)

    async def groups(self) -> list[str]:
        return self.store.groups()

    async def topics(self) -> dict[str, dict]:
        return self.store.topics()

    async def create_topic(self, name: str, partitions: int, *, topic_id: bytes) -> dict:
        """``OffsetStore.create_topic``: a TOPIC record, durable when this returns."""
        return await asyncio.to_thread(self.store.create_topic, name, partitions,
                                       topic_id=topic_id)

    # -- deletes, expiry, maintenance ------------------------------------------------------

    async def delete_offsets(self, group_id: str, partitions: Iterable[TopicPartition]) -> None:
        await asyncio.to_thread(self.store.delete_offsets, group_id, list(partitions))

    async def delete_group(self, group_id: str) -> None:
        """:raises GroupIdNotFoundError: no such group"""
        await asyncio.to_thread(self.store.delete_group, group_id)

    async def expire_offsets(self, now_ms: int | None = None) -> int:
        return await asyncio.to_thread(self.store.expire_offsets, now_ms)

    async def compact(self, partitions: Iterable[int] | None = None, *,
                      now_ms: int | None = None) -> list:
        parts = None if partitions is None else list(partitions)
        return await asyncio.to_thread(self.store.compact, parts, now_ms=now_ms)

    async def snapshot(self, partitions: Iterable[int] | None = None) -> list[SnapshotResult]:
        parts = None if partitions is None else list(partitions)
        return await asyncio.to_thread(self.store.snapshot, parts)

    async def flush(self) -> None:
        await asyncio.to_thread(self.store.flush)

    async def close(self) -> None:
        await asyncio.to_thread(self.store.close)
        if self._undrive is not None:
            self._undrive()
            self._undrive = None

    def drive_async_writer(self) -> None:
        """Lead the store's async writer from the running event loop, as ``offsetlog serve``
        does (``OffsetStore.drive_async_writer``): commits from many tasks are framed,
        applied and resolved on the loop's thread, and only their writes leave it. Call it
        once, from within the loop; ``close()`` undoes it."""
        if self._undrive is None:
            self._undrive = drive_from_loop(self.store, asyncio.get_running_loop())

    def stats(self) -> list[dict]:
        return self.store.stats()

    def partition_of(self, group_id: str) -> int:
        return self.store.partition_of(group_id)

    @property
    def closed(self) -> bool:
        return self.store.closed

    @property
    def partitions(self) -> int:
        return self.store.partitions

    @property
    def path(self) -> str:
        return self.store.path

    @property
    def recovery_report(self) -> RecoveryReport:
        return self.store.recovery_report

    # -- consumer groups -------------------------------------------------------------------

    async def join_group(self, group_id: str, *, protocols: Iterable[tuple[str, bytes]],
                         member_id: str = "", group_instance_id: str | None = None,
                         client_id: str = "", client_host: str = "",
                         session_timeout_ms: int = 45_000,
                         rebalance_timeout_ms: int | None = 300_000,
                         protocol_type: str = "consumer", require_known_member_id: bool = False
                         ) -> JoinGroupResponse:
        """JoinGroup; resolves when the join phase ends (see ``OffsetStore.join_group``)."""
        return await _wait(self.store.join_group(
            group_id, protocols=protocols, member_id=member_id,
            group_instance_id=group_instance_id, client_id=client_id, client_host=client_host,
            session_timeout_ms=session_timeout_ms, rebalance_timeout_ms=rebalance_timeout_ms,
            protocol_type=protocol_type, require_known_member_id=require_known_member_id))

    async def sync_group(self, group_id: str, *, member_id: str, generation_id: int,
                         group_instance_id: str | None = None, protocol_type: str | None = None,
                         protocol_name: str | None = None,
                         assignments: dict[str, bytes] | None = None) -> SyncGroupResponse:
        """SyncGroup; resolves once the leader's assignment is durable."""
        return await _wait(self.store.sync_group(
            group_id, member_id=member_id, generation_id=generation_id,
            group_instance_id=group_instance_id, protocol_type=protocol_type,
            protocol_name=protocol_name, assignments=assignments))

    async def heartbeat(self, group_id: str, *, member_id: str, generation_id: int,
                        group_instance_id: str | None = None) -> HeartbeatResponse:
        return await _wait(self.store.heartbeat(group_id, member_id=member_id,
                                                generation_id=generation_id,
                                                group_instance_id=group_instance_id))

    async def leave_group(self, group_id: str, *, member_id: str = "",
                          members: Iterable[MemberIdentity] | None = None
                          ) -> LeaveGroupResponse:
        return await _wait(self.store.leave_group(group_id, member_id=member_id,
                                                  members=members))

    async def describe_group(self, group_id: str) -> GroupDescription | None:
        return self.store.describe_group(group_id)

    async def list_groups(self) -> list[tuple[str, str, str]]:
        return self.store.list_groups()

    async def poll_groups(self, now_ms: int | None = None) -> None:
        await asyncio.to_thread(self.store.poll_groups, now_ms)

    # -- transactions ----------------------------------------------------------------------

    async def init_transactions(self, transactional_id: str, *, keep_prepared: bool = False,
                                transaction_timeout_ms: int | None = None,
                                expected_producer: tuple[int, int] | None = None
                                ) -> "AsyncTransaction":
        """``OffsetStore.init_transactions``, awaited: an :class:`AsyncTransaction`."""
        txn = await asyncio.to_thread(self.store.init_transactions, transactional_id,
                                      keep_prepared=keep_prepared,
                                      transaction_timeout_ms=transaction_timeout_ms,
                                      expected_producer=expected_producer)
        return AsyncTransaction(txn)

    async def poll_transactions(self, now_ms: int | None = None) -> int:
        return await asyncio.to_thread(self.store.poll_transactions, now_ms)

    async def allocate_producer_id(self) -> int:
        return self.store.allocate_producer_id()

    async def resume_transaction(self, transactional_id: str) -> "AsyncTransaction | None":
        txn = self.store.resume_transaction(transactional_id)
        return None if txn is None else AsyncTransaction(txn)

    async def transaction_state(self, transactional_id: str) -> TxnMetadata | None:
        return self.store.transaction_state(transactional_id)

    async def transaction_states(self) -> list[TxnMetadata]:
        return self.store.transaction_states()


class AsyncTransaction:
    """A :class:`~offsetlog.store.transactions.Transaction` (``self.transaction``), awaited.
    ``async with txn:`` begins, and commits on success or aborts on an exception."""

    def __init__(self, transaction: Transaction) -> None:
        self.transaction = transaction

    def __repr__(self) -> str:
        return f"<Async{repr(self.transaction)[1:]}"

    @property
    def transactional_id(self) -> str:
        return self.transaction.transactional_id

    @property
    def producer_id(self) -> int:
        return self.transaction.producer_id

    @property
    def producer_epoch(self) -> int:
        return self.transaction.producer_epoch

    @property
    def state(self) -> str:
        return self.transaction.state

    @property
    def prepared(self) -> bool:
        return self.transaction.prepared

    async def begin(self) -> "AsyncTransaction":
        await asyncio.to_thread(self.transaction.begin)
        return self

    async def commit_offsets(self, group_id: str, offsets: Offsets, *, generation_id: int = -1,
                             member_id: str = "", group_instance_id: str | None = None) -> None:
        await asyncio.to_thread(self.transaction.commit_offsets, group_id, offsets,
                                generation_id=generation_id, member_id=member_id,
                                group_instance_id=group_instance_id)

    async def add_group(self, group_id: str) -> None:
        await asyncio.to_thread(self.transaction.add_group, group_id)

    async def prepare(self) -> None:
        await asyncio.to_thread(self.transaction.prepare)

    async def commit(self) -> None:
        await asyncio.to_thread(self.transaction.commit)

    async def abort(self) -> None:
        await asyncio.to_thread(self.transaction.abort)

    async def pending_offsets(self) -> dict[str, dict[TopicPartition, OffsetAndMetadata]]:
        return await asyncio.to_thread(self.transaction.pending_offsets)

    async def ensure_current(self) -> None:
        await asyncio.to_thread(self.transaction.ensure_current)

    async def __aenter__(self) -> "AsyncTransaction":
        if self.transaction.state == "ready":  # a prepared handle is already in one
            await self.begin()
        return self

    async def __aexit__(self, exc_type: object, exc: object, tb: object) -> None:
        if exc_type is None:
            await self.commit()
            return
        try:
            await self.abort()
        except OffsetlogError:
            pass  # fenced or closed: the exception already propagating says more


def _close_abandoned(opening: "asyncio.Future[OffsetStore]") -> None:
    if opening.cancelled() or opening.exception() is not None:
        return
    # off the event loop: close() drains and fsyncs
    threading.Thread(target=opening.result().close, name="offsetlog-aio-close",
                     daemon=True).start()
