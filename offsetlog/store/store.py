"""``OffsetStore``: the public face of the engine. It wires the pieces together:

* ``offsetlog.log.naming`` / ``offsetlog.log.segment`` / ``offsetlog.log.partition_log``: files on disk;
* ``offsetlog.recovery.replay``: reading the log back on open, repairing a torn tail;
* ``offsetlog.table``: the in-memory replay of each log partition;
* ``offsetlog.store.group_commit``: group commit, the only path by which records reach the log and table.

The store adds what needs the outside world: the directory lock, the metadata file, the clock,
the background retention pass, argument checking and the public API.
"""

from __future__ import annotations

import dataclasses
import logging
import os
import threading
from collections.abc import Iterable, Mapping
from concurrent.futures import Future
from typing import Callable

from offsetlog.log import dirlock
from offsetlog.store import background

from offsetlog.log import records as rec
from offsetlog.log.records import offset_commit_fields
from offsetlog.store.config import StoreConfig, system_clock_ms
from offsetlog.errors import (IllegalGenerationError, StoreClosedError, StoreFailedError,
                              UnknownMemberIdError, UnstableOffsetCommitError)
from offsetlog.store.futures import failed_future, resolved_future
from offsetlog.group import GroupConfig, GroupCoordinator
from offsetlog.store.groups import GroupRequests
from offsetlog.partitioner import DEFAULT_PARTITIONS, partition_for
from offsetlog.store.opening import create_store_dir, read_or_create_meta, recover
from offsetlog.store.snapshots import LoadedSnapshots, StoreSnapshots
from offsetlog.table import OffsetTable
from offsetlog.store.transactions import TransactionRequests
from offsetlog.types import OffsetAndMetadata, TopicPartition, committed_view
from offsetlog.validation import (check_group_id, check_partition_list, check_partition_numbers,
                                  check_time_ms, check_timeout)
from offsetlog.store.commit_queue import Commit, PartitionWriter, Pending
from offsetlog.store.group_commit import GroupCommitter
from offsetlog.compaction.cleaner import CleanResult, clean_partition
from offsetlog.recovery.report import RecoveryReport

log = logging.getLogger("offsetlog.store")

#: callback(offsets, exception_or_None) for commit_async
CommitCallback = Callable[[Mapping, BaseException | None], None]


#: groups whose route (partition, standalone fencing check) the commit path keeps; about
#: 500 bytes each
ROUTES_CACHED = 65_536


class OffsetStore(GroupRequests, TransactionRequests, StoreSnapshots):
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
                 _snapshots: LoadedSnapshots | None = None) -> None:
        self.path = path
        self.config = config
        self._clock = config.clock
        self._lock_fd = _lock_fd
        self._parts = _parts
        self._partitions = config.partitions
        #: group -> (its PartitionWriter, its standalone commits' fencing check); see _route
        self._routes: dict[str, tuple[PartitionWriter, Callable[[], None]]] = {}
        #: what recovery found when this store was opened
        self.recovery_report = _report
        self._closed = False
        self._metadata_max = config.metadata_max_bytes
        #: commit_async's cache of record key maps (see records.offset_commit_fields)
        self._keys: dict = {}
        self._close_lock = threading.Lock()
        self._close_done = threading.Event()  # set once close() has finished
        self._closing_thread: threading.Thread | None = None
        self._writer = GroupCommitter(_parts, fsync=config.fsync,
                                      fsync_interval_ms=config.fsync_interval_ms,
                                      max_group_commit_bytes=config.max_group_commit_bytes)
        # Each partition's coordinator starts from the group metadata its log holds; members
        # get a fresh session from now (Kafka does the same when it loads a partition).
        now = self._clock()
        for part in _parts:
            part.coordinator = GroupCoordinator(_group_config or GroupConfig())
            for group_id, value in sorted(part.table.group_metadata.items()):
                part.coordinator.load(group_id, value, now_ms=now)
        self._init_groups()
        self._background_stop = threading.Event()  # stops every background thread
        # before the cleaner starts (it asks for the snapshots' tombstone floor) and before
        # anything is written (the roll-forward below)
        self._init_snapshots(_snapshots or LoadedSnapshots(None, {}))
        self._init_transactions()  # rolls forward transactions decided before a crash
        self._retention_thread: threading.Thread | None = None
        if config.retention_check_interval_ms:
            self._retention_thread = background.start("offsetlog-retention", lambda: background.every(
                self._background_stop, config.retention_check_interval_ms / 1000.0,
                self.expire_offsets, f"{path}: retention pass", log))
        self._clean_locks = [threading.Lock() for _ in _parts]  # one cleaning per partition
        self._cleaner_thread: threading.Thread | None = None
        if config.cleaner_backoff_ms:
            self._cleaner_thread = background.start("offsetlog-cleaner", lambda: background.every(
                self._background_stop, config.cleaner_backoff_ms / 1000.0, self._cleaner_pass,
                f"{path}: cleaner pass", log))

    # -- opening -------------------------------------------------------------------------

    @classmethod
    def open(cls, path: str | os.PathLike, *, partitions: int | None = None,
             fsync: str = "always", fsync_interval_ms: int = 1000,
             retention_ms: int = 7 * 24 * 3600 * 1000,
             retention_check_interval_ms: int = 600_000,
             segment_bytes: int = 100 * 1024 * 1024, clock: Callable[[], int] | None = None,
             max_group_commit_bytes: int = 4 * 1024 * 1024,
             metadata_max_bytes: int = 4096, delete_retention_ms: int = 24 * 3600 * 1000,
             min_cleanable_dirty_ratio: float = 0.5,
             cleaner_backoff_ms: int = 15_000,
             group_config: GroupConfig | None = None,
             transaction_timeout_ms: int = 60_000,
             transaction_check_interval_ms: int = 10_000, snapshots: bool = True,
             snapshot_interval_records: int = 100_000, snapshot_interval_ms: int = 60_000,
             snapshot_on_close: bool = True) -> "OffsetStore":
        """Open (creating if needed) the store in directory ``path`` and recover it.

        :param partitions: log partitions; fixed at creation. ``None`` means the stored count,
            or 50 for a new store. A count that differs from the stored one is an error.
        :param fsync: ``"always"``, ``"interval"`` or ``"never"`` (see ``StoreConfig``)
        :param clock: callable returning epoch ms; defaults to the system clock
        :param group_config: the group coordinator's settings (session timeout bounds,
            initial rebalance delay, group size limit)
        :param transaction_timeout_ms: default time an open transaction may last before the
            store aborts it (docs/TRANSACTIONS.md)
        :param snapshots: load and keep LMDB snapshots of the tables (``<path>/snapshots``), so
            that opening replays only the log after them; False discards any found there
        :param snapshot_interval_records: snapshot a log partition in the background after
            this many records (0: not by count)
        :param snapshot_interval_ms: ... or this long after its last snapshot if it changed
            (0: not by time). Both 0: no background snapshots
        :param snapshot_on_close: snapshot every changed partition on a clean ``close()``
        :return: the open store; ``store.recovery_report`` says what recovery found
        :raises StoreLockedError: the directory is open elsewhere
        :raises StoreConfigError: bad options, or options that contradict the directory
        :raises CorruptLogError: corruption before the tail of a log
        """
        path = os.path.abspath(os.fspath(path))
        config = StoreConfig(partitions=DEFAULT_PARTITIONS if partitions is None else partitions,
                             fsync=fsync,
                             fsync_interval_ms=fsync_interval_ms, retention_ms=retention_ms,
                             retention_check_interval_ms=retention_check_interval_ms,
                             segment_bytes=segment_bytes,
                             clock=clock if clock is not None else system_clock_ms,
                             max_group_commit_bytes=max_group_commit_bytes,
                             metadata_max_bytes=metadata_max_bytes,
                             delete_retention_ms=delete_retention_ms,
                             min_cleanable_dirty_ratio=min_cleanable_dirty_ratio,
                             cleaner_backoff_ms=cleaner_backoff_ms,
                             transaction_timeout_ms=transaction_timeout_ms,
                             transaction_check_interval_ms=transaction_check_interval_ms,
                             snapshots=snapshots,
                             snapshot_interval_records=snapshot_interval_records,
                             snapshot_interval_ms=snapshot_interval_ms,
                             snapshot_on_close=snapshot_on_close)
        create_store_dir(path)  # never group/world-writable; errors name the path
        lock_fd = dirlock.acquire(path)
        try:
            stored = read_or_create_meta(path, partitions, config.partitions)
            if stored != config.partitions:
                config = dataclasses.replace(config, partitions=stored)
            parts, report, loaded = recover(path, config)
        except BaseException:
            dirlock.release(path, lock_fd)
            raise
        try:
            store = cls(path, config, _lock_fd=lock_fd, _parts=parts, _report=report,
                        _group_config=group_config, _snapshots=loaded)
        except BaseException:
            if loaded.store is not None:
                loaded.store.close()
            dirlock.release(path, lock_fd)
            raise
        if not report.clean:
            log.warning("%s: %s", path, report)
        return store

    def __enter__(self) -> "OffsetStore":
        return self

    def __exit__(self, *exc) -> None:
        self.close()

    def __repr__(self) -> str:
        state = "closed" if self._closed else "open"
        return f"<OffsetStore {self.path!r} partitions={self._partitions} {state}>"

    # -- commits -------------------------------------------------------------------------

    def _prepare_commit(self, group_id, offsets, generation_id, member_id, group_instance_id
                        ) -> tuple[PartitionWriter, Pending | None, Callable[[], None]]:
        """Check a commit call: its partition, its queue item (None: no offsets) and
        ``precheck``, the fencing check to run under the partition lock. For ``commit_sync``
        and transactions; ``commit_async`` makes the same checks in its own body."""
        if self._closed:
            raise StoreClosedError(f"{self.path}: the store is closed")
        route = self._routes.get(group_id) if group_id.__class__ is str else None
        if route is None:
            route = self._route(group_id)
        part, precheck = route
        now = self._clock()
        fields, nbytes = offset_commit_fields(group_id, offsets, now, self._metadata_max,
                                              self._keys)
        if not (generation_id.__class__ is int and generation_id == -1 and member_id == ""
                and group_instance_id is None):
            precheck = self._fencing(part, group_id, generation_id, member_id,
                                     group_instance_id, now)
        return part, (Commit(fields, nbytes, now) if fields else None), precheck

    def _route(self, group_id) -> tuple[PartitionWriter, Callable[[], None]]:
        """``group_id``'s partition and the fencing check of its standalone commits, made once
        per group (the commit hot path looks both up in one dict)."""
        check_group_id(group_id)
        part = self._parts[partition_for(group_id, self._partitions)]
        clock = self._clock
        coord = part.coordinator
        managed = coord.managed_groups()

        def standalone() -> None:
            # Kafka's simple consumer: valid unless a managed group of that name exists.
            if group_id in managed:
                coord.validate_offset_commit(group_id, now_ms=clock())

        routes = self._routes
        if len(routes) >= ROUTES_CACHED:
            routes.clear()  # a cache: groups come and go, and it must not grow without bound
        route = routes[group_id] = (part, standalone)
        return route

    @staticmethod
    def _fencing(part, group_id, generation_id, member_id, group_instance_id, now
                 ) -> Callable[[], None]:
        """The group coordinator's check of a commit, to run under the partition lock in the
        same hold that queues it (see ``GroupCoordinator.validate_offset_commit``)."""
        if not isinstance(generation_id, int) or isinstance(generation_id, bool):
            raise IllegalGenerationError(f"generation_id must be an int, not {generation_id!r}")
        if not isinstance(member_id, str):
            raise UnknownMemberIdError(f"member_id must be a str, not {member_id!r}")
        if group_instance_id is not None and not isinstance(group_instance_id, str):
            raise UnknownMemberIdError(
                f"group_instance_id must be a str or None, not {group_instance_id!r}")
        coord = part.coordinator
        # _prepare_commit takes the usual standalone call (generation -1 as a plain int, no
        # member, no instance) the short way; an equal call of other types arrives here.
        standalone = generation_id == -1 and not member_id and group_instance_id is None

        def check() -> None:
            if standalone and not coord.has_group(group_id):
                return
            coord.validate_offset_commit(group_id, member_id=member_id,
                                         group_instance_id=group_instance_id,
                                         generation_id=generation_id, now_ms=now)

        return check

    def commit_sync(self, group_id: str, offsets: Mapping[TopicPartition, OffsetAndMetadata | int],
                    *, generation_id: int = -1, member_id: str = "",
                    group_instance_id: str | None = None, timeout: float | None = None) -> None:
        """Commit ``offsets`` for ``group_id`` and return once durable per the fsync policy.

        All offsets of one call are applied atomically: after any crash, all or none. One
        invalid offset rejects the whole call before anything is written. For a group managed
        by the coordinator, ``generation_id``, ``member_id`` and ``group_instance_id`` must
        name a current member (Kafka's checks, in Kafka's order).

        :raises InvalidCommitError: (and subclasses) bad arguments; nothing was written
        :raises UnknownMemberIdError, IllegalGenerationError, FencedInstanceIdError,
            RebalanceInProgressError: the commit is fenced; nothing was written
        :raises StoreFailedError: an earlier write or fsync failed; reopen the store
        :raises CommitTimeoutError: ``timeout`` seconds passed first (the commit stays queued)
        """
        timeout = timeout if timeout is None else check_timeout(timeout)
        part, item, precheck = self._prepare_commit(group_id, offsets, generation_id, member_id,
                                                    group_instance_id)
        if item is not None:
            self._writer.submit_sync(part, item, timeout, precheck)
        else:  # nothing to write: the checks alone, a failed store included
            with part.lock:
                self._writer.check_usable()
                precheck()

    def commit_async(self, group_id: str,
                     offsets: Mapping[TopicPartition, OffsetAndMetadata | int], *,
                     callback: CommitCallback | None = None, generation_id: int = -1,
                     member_id: str = "", group_instance_id: str | None = None) -> Future:
        """Queue a commit and return a ``Future`` that resolves once it is durable.

        The future is already running, so ``cancel()`` returns False: a queued commit is
        written whatever happens to its future. Calls queued back to back may get the same
        future object: their commits are written in one batch and become durable (or fail)
        together.

        ``callback(offsets, exception_or_None)`` runs once, on the store's callback thread,
        in completion order. Commits to one key are applied in call order, sync or async.
        Argument and fencing errors are raised here, at once, and nothing is queued; a store
        that has failed (``StoreFailedError``) fails the future and runs the callback.
        """
        if callback is not None and not callable(callback):
            raise TypeError(f"callback must be callable, not {type(callback).__name__}")
        # _prepare_commit's checks, written out (it builds a queue item, which a run does not
        # want). Sharing them through a helper returning (part, fields, nbytes, now,
        # precheck) measured 0.931x of the bare pipeline against 0.949x written out (seven
        # interleaved pairs each), where the async target has a few % to spare
        if self._closed:
            raise StoreClosedError(f"{self.path}: the store is closed")
        route = self._routes.get(group_id) if group_id.__class__ is str else None
        if route is None:
            route = self._route(group_id)
        part, precheck = route
        now = self._clock()
        fields, nbytes = offset_commit_fields(group_id, offsets, now, self._metadata_max,
                                              self._keys)
        if not (generation_id.__class__ is int and generation_id == -1 and member_id == ""
                and group_instance_id is None):
            precheck = self._fencing(part, group_id, generation_id, member_id,
                                     group_instance_id, now)
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
                self._writer.queue_callback(callback, offsets, error)
            return resolved_future() if error is None else failed_future(error)
        try:
            return self._writer.submit_async(part, fields, nbytes, now, precheck, callback,
                                             offsets)
        except StoreFailedError as e:
            # The commit was valid but cannot be written: that is its outcome, reported the
            # way every other outcome is (the future and the callback), not as a usage error.
            if callback is not None:
                self._writer.queue_callback(callback, offsets, e)
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
                self._check_stable(part, group_id, wanted)
            entries = part.table.offsets.get(group_id)
            if not entries:
                return {}
            if wanted is None:
                items = sorted(entries.items())
            else:
                items = [(tp, entries[tp]) for tp in sorted(set(wanted)) if tp in entries]
        return committed_view(items)

    @staticmethod
    def _check_stable(part, group_id: str, wanted) -> None:
        pending = part.table.txn.pending_partitions(group_id)
        if wanted is not None:
            pending &= set(wanted)
        if pending:
            tps = sorted(TopicPartition(t, p) for t, p in pending)
            raise UnstableOffsetCommitError(
                f"group {group_id!r} has transactional offsets pending for {tps}",
                group_id=group_id, partitions=tps)

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

    # -- deletes and expiry --------------------------------------------------------------

    def delete_offsets(self, group_id: str, partitions: Iterable[TopicPartition]) -> None:
        """Tombstone the committed offsets of ``partitions`` (those that exist) in one batch.

        For a group the coordinator manages, Kafka's OffsetDelete rule applies (KIP-496), to
        the whole call: nothing is deleted if members subscribe to a requested topic.

        :raises GroupSubscribedToTopicError: members of the group subscribe to a requested
            topic (``.partitions`` lists them)
        :raises NonEmptyGroupError: the group has members and is not a consumer group
        """
        self._check_open()
        check_group_id(group_id)
        tps = sorted(set(check_partition_list(partitions)))
        now = self._clock()
        coordinator = self._parts[self.partition_of(group_id)].coordinator

        def tombstones(table: OffsetTable) -> tuple:
            # At the head of the queue, so against the group as of this call's place in it.
            coordinator.check_offset_delete(group_id, tps)
            # A tombstone also drops the key's pending transactional offsets.
            present = set(table.offsets.get(group_id, {})) | table.txn.pending_partitions(
                group_id)
            return tuple(rec.offset_tombstone(i, group_id, t, p)
                         for i, (t, p) in enumerate(tp for tp in tps if tp in present))

        self._run_deferred(group_id, tombstones, now)

    def delete_group(self, group_id: str) -> None:
        """Tombstone every offset of ``group_id`` (and its group metadata) in one batch."""
        self._check_open()
        check_group_id(group_id)
        now = self._clock()

        part = self._parts[partition_for(group_id, self._partitions)]

        def tombstones(table: OffsetTable) -> tuple:
            # The coordinator refuses (NonEmptyGroupError) while the group has members.
            result = part.coordinator.delete_group(group_id, now_ms=now)
            # Pending transactional offsets go too: a tombstone drops them (docs/TRANSACTIONS.md)
            keys = set(table.offsets.get(group_id, {})) | table.txn.pending_partitions(group_id)
            out = [rec.offset_tombstone(i, group_id, t, p)
                   for i, (t, p) in enumerate(sorted(keys))]
            for r in result.records:
                out.append((len(out),) + tuple(r[1:]))
            return tuple(out)

        self._run_deferred(group_id, tombstones, now)

    def _run_deferred(self, group_id: str, producer, now: int):
        part = self._parts[partition_for(group_id, self._partitions)]
        return self._writer.submit_sync(part, Pending(None, now, deferred=producer), None)

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
            if not part.table.offsets:
                continue

            def expire(table: OffsetTable, coordinator=part.coordinator) -> tuple:
                # KIP-211: standalone groups from their commits; managed groups by state
                # (Empty since when, subscribed topics), and emptied groups are deleted.
                # Keys with pending transactional offsets, and groups holding any, are left
                # alone until their transactions complete.
                result = coordinator.expire_offsets(table.offsets, now_ms=now,
                                                    retention_ms=retention,
                                                    pending=table.txn.keys)
                return tuple(result.records)

            item = Pending(None, now, deferred=expire)
            self._writer.submit_sync(part, item, None)
            total += sum(1 for r in item.records or () if r[1] == rec.OFFSET_COMMIT)
        if total:
            log.info("%s: expired %d offsets", self.path, total)
        return total

    # -- compaction ------------------------------------------------------------------------

    def compact(self, partitions: Iterable[int] | None = None, *,
                now_ms: int | None = None) -> list[CleanResult]:
        """Clean the closed segments of every (or the given) log partition now.

        Commits continue meanwhile; they pause only for the renames of each swap.

        :return: one ``CleanResult`` per partition that had closed segments
        """
        self._check_open()
        now = self._clock() if now_ms is None else check_time_ms(now_ms)
        wanted = check_partition_numbers(partitions, self._partitions)
        results = []
        for p in wanted:
            r = self._clean(self._parts[p], now)
            if r is not None:
                results.append(r)
        return results

    def _clean(self, part: PartitionWriter, now: int) -> CleanResult | None:
        plog = part.log
        with self._clean_locks[part.index]:
            with part.lock:
                active_base = plog.active_base
            if active_base is None or len(plog.segments) < 2:
                return None
            floor = self._tombstone_floor(part.index)  # after active_base: see its docstring
            try:
                result = clean_partition(
                    plog.directory, part.index, active_base=active_base, now_ms=now,
                    delete_retention_ms=self.config.delete_retention_ms,
                    segment_bytes=self.config.segment_bytes,
                    swap_lock=lambda: self._writer.exclusive(part),
                    on_swapped=plog.replace_segments, fault_hook=self._cleaner_fault_hook,
                    keep_tombstones_from=floor)
            except Exception as e:
                plog.uncleanable = f"{type(e).__name__}: {e}"
                log.error("%s: log partition %d marked uncleanable: %s", self.path,
                          part.index, plog.uncleanable)
                raise
            plog.clean_bytes = sum(os.path.getsize(p) for b, p in plog.segments
                                   if b < active_base)
            plog.last_cleaned_ms = now
            plog.uncleanable = None
            return result

    #: tests set this to a callable(step) to crash a cleaning at a chosen step
    _cleaner_fault_hook = None

    def _cleaner_pass(self) -> None:
        """Clean every partition whose dirty ratio is over the threshold."""
        for part in self._parts:
            self._check_open()
            plog = part.log
            if (plog.uncleanable is None and len(plog.segments) >= 2
                    and plog.dirty_ratio() > self.config.min_cleanable_dirty_ratio):
                try:
                    self._clean(part, self._clock())
                except Exception:
                    pass  # logged and marked uncleanable; the other partitions go on

    # -- durability and lifecycle ----------------------------------------------------------

    def flush(self) -> None:
        """Wait for every queued commit, then fsync every partition (whatever the policy)."""
        self._check_open()
        now = self._clock()
        for part in self._parts:  # a barrier per partition: FIFO queues make it wait its turn
            self._writer.submit_sync(part, Pending(None, now, force_sync=True), None)

    def close(self) -> None:
        """Finish queued commits, fsync, stop background threads and release the directory.

        Idempotent: closing a closed store does nothing; a close() that arrives while another
        thread is closing the store returns once that close is done (the directory released),
        unless it comes from one of the store's own threads, which that close may be waiting
        for. Any other use after close raises ``StoreClosedError``.
        """
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
        return [self._retention_thread, self._cleaner_thread, self._snapshot_thread,
                self._group_timer, self._txn_timer, *self._writer._threads]

    def _close(self) -> None:
        self._background_stop.set()
        for t in (self._retention_thread, self._cleaner_thread, self._snapshot_thread):
            if t is not None and t is not threading.current_thread():
                t.join()
        self._stop_groups()
        self._stop_transactions()
        self._writer.closing = True  # from here on nothing new is queued (see check_usable)
        try:
            self._writer.drain()
            self._fail_parked_requests()
            if self._writer.failure is None:
                for part in self._parts:
                    try:
                        part.log.sync()
                    except OSError as e:
                        log.error("%s: fsync on close failed: %r", self.path, e)
                self._snapshot_on_close()
        finally:
            self._writer.stop()
            for part in self._parts:
                part.log.close()
            self._close_snapshots()
            dirlock.release(self.path, self._lock_fd)

    @property
    def closed(self) -> bool:
        return self._closed

    @property
    def partitions(self) -> int:
        return self._partitions

    def _check_open(self) -> None:
        if self._closed:
            raise StoreClosedError(f"{self.path}: the store is closed")

    def partition_of(self, group_id: str) -> int:
        """The log partition that holds ``group_id``."""
        return partition_for(check_group_id(group_id), self._partitions)

    def stats(self) -> list[dict]:
        """Per log partition: keys, groups, next log offset, segments, bytes on disk, dirty
        ratio, when it was last cleaned (epoch ms or None) and why it is uncleanable (or None);
        the log offset and creation time (epoch ms) of its snapshot on disk (or None), how
        many snapshots of it failed and the last failure (or None).
        """
        self._check_open()
        out = []
        for part in self._parts:
            plog = part.log
            with part.lock:
                out.append({"partition": part.index, "keys": len(part.table),
                            "groups": len(part.table.groups()),
                            "next_offset": plog.next_offset, "segments": len(plog.segments),
                            "bytes": plog.size_bytes(), "dirty_ratio": plog.dirty_ratio(),
                            "last_cleaned_ms": plog.last_cleaned_ms,
                            "uncleanable": plog.uncleanable,
                            **self._snapshot_stats(part.index)})
        return out
