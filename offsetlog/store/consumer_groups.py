"""The store's part for the consumer group protocol (KIP-848): ConsumerGroupHeartbeat and the
member-epoch checks of offset requests, through each log partition's sans-IO
``ConsumerGroupCoordinator`` (offsetlog/group/consumer/).

As in ``groups``: a request runs the coordinator under the partition's lock and queues its
records in the same lock hold; the answer is delivered once they are durable. The records
are the CONSUMER_GROUP_* types (docs/FORMAT.md); the table keeps the latest value of each key,
so snapshots and compaction cover them, and on open each coordinator is rebuilt from them.
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Callable, Iterable, Mapping
from concurrent.futures import Future

from offsetlog.errors import OffsetlogError
from offsetlog.group.consumer import ConsumerGroup, ConsumerGroupConfig, ConsumerGroupCoordinator
from offsetlog.group.consumer.group import state_records
from offsetlog.group.migration import Migration
from offsetlog.group.migration import log_records as migration_log_records
from offsetlog.partitioner import partition_for
from offsetlog.store import background
from offsetlog.store.commit_queue import PartitionWriter, QueueItem
from offsetlog.store.futures import running_future
from offsetlog.store.part import StoreCore, StorePart
from offsetlog.validation import check_group_id

TIMER_INTERVAL_S = 0.05
log = logging.getLogger("offsetlog.consumer_groups")


def log_records(records: Iterable[tuple]) -> list:
    """The coordinator's ``(kind, key, value)`` records as log records, deltas 0..n-1 (a
    classic group's GROUP_METADATA among them when a group changes protocol)."""
    return migration_log_records(records)


class ConsumerGroups(StorePart):
    def __init__(self, core: StoreCore, config: ConsumerGroupConfig | None = None, *,
                 deliver_classic: Callable | None = None) -> None:
        super().__init__(core)
        self.group_config = config or ConsumerGroupConfig()
        #: ``deliver_classic(part, responses, error)`` answers classic requests that were
        #: parked in a group a heartbeat upgraded (the groups part owns their futures)
        self._deliver_classic = deliver_classic
        now = self._clock()
        self.coordinators: list[ConsumerGroupCoordinator] = []
        self.migrations: list[Migration] = []
        for part in self._parts:
            c = ConsumerGroupCoordinator(self.group_config)
            c.replay(state_records(part.table.consumer_groups), now_ms=now)
            self.coordinators.append(c)
            self.migrations.append(Migration(part.coordinator, c))
            part.consumer_coordinator = c  # commits' member-epoch checks (store/routing.py)
        self._stop = threading.Event()
        self.timer = background.start("offsetlog-consumer-group-timer", lambda: background.every(
            self._stop, TIMER_INTERVAL_S, self.poll, f"{self.path}: consumer group timer", log))

    def _index(self, group_id: str) -> int:
        return partition_for(check_group_id(group_id), len(self._parts))

    def heartbeat(self, group_id: str, *, topics: Mapping[str, int], **request) -> Future:
        """One ConsumerGroupHeartbeat (``ConsumerGroupCoordinator.heartbeat``'s arguments);
        the future's result is its ``ConsumerHeartbeatResponse``, once its records are
        durable."""
        self._check_open()
        i = self._index(group_id)
        fut = running_future()
        migration = self.migrations[i]
        self._run(i, lambda c, now: migration.consumer_heartbeat(
            group_id, topics=topics, now_ms=now, **request), fut)
        return fut

    def poll(self, now_ms: int | None = None) -> None:
        self._check_open()
        now = self._clock() if now_ms is None else now_ms
        for i, c in enumerate(self.coordinators):
            deadline = c.next_deadline()
            if deadline is not None and deadline <= now:
                self._run(i, lambda c, t: c.poll(t), None, now)

    def _run(self, i: int, call: Callable, fut: Future | None, now: int | None = None) -> None:
        part: PartitionWriter = self._parts[i]
        coordinator = self.coordinators[i]
        at = self._clock() if now is None else now

        def compute():
            result = call(coordinator, at)
            return log_records(result.records), result

        def deliver(item: QueueItem) -> None:
            result = item.result
            if result is not None and result.classic_responses and self._deliver_classic:
                self._deliver_classic(part, result.classic_responses, item.error)
            if fut is None:
                return
            if item.error is not None:
                fut.set_exception(item.error)
            else:
                fut.set_result(item.result.response)

        try:
            self._writer.submit_computed(part, compute, at, deliver)
        except BaseException as e:
            if fut is None:
                raise
            fut.set_exception(e)

    # -- reads (under the partition's lock) ----------------------------------------------

    def describe(self, group_id: str) -> ConsumerGroup | None:
        """The group (a copy of its state is not taken: read it, do not keep it)."""
        self._check_open()
        i = self._index(group_id)
        with self._parts[i].lock:
            return self.coordinators[i].group(group_id)

    def group_ids(self) -> list[tuple[str, str]]:
        """``(group_id, state)`` of every consumer-protocol group."""
        self._check_open()
        out: list[tuple[str, str]] = []
        for part, c in zip(self._parts, self.coordinators):
            with part.lock:
                out.extend((gid, g.state()) for gid, g in c.groups.items())
        return sorted(out)

    def check_offset_request(self, group_id: str, member_id: str | None, member_epoch: int,
                             *, classic_commit: bool = False,
                             partitions: Iterable | None = None) -> OffsetlogError | None:
        i = self._index(group_id)
        with self._parts[i].lock:
            return self.coordinators[i].check_offset_request(
                group_id, member_id, member_epoch, classic_commit=classic_commit,
                partitions=partitions)

    def stop(self) -> None:
        self._stop.set()
        if self.timer is not threading.current_thread():
            self.timer.join()

    def configure(self, config: ConsumerGroupConfig) -> None:
        """New settings (the server's group.consumer.* properties) for every coordinator."""
        self.group_config = config
        for part, c in zip(self._parts, self.coordinators):
            with part.lock:
                c.config = config
