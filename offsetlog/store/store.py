"""``OffsetStore``: the public face of the engine, and what composes it.

A store is a set of log partitions (``commit_queue.PartitionWriter``: a ``PartitionLog``, its
``OffsetTable`` and its group coordinator) written only through one ``GroupCommitter``, plus
one part per concern, each owning its state and reached only through its methods:
``groups.Groups`` (the group protocols and their timers; ``consumer_groups`` for KIP-848),
``transactions.Transactions``, ``snapshots.Snapshots``, ``cleaning.Cleaning`` and
``registries.Registries`` (the wire server's topics and credentials). This module
holds the commit path itself (checks, routing, fencing), reads, deletes and expiry, and the
lifecycle; opening a directory is ``opening``'s, and the group and transaction calls, handed
straight to their parts, are ``store_calls``'.
"""

from __future__ import annotations

import logging
import os
import threading
from collections.abc import Iterable, Mapping
from concurrent.futures import Future
from typing import Any, Callable

from offsetlog.compaction.cleaner import CleanResult
from offsetlog.errors import StoreClosedError, StoreFailedError
from offsetlog.group import GroupConfig, GroupCoordinator
from offsetlog.log import dirlock, write_ahead
from offsetlog.log import records as rec
from offsetlog.log._native import CommitEntries, submit_async
from offsetlog.partitioner import DEFAULT_PARTITIONS, partition_for
from offsetlog.recovery.report import RecoveryReport
from offsetlog.store import acls, background, deferred
from offsetlog.store.checkpoints import RecoveryPoints
from offsetlog.store.cleaning import Cleaning
from offsetlog.store.commit_queue import Commit, PartitionWriter, QueueItem
from offsetlog.store.config import StoreConfig, open_signature, system_clock_ms
from offsetlog.store.futures import failed_future, resolved_future
from offsetlog.store.group_commit import YIELD_AT, GroupCommitter
from offsetlog.store.groups import Groups
from offsetlog.store.lone_commit import commit_lone
from offsetlog.store.opening import open_directory
from offsetlog.store.part import StoreCore
from offsetlog.store.registries import Registries
from offsetlog.store.routing import CommitRouter
from offsetlog.store.snapshots import LoadedSnapshots, SnapshotResult, Snapshots
from offsetlog.store.store_calls import GroupAndTransactionCalls
from offsetlog.store.transactions import Transactions
from offsetlog.types import OffsetAndMetadata, TopicPartition, committed_view
from offsetlog.validation import (
    MIN_OFFSET,
    check_group_id,
    check_partition_list,
    check_retention_time,
    check_time_ms,
    check_timeout,
)

log = logging.getLogger("offsetlog.store")

#: callback(offsets, exception_or_None) for commit_async
CommitCallback = Callable[[Mapping, BaseException | None], None]


class OffsetStore(GroupAndTransactionCalls):
    """An embedded, crash-safe store of consumer offsets.

    Open it with :meth:`open` (also a context manager)::

        with OffsetStore.open("/var/lib/myservice/offsets") as store:
            store.commit_sync("my-group", {TopicPartition("orders", 0): 42})
            assert store.committed("my-group", TopicPartition("orders", 0)).offset == 42

    A store directory is open in one place at a time. All methods are thread-safe.
    """

    def __init__(self, path: str, config: StoreConfig, *, _lock_fd: int,
                 _parts: list[PartitionWriter], _report: RecoveryReport,
                 _group_config: GroupConfig | None = None,
                 _snapshots: LoadedSnapshots | None = None, _write_ahead=None) -> None:
        self.path = path
        self.config = config
        self._clock = config.clock
        self._lock_fd = _lock_fd
        #: the WRITE-AHEAD file (``_native.WriteAhead``; None unless fsync="always")
        self._write_ahead = _write_ahead
        self._parts = _parts
        self._partitions = config.partitions
        #: what recovery found when this store was opened
        self.recovery_report = _report
        self._close_lock = threading.Lock()
        self._close_done = threading.Event()  # set once close() has finished
        self._closing_thread: threading.Thread | None = None
        self._writer = GroupCommitter(_parts, fsync=config.fsync,
                                      fsync_interval_ms=config.fsync_interval_ms,
                                      max_group_commit_bytes=config.max_group_commit_bytes)
        self._router = CommitRouter(_parts, self._clock, config.metadata_max_bytes,
                                    self._writer, MIN_OFFSET if config.negative_offsets else 0,
                                    yield_at=YIELD_AT)
        # A simple consumer's commit goes from the caller's line to native code with no Python
        # frame between: the two commit calls are the store's own attributes, natively bound,
        # which hand any other call to the methods below (native/src/store_entry.rs; the frame
        # was a fifth of a commit_async call). Not for a subclass that overrides either.
        cls = type(self)
        if (cls.commit_sync is OffsetStore.commit_sync
                and cls.commit_async is OffsetStore.commit_async):
            entries = CommitEntries(self._router, OffsetStore.commit_sync.__get__(self),
                                    OffsetStore.commit_async.__get__(self))
            self.commit_sync, self.commit_async = entries.commit_sync, entries.commit_async
        # Each partition's coordinator starts from the group metadata its log holds; members
        # get a fresh session from now (Kafka does the same when it loads a partition).
        now = self._clock()
        for part in _parts:
            part.coordinator = GroupCoordinator(_group_config or GroupConfig())
            for group_id, value in sorted(part.table.group_metadata.items()):
                part.coordinator.load(group_id, value, now_ms=now)
            # (the wire's steady members' heartbeats and commits pass there: store/groups.py)
            part.coordinator.steady = part.steady
        core = StoreCore(path, config, _parts, self._writer, self._check_open)
        self._groups = Groups(core)
        self.consumer_groups = self._groups.consumer  # KIP-848 (store/consumer_groups.py)
        #: the wire server's topics and SASL/SCRAM credentials (store/registries.py)
        self.registries = Registries(core)
        self.acls = acls.Acls(core)  # Kafka's ACL bindings, as ACL records (store/acls.py)
        self._background_stop = threading.Event()  # stops the store's periodic passes
        # before the cleaner starts (it asks for the snapshots' tombstone floor) and before
        # anything is written (the roll-forward below)
        self._snapshots = Snapshots(core, _snapshots or LoadedSnapshots(None, {}),
                                    self._background_stop)
        self._transactions = Transactions(core, self._prepare_commit, self._router.txn_board)
        self._transactions.start()  # rolls forward transactions decided before a crash
        self._retention_thread: threading.Thread | None = None
        if config.retention_check_interval_ms:
            self._retention_thread = background.start("offsetlog-retention", lambda: background.every(
                self._background_stop, config.retention_check_interval_ms / 1000.0,
                self.expire_offsets, f"{path}: retention pass", log))
        self._cleaning = Cleaning(core, self._snapshots.tombstone_floor, self._background_stop)
        self._recovery_points = RecoveryPoints(path, _parts, config.fsync_interval_ms,
                                               self._background_stop)

    # -- opening -------------------------------------------------------------------------

    @classmethod
    def open(cls, path: str | os.PathLike, *, partitions: int | None = None,
             clock: Callable[[], int] | None = None, group_config: GroupConfig | None = None,
             create: bool = True, progress: Callable[[int], None] | None = None,
             **settings: Any) -> "OffsetStore":
        """Open (creating if needed) the store in directory ``path`` and recover it.

        :param partitions: log partitions; fixed at creation. ``None`` means the stored count,
            or 50 for a new store. A count that differs from the stored one is an error.
        :param clock: callable returning epoch ms; defaults to the system clock
        :param group_config: the group coordinator's settings (session timeout bounds,
            initial rebalance delay, group size limit)
        :param create: False: open an existing store only (tools pass it), never create one
        :param progress: called with the byte size of each segment as recovery reads it
        :param settings: any other field of ``StoreConfig``, which documents each with its
            unit and default: ``fsync`` (``"always"``, ``"interval"``, ``"never"``),
            ``retention_ms``, ``segment_bytes``, ``snapshots``, ... An unknown name is a
            ``TypeError``.
        :return: the open store; ``store.recovery_report`` says what recovery found
        :raises StoreLockedError: the directory is open elsewhere
        :raises StoreConfigError: bad options, or options that contradict the directory
            (``path`` is a file, say)
        :raises StoreNotFoundError: ``create=False`` and no store is at ``path``
        :raises CorruptLogError: corruption before the tail of a log
        """
        path = os.path.abspath(os.fspath(path))
        config = StoreConfig(partitions=DEFAULT_PARTITIONS if partitions is None else partitions,
                             clock=clock if clock is not None else system_clock_ms, **settings)
        lock_fd, config, parts, report, loaded, ahead = open_directory(
            path, config, partitions, create=create, progress=progress)
        try:
            store = cls(path, config, _lock_fd=lock_fd, _parts=parts, _report=report,
                        _group_config=group_config, _snapshots=loaded, _write_ahead=ahead)
        except BaseException:
            if loaded.store is not None:
                loaded.store.close()
            if ahead is not None:
                write_ahead.close(ahead, path, config.partitions, empty=False)
            dirlock.release(path, lock_fd)
            raise
        if not report.clean:
            log.warning("%s: %s", path, report)
        return store

    def __enter__(self) -> "OffsetStore":
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def __repr__(self) -> str:
        state = "closed" if self._closed else "open"
        return f"<OffsetStore {self.path!r} partitions={self._partitions} {state}>"

    # -- commits -------------------------------------------------------------------------

    def _check_commit(self, group_id, offsets, generation_id, member_id, group_instance_id,
                      transactional: bool = False):
        """``CommitRouter.check``, on an open store."""
        if self._closed:
            raise StoreClosedError(f"{self.path}: the store is closed")
        return self._router.check(group_id, offsets, generation_id, member_id,
                                  group_instance_id, transactional)

    def _prepare_commit(self, group_id, offsets, generation_id, member_id, group_instance_id,
                        transactional: bool = False
                        ) -> tuple[PartitionWriter, QueueItem | None, Callable[[], None]]:
        """``_check_commit``, as ``(part, its queue item or None for no offsets, precheck)``:
        for ``commit_sync`` and transactions."""
        part, fields, nbytes, now, precheck = self._check_commit(
            group_id, offsets, generation_id, member_id, group_instance_id, transactional)
        return part, (Commit(fields, nbytes, now) if fields else None), precheck

    def commit_sync(self, group_id: str, offsets: Mapping[TopicPartition, OffsetAndMetadata | int],
                    *, generation_id: int = -1, member_id: str = "",
                    group_instance_id: str | None = None, timeout: float | None = None,
                    retention_time_ms: int | None = None) -> None:
        """Commit ``offsets`` for ``group_id`` and return once durable per the fsync policy.

        All offsets of one call are applied atomically: after any crash, all or none. One
        invalid offset rejects the whole call before anything is written. For a group managed
        by the coordinator, ``generation_id``, ``member_id`` and ``group_instance_id`` must
        name a current member (Kafka's checks, in Kafka's order).

        ``retention_time_ms`` (OffsetCommit v2-4's field, the API before Kafka's KIP-211):
        these offsets expire that long after this commit, by the clock, whatever their
        group's state, where the retention pass looks at the group at all (docs/DESIGN.md,
        "Groups, transactions, retention"); None: by the store's ``retention_ms`` rules.

        :raises InvalidCommitError: (and subclasses) bad arguments; nothing was written
        :raises InvalidArgumentError: a bad ``timeout`` or ``retention_time_ms``
        :raises UnknownMemberIdError, IllegalGenerationError, FencedInstanceIdError,
            RebalanceInProgressError: the commit is fenced; nothing was written
        :raises StoreFailedError: an earlier write or fsync failed; reopen the store
        :raises CommitTimeoutError: ``timeout`` seconds passed first (the commit stays queued)
        """
        # the usual call in one native call (native/src/route.rs); any other: False
        if retention_time_ms is not None or not self._router.commit_sync(
                group_id, offsets, generation_id, member_id, group_instance_id, timeout):
            self._commit_sync_other(group_id, offsets, generation_id, member_id,
                                    group_instance_id, timeout, retention_time_ms)

    def _commit_sync_other(self, group_id, offsets, generation_id, member_id,
                           group_instance_id, timeout, retention_time_ms=None) -> None:
        """``commit_sync`` of any call but the usual one."""
        timeout = timeout if timeout is None else check_timeout(timeout)
        retention_time_ms = check_retention_time(retention_time_ms)
        if self._closed:  # _check_commit, inline (a call fewer per member's commit)
            raise StoreClosedError(f"{self.path}: the store is closed")
        part, fields, nbytes, now, precheck = self._router.check(
            group_id, offsets, generation_id, member_id, group_instance_id,
            retention_time_ms=retention_time_ms)
        if fields:
            commit_lone(self._writer, part, fields, nbytes, now, timeout, precheck)
        else:  # nothing to write: the checks alone, a failed store included
            with part.lock:
                self._writer.check_usable()
                precheck()

    def commit_async(self, group_id: str,
                     offsets: Mapping[TopicPartition, OffsetAndMetadata | int], *,
                     callback: CommitCallback | None = None, generation_id: int = -1,
                     member_id: str = "", group_instance_id: str | None = None,
                     retention_time_ms: int | None = None) -> Future:
        """Queue a commit and return a ``Future`` that resolves once it is durable.

        The future is already running, so ``cancel()`` returns False: a queued commit is
        written whatever happens to its future. Calls queued back to back may get the same
        future object: their commits are written in one batch and become durable (or fail)
        together.

        ``callback(offsets, exception_or_None)`` runs once, on the store's callback thread,
        in completion order. Commits to one key are applied in call order, sync or async.
        Argument and fencing errors are raised here, at once, and nothing is queued; a store
        that has failed (``StoreFailedError``) fails the future and runs the callback.
        ``retention_time_ms`` as ``commit_sync``'s.
        """
        # the usual call queued in one native call (native/src/route.rs); any other: None
        future = None if retention_time_ms is not None else self._router.commit_async(
            group_id, offsets, callback, generation_id, member_id, group_instance_id)
        if future is None:
            future = self._commit_async_other(group_id, offsets, callback, generation_id,
                                              member_id, group_instance_id, retention_time_ms)
        return future

    def _commit_async_other(self, group_id, offsets, callback, generation_id, member_id,
                            group_instance_id, retention_time_ms=None) -> Future:
        """``commit_async`` of any call but the usual one (or one that found the store failed
        or closing)."""
        if callback is not None and not callable(callback):
            raise TypeError(f"callback must be callable, not {type(callback).__name__}")
        retention_time_ms = check_retention_time(retention_time_ms)
        if self._closed:  # _check_commit, inline (a call fewer per member's commit)
            raise StoreClosedError(f"{self.path}: the store is closed")
        part, fields, nbytes, now, precheck = self._router.check(
            group_id, offsets, generation_id, member_id, group_instance_id,
            retention_time_ms=retention_time_ms)
        if not fields:  # nothing to write: the checks alone, a failed store included
            with part.lock:
                precheck()
                try:
                    self._writer.check_usable()
                except StoreFailedError as e:
                    error = e
                else:
                    error = None
            if callback is not None:
                self._writer.callbacks.run_one(callback, offsets, error)
            return resolved_future() if error is None else failed_future(error)
        try:
            # (native/src/async_commit.rs: the run it joins, and the async writer woken)
            return submit_async(self._writer, part, fields, nbytes, now, precheck, callback,
                                offsets, YIELD_AT)
        except StoreFailedError as e:
            # The commit was valid but cannot be written: that is its outcome, reported the
            # way every other outcome is (the future and the callback), not as a usage error.
            if callback is not None:
                self._writer.callbacks.run_one(callback, offsets, e)
            return failed_future(e)

    # -- reads ---------------------------------------------------------------------------

    def fetch(self, group_id: str, partitions: Iterable[TopicPartition] | None = None, *,
              require_stable: bool = False) -> dict[TopicPartition, OffsetAndMetadata]:
        """Committed offsets of ``group_id`` (all, or those of ``partitions``); absent = none.

        Offsets of open transactions are not shown until they commit.

        :param require_stable: raise ``UnstableOffsetCommitError`` when any of the requested
            partitions (all of the group's, without ``partitions``) has transactional offsets
            pending (KIP-447), instead of answering with the last committed ones
        """
        self._check_open()
        check_group_id(group_id)
        wanted = None if partitions is None else check_partition_list(partitions)
        part = self._parts[partition_for(group_id, self._partitions)]
        with part.lock:
            if require_stable:
                part.table.txn.check_stable(group_id, wanted)
            entries = part.table.offsets.get(group_id)
            if not entries:
                return {}
            if wanted is None:
                items = sorted(entries.items())
            else:
                items = [(tp, entries[tp]) for tp in sorted(set(wanted)) if tp in entries]
        return committed_view(items)

    def committed(self, group_id: str, tp: TopicPartition, *,
                  require_stable: bool = False) -> OffsetAndMetadata | None:
        """The committed offset of one partition, or ``None``."""
        return self.fetch(group_id, [tp], require_stable=require_stable).get(tp)

    def groups(self) -> list[str]:
        """Every group with committed offsets or group metadata, sorted."""
        self._check_open()
        out: set[str] = set()
        for part in self._parts:
            with part.lock:
                out |= part.table.groups()
        return sorted(out)

    # -- the wire server's registries: topics here, credentials at ``store.registries`` -----

    def topics(self) -> dict[str, dict]:
        """topic -> ``{"partitions", "topic_id", "created_timestamp"}``, every one registered."""
        return self.registries.topics()

    def create_topic(self, name: str, partitions: int, *, topic_id: bytes) -> dict:
        """``registries.Registries.create_topic``."""
        return self.registries.create_topic(name, partitions, topic_id=topic_id)

    # -- deletes and expiry --------------------------------------------------------------

    def delete_offsets(self, group_id: str, partitions: Iterable[TopicPartition]) -> None:
        """Tombstone the committed offsets of ``partitions`` (those that exist) in one batch.

        For a group a coordinator manages (classic or consumer protocol), Kafka's OffsetDelete
        rule applies (KIP-496), to the whole call: nothing is deleted if members subscribe to
        a requested topic.

        :raises GroupSubscribedToTopicError: members of the group subscribe to a requested
            topic (``.partitions`` lists them)
        :raises NonEmptyGroupError: the group has members and is not a consumer group
        """
        self._check_open()
        check_group_id(group_id)
        tps = sorted(set(check_partition_list(partitions)))
        groups = self._groups.migration(self._parts[self.partition_of(group_id)])
        self._run_deferred(group_id, deferred.offset_deletes(groups, group_id, tps),
                           self._clock())

    def delete_group(self, group_id: str) -> None:
        """Tombstone every offset of ``group_id`` (and its group metadata) in one batch.

        :raises GroupIdNotFoundError: the store has neither offsets nor metadata of the group
        :raises NonEmptyGroupError: the group has members
        """
        self._check_open()
        check_group_id(group_id)
        now = self._clock()
        groups = self._groups.migration(self._parts[self.partition_of(group_id)])
        self._run_deferred(group_id, deferred.group_delete(groups, group_id, now), now)

    def _run_deferred(self, group_id: str, producer, now: int):
        part = self._parts[partition_for(group_id, self._partitions)]
        return self._writer.submit_sync(part, QueueItem(None, now, deferred=producer), None)

    def expire_offsets(self, now_ms: int | None = None) -> int:
        """Run the retention pass now (KIP-211 rules; see ``offsetlog.group.expiry``).

        Expired offsets get tombstones, one batch per log partition.

        :param now_ms: the time to judge expiry at; defaults to the store's clock
        :return: how many offsets expired
        """
        self._check_open()
        now = self._clock() if now_ms is None else check_time_ms(now_ms)
        retention = self.config.retention_ms
        total = 0
        for part in self._parts:
            table = part.table
            if not (table.offsets or table.group_metadata or table.consumer_groups):
                continue  # (nothing to expire, no group to delete: no item in its queue)
            item = QueueItem(None, now, deferred=deferred.expiry(
                self._groups.migration(part), now, retention,
                lambda p=part: bool(p.queue)))  # (called with part.lock held)
            self._writer.submit_sync(part, item, None)
            total += sum(1 for r in item.records or () if r[1] == rec.OFFSET_COMMIT)
        if total:
            log.info("%s: expired %d offsets", self.path, total)
        return total

    # -- compaction and snapshots (offsetlog.store.cleaning, offsetlog.store.snapshots) -----

    def compact(self, partitions: Iterable[int] | None = None, *,
                now_ms: int | None = None) -> list[CleanResult]:
        """Clean the closed segments of every (or the given) log partition now.

        Commits continue meanwhile; they pause only for the renames of each swap.

        :return: one ``CleanResult`` per partition that had closed segments
        """
        return self._cleaning.compact(partitions, now_ms)

    def snapshot(self, partitions: Iterable[int] | None = None) -> list[SnapshotResult]:
        """Snapshot every (or the given) log partition now, each in one LMDB transaction.

        Only records that are durable in the log are covered (under ``fsync="interval"`` or
        ``"never"`` the partition's log is fsynced first). A partition whose snapshot on disk
        is already at its current offset is not rewritten (``taken`` is False); an empty one
        is left out.

        :return: one ``SnapshotResult`` per partition snapshotted or already up to date
        :raises SnapshotError: some partition's snapshot could not be written (the others
            were; ``failures`` says which and why). The log and commits are unaffected.
        """
        return self._snapshots.snapshot(partitions)

    # -- durability and lifecycle ----------------------------------------------------------

    def flush(self) -> None:
        """Wait for every queued commit, then fsync every partition (whatever the policy)."""
        self._check_open()
        now = self._clock()
        for part in self._parts:  # a barrier per partition: FIFO queues make it wait its turn
            self._writer.submit_sync(part, QueueItem(None, now, force_sync=True), None)

    def drive_async_writer(self, wake: Callable[[], None], wake_fd=None) -> Callable[[], None]:
        """Lead the async writer from this thread (an event loop's): ``wake()`` is called when
        there is work, then run ``step()`` here (``wake_fd``: see AsyncWriter.drive)."""
        self._check_open()
        return self._writer.async_writer.drive(wake, wake_fd)

    def close(self) -> None:
        """Finish queued commits, fsync, stop background threads and release the directory.
        Idempotent; a close() while another thread closes returns once that close is done,
        unless it comes from one of the store's own threads. Later use: ``StoreClosedError``."""
        with self._close_lock:
            if self._closed:
                closer = self._closing_thread
                me = threading.current_thread()
                if closer is not None and closer is not me and me not in self._own_threads():
                    self._close_done.wait()
                return
            self._closed = True
            self._closing_thread = threading.current_thread()
        try:
            self._close()
        finally:
            self._closing_thread = None
            self._close_done.set()

    def _own_threads(self) -> list:
        return [self._retention_thread, self._cleaning.thread, self._snapshots.thread,
                self._recovery_points.thread, self._groups.timer, self._transactions.timer,
                *self._writer.threads]

    def _close(self) -> None:
        self._background_stop.set()
        for t in (self._retention_thread, self._cleaning.thread, self._snapshots.thread,
                  self._recovery_points.thread):
            if t is not None and t is not threading.current_thread():
                t.join()
        self._groups.stop()
        self._transactions.stop()
        self._writer.closing = True  # from here on nothing new is queued (see check_usable)
        ahead, emptied = self._write_ahead, False
        try:
            self._writer.drain()
            self._groups.fail_parked_requests()
            if self._writer.failure is None:
                for part in self._parts:
                    try:
                        part.log.sync()
                    except OSError as e:
                        log.error("%s: fsync on close failed: %r", self.path, e)
                if ahead is not None:  # (its segments synced, it holds no entries after)
                    emptied = write_ahead.checkpoint(ahead, self.path)
                self._snapshots.on_close()
            self._recovery_points.on_close()  # (after the syncs: what they made durable)
        finally:
            self._writer.stop()
            for part in self._parts:
                part.log.close()
            if ahead is not None:
                write_ahead.close(ahead, self.path, self._partitions, empty=emptied)
            self._snapshots.close()
            dirlock.release(self.path, self._lock_fd)

    @property
    def closed(self) -> bool:
        return self._closed

    @property
    def _closed(self) -> bool:
        # (the router's: the native entry of commits reads it there)
        return self._router.closed

    @_closed.setter
    def _closed(self, value: bool) -> None:
        self._router.closed = value

    @property
    def partitions(self) -> int:
        return self._partitions

    @property
    def _commit_router(self) -> CommitRouter:
        """(internal, for in-process byte paths) The native entry of ``commit_sync``'s usual
        call (``_native.RouterState``, native/src/route.rs): the server's native request loop
        commits a plain OffsetCommit through it (``wire_conn::plain_commit``)."""
        return self._router

    def _check_open(self) -> None:
        if self._closed:
            raise StoreClosedError(f"{self.path}: the store is closed")

    def partition_of(self, group_id: str) -> int:
        """The log partition that holds ``group_id``."""
        return partition_for(check_group_id(group_id), self._partitions)

    def stats(self) -> list[dict]:
        """Per log partition, a dict: ``partition``, ``keys``, ``groups``, then the fields of
        ``PartitionLog.stats`` and ``Snapshots.stats`` (times in epoch ms, None for none)."""
        self._check_open()
        out = []
        for part in self._parts:
            with part.lock:
                out.append({"partition": part.index, "keys": len(part.table),
                            "groups": len(part.table.groups()), **part.log.stats(),
                            **self._snapshots.stats(part.index)})
        return out


OffsetStore.open.__func__.__signature__ = open_signature(  # type: ignore[attr-defined]
    OffsetStore.open.__func__)  # type: ignore[attr-defined]
