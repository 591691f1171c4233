"""The store's groups part: JoinGroup, SyncGroup, Heartbeat, LeaveGroup, and the timer.

Each log partition has a sans-IO ``GroupCoordinator`` (offsetlog/group/). A request runs the
coordinator under the partition's lock and queues the records it returns in the same lock
hold, so the log holds them in the order the coordinator decided. The request's answer (and
any parked answers the call completed) are delivered only once those records are durable: a
member is never told of a generation the log could still lose.

Answers are the coordinator's response objects; a Kafka error is in ``response.error``
rather than raised, because some errors carry data the member needs (a JoinGroup answered
with ``MemberIdRequiredError`` carries the member id to rejoin with).
"""

from __future__ import annotations

import logging
import threading
from concurrent.futures import Future
from typing import Callable, Iterable

from offsetlog.errors import StoreClosedError
from offsetlog.group import GroupDescription, MemberIdentity, Result
from offsetlog.group.migration import Migration
from offsetlog.partitioner import partition_for
from offsetlog.store import background
from offsetlog.store.commit_queue import PartitionWriter, QueueItem
from offsetlog.store.consumer_groups import ConsumerGroups
from offsetlog.store.futures import running_future
from offsetlog.store.part import StoreCore, StorePart
from offsetlog.validation import check_group_id, check_time_ms

#: real-time seconds between the timer thread's looks at the coordinators' deadlines; the
#: deadlines themselves are in the store clock's time
GROUP_TIMER_INTERVAL_S = 0.05

log = logging.getLogger("offsetlog.groups")


def _publish_steady(part: PartitionWriter, group_id: str, member_id: str,
                    result: Result) -> None:
    """(under ``part.lock``, in the heartbeat's compute) Put ``member_id`` on the partition's
    steady board if the coordinator has just answered its heartbeat with no error, in a
    Stable group, with no records and nothing queued before it (its answer goes out at once:
    ``GroupCommitter.submit_computed``): its next heartbeats and commits are passed there,
    natively, until the coordinator's next change (offsetlog/log/_native: ``SteadyBoard``)."""
    if result.records or result.response is None or result.response.error is not None:
        return
    if not part.nothing_pending():
        return
    steady = part.coordinator.steady_member(group_id, member_id)
    if steady is not None:
        part.steady.publish(group_id, member_id, *steady)


class Groups(StorePart):
    """The store's part for the group protocol: each log partition's coordinator is driven
    from here, under that partition's lock, and its records go through the store's
    ``GroupCommitter``. Owns the parked requests and the timer thread."""

    def __init__(self, core: StoreCore) -> None:
        super().__init__(core)
        self._requests: dict[tuple[int, int], Future] = {}
        self._requests_lock = threading.Lock()
        self._group_timer_stop = threading.Event()
        self.timer = background.start("offsetlog-group-timer", lambda: background.every(
            self._group_timer_stop, GROUP_TIMER_INTERVAL_S, self.poll_groups,
            f"{self.path}: group timer pass", log))
        #: the consumer group protocol's groups (KIP-848), beside the classic ones
        self.consumer = ConsumerGroups(core, deliver_classic=self._deliver_responses)
        #: each partition's two coordinators, linked: a group id's requests reach whichever
        #: has the group, and groups change protocol (offsetlog.group.migration)
        self._migrations = self.consumer.migrations

    def migration(self, part: PartitionWriter) -> Migration:
        """``part``'s classic and consumer-protocol coordinators, linked (the retention
        pass judges the groups of both)."""
        return self._migrations[part.index]

    def _part_of(self, group_id: str) -> PartitionWriter:
        return self._parts[partition_for(check_group_id(group_id), len(self._parts))]

    # -- requests ------------------------------------------------------------------------

    # The requests' defaults and documentation are OffsetStore's, which calls these.

    def join_group(self, group_id: str, *, protocols: Iterable[tuple[str, bytes]],
                   member_id: str, group_instance_id: str | None, client_id: str,
                   client_host: str, session_timeout_ms: int, rebalance_timeout_ms: int | None,
                   protocol_type: str, require_known_member_id: bool) -> Future:
        protocols = list(protocols)
        topics = {name: v["partitions"] for name, v in self._topics().items()}
        return self._group_request(group_id, lambda m, now: m.join_group(
            group_id, topics=topics, member_id=member_id, group_instance_id=group_instance_id,
            client_id=client_id, client_host=client_host,
            session_timeout_ms=session_timeout_ms, rebalance_timeout_ms=rebalance_timeout_ms,
            protocol_type=protocol_type, protocols=protocols,
            require_known_member_id=require_known_member_id, now_ms=now))

    def sync_group(self, group_id: str, *, member_id: str, generation_id: int,
                   group_instance_id: str | None, protocol_type: str | None,
                   protocol_name: str | None, assignments: dict[str, bytes] | None) -> Future:
        return self._group_request(group_id, lambda m, now: m.sync_group(
            group_id, member_id=member_id, generation_id=generation_id,
            group_instance_id=group_instance_id, protocol_type=protocol_type,
            protocol_name=protocol_name, assignments=assignments, now_ms=now))

    def heartbeat(self, group_id: str, *, member_id: str, generation_id: int,
                  group_instance_id: str | None) -> Future:
        def call(m: Migration, now: int) -> Result:
            result = m.heartbeat(group_id, member_id=member_id, generation_id=generation_id,
                                 group_instance_id=group_instance_id, now_ms=now)
            _publish_steady(self._part_of(group_id), group_id, member_id, result)
            return result
        return self._group_request(group_id, call)

    def leave_group(self, group_id: str, *, member_id: str,
                    members: Iterable[MemberIdentity] | None) -> Future:
        members = None if members is None else list(members)
        return self._group_request(group_id, lambda m, now: m.leave_group(
            group_id, member_id=member_id, members=members, now_ms=now))

    def describe_group(self, group_id: str) -> GroupDescription | None:
        """State, generation, protocol, leader and members of a managed group, or None."""
        self._check_open()
        part = self._part_of(group_id)
        with part.lock:
            return part.coordinator.describe_group(group_id)

    def list_groups(self) -> list[tuple[str, str, str]]:
        """``(group_id, state, protocol_type)`` of every group, sorted: the coordinators'
        groups, and groups that only have offsets (standalone consumers: committed, or
        pending in an open transaction) as Kafka lists them, its *simple groups*: ``Empty``
        with protocol type ``""``."""
        self._check_open()
        out = []
        for part in self._parts:
            with part.lock:
                managed = set()
                for gid in part.coordinator.group_ids():
                    d = part.coordinator.describe_group(gid)
                    if d is not None:
                        managed.add(gid)
                        out.append((gid, str(d.state), d.protocol_type or ""))
                simple = part.table.offsets.keys() | part.table.txn.keys.keys()
                out.extend((gid, "Empty", "") for gid in simple if gid not in managed)
        return sorted(out)

    def poll_groups(self, now_ms: int | None = None) -> None:
        """Fire the coordinators' due deadlines now (the timer thread does this on its own;
        tests with a manual clock call it after advancing the clock)."""
        self._check_open()
        now = self._clock() if now_ms is None else check_time_ms(now_ms)
        for part in self._parts:
            deadline = part.coordinator.next_deadline()
            if deadline is not None and deadline <= now:
                self._run_coordinator(part, lambda c, t: c.poll(t), now)

    # -- plumbing ------------------------------------------------------------------------

    def _topics(self) -> dict[str, dict]:
        """The registered topics (the wire server's), every partition's."""
        out: dict[str, dict] = {}
        for part in self._parts:
            with part.lock:
                out.update(part.table.topics)
        return out

    def _group_request(self, group_id: str, call: Callable[[Migration, int], Result]
                       ) -> Future:
        """A classic request, through the partition's ``Migration`` (a consumer group of that
        id takes classic members too)."""
        self._check_open()
        part = self._part_of(group_id)
        fut = running_future()
        migration = self._migrations[part.index]
        self._run_coordinator(part, lambda _c, now: call(migration, now), self._clock(), fut)
        return fut

    def _run_coordinator(self, part: PartitionWriter, call, now: int,
                         fut: Future | None = None) -> None:
        def compute():
            result = call(part.coordinator, now)
            if fut is not None and result.request_id is not None:
                with self._requests_lock:
                    self._requests[(part.index, result.request_id)] = fut
            return result.records, result

        try:
            self._writer.submit_computed(part, compute, now,
                                         lambda item: self._deliver(part, item))
        except BaseException as e:
            if fut is None:
                raise
            fut.set_exception(e)

    def _deliver(self, part: PartitionWriter, item: QueueItem) -> None:
        result: Result = item.result
        if result is None:
            return
        self._deliver_responses(part, result.responses, item.error)

    def _deliver_responses(self, part: PartitionWriter, responses, error) -> None:
        """Answer the parked futures of ``responses`` (or fail them with ``error``)."""
        item_error = error
        for response in responses:
            with self._requests_lock:
                fut = self._requests.pop((part.index, response.request_id), None)
            if fut is None:
                continue
            if item_error is not None:
                fut.set_exception(item_error)
            else:
                fut.set_result(response)

    def stop(self) -> None:
        """On close: stop the timer and answer every parked request (not available)."""
        self._group_timer_stop.set()
        if self.timer is not threading.current_thread():
            self.timer.join()
        self.consumer.stop()
        now = self._clock()
        for part in self._parts:
            try:
                self._run_coordinator(part, lambda c, t: c.unload(now_ms=t), now)
            except Exception:
                pass  # a failed store: parked requests are failed by fail_parked_requests

    def fail_parked_requests(self) -> None:
        """After the final drain: whatever is still unanswered will never be."""
        with self._requests_lock:
            leftover, self._requests = self._requests, {}
        for fut in leftover.values():
            if not fut.done():
                fut.set_exception(StoreClosedError("the store closed before the group "
                                                   "request completed"))
