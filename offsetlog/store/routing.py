"""Where a commit goes and who may make it: a group's partition and the fencing checks.

A group's ``Route`` (``_native.Route``, made once per group and cached by the
``CommitRouter``) is its ``PartitionWriter`` and, called, the check of its standalone
commits. Fencing checks run under the partition's lock, in the same hold that queues or
writes the commit, so no generation change can slip between the check and the commit's
place in the log.

The usual call (a group committing on its own: generation -1, no member; plain offsets; no
timeout) enters natively from ``OffsetStore.commit_sync`` and ``commit_async``
(``CommitRouter.commit_sync``/``commit_async``, native/src/route.rs): route, clock, one-pass
check, and the lone commit or the queue, with the route's check run in their lock hold. Every
other call comes through ``CommitRouter.check``.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Callable

from offsetlog.errors import IllegalGenerationError, UnknownMemberIdError
from offsetlog.log import _native, records
from offsetlog.log.records import offset_commit_fields
from offsetlog.partitioner import partition_for
from offsetlog.store.commit_queue import PartitionWriter
from offsetlog.types import OffsetAndMetadata, TopicPartition
from offsetlog.validation import MAX_TIME_MS, check_group_id

Check = Callable[[], None]
Route = _native.Route

#: groups whose route the router keeps; about 500 bytes each
ROUTES_CACHED = 65_536


class CommitRouter(_native.RouterState):
    """Checks commit calls before anything is queued, and finds where each goes.

    The native base holds ``routes`` (group -> its ``Route``, a cache emptied when full:
    groups come and go), ``_keys`` (record keys shared by commits of one key:
    ``records.offset_commit_fields``), ``closed`` (the store's) and the usual call's entries
    (see the module)."""

    def __init__(self, parts: list[PartitionWriter], clock: Callable[[], int],
                 metadata_max_bytes: int, writer, min_offset: int = 0, *,
                 yield_at: int) -> None:
        self._parts = parts
        self._clock = clock
        self._metadata_max = metadata_max_bytes
        self._min_offset = min_offset
        # (the call limit is read at open: tests lower it for a store they then open)
        self._setup(writer, clock, records.MAX_CALL_BYTES, records.KEYS_CACHED,
                    records.PLAIN_COMMIT_BOUND, metadata_max_bytes, TopicPartition,
                    OffsetAndMetadata, yield_at)
        # Each partition's steady board (its coordinator publishes on it; the wire's request
        # loops pass steady members' heartbeats and commits there), all closed with the store.
        boards = _native.SteadyBoards(len(parts))
        self._set_steady(boards)
        for i, part in enumerate(parts):
            part.steady = boards.partition(i)
        #: the open transactions the wire's TxnOffsetCommit is written in without a Python
        #: call (the store's ``Transactions`` publishes and clears them)
        self.txn_board = _native.TxnBoard()
        self._set_txn_board(self.txn_board)

    def route(self, group_id) -> Route:
        """``group_id``'s route, cached; raises for a bad group id."""
        route = self.routes.get(group_id) if group_id.__class__ is str else None
        if route is None:
            if len(self.routes) >= ROUTES_CACHED:
                self.routes.clear()
            route = self.routes[group_id] = make_route(self._parts, group_id, self._clock)
        return route

    def check(self, group_id, offsets, generation_id, member_id, group_instance_id,
              transactional: bool = False, retention_time_ms: int | None = None
              ) -> tuple[PartitionWriter, tuple, int, int, Check]:
        """``(the group's PartitionWriter, the checked offsets as record fields, their size
        bound, now, precheck)``, where ``precheck`` is the fencing check to run under the
        partition's lock. Raises for bad arguments; changes nothing. With
        ``retention_time_ms`` (checked: ``check_retention_time``), the offsets' records carry
        the expire timestamp ``now`` + that, at most ``MAX_TIME_MS``."""
        route = self.routes.get(group_id) if group_id.__class__ is str else None
        if route is None:  # (not cached: ``route`` makes and caches it, or raises)
            route = self.route(group_id)
        part = route.part
        now = self._clock()
        expire = None if retention_time_ms is None else min(now + retention_time_ms, MAX_TIME_MS)
        fields, nbytes = offset_commit_fields(group_id, offsets, now, self._metadata_max,
                                              self._keys, self._min_offset, expire)
        precheck: Check = route
        if transactional or not (generation_id.__class__ is int and generation_id == -1
                                 and member_id == "" and group_instance_id is None):
            precheck = fencing(part, group_id, generation_id, member_id, group_instance_id,
                               now, transactional, offsets)
        return part, fields, nbytes, now, precheck


def make_route(parts: list[PartitionWriter], group_id: str, clock: Callable[[], int]) -> Route:
    """``group_id``'s partition, and the check of its standalone commits (generation -1, no
    member): Kafka's simple consumer, valid unless a managed group of that name exists, or a
    KIP-848 group with members (``_native.Route``)."""
    check_group_id(group_id)
    return Route(parts[partition_for(group_id, len(parts))], group_id, clock)


def _raise(error: Exception | None) -> None:
    if error is not None:
        raise error


#: a generation the steady board can hold (Kafka's is an int32)
_I32_MIN, _I32_MAX = -(1 << 31), (1 << 31) - 1


def fencing(part: PartitionWriter, group_id: str, generation_id: int, member_id: str,
            group_instance_id: str | None, now_ms: int, transactional: bool = False,
            partitions: Iterable | None = None) -> Check:
    """The group coordinator's check of a member's commit (Kafka's order of checks; see
    ``GroupCoordinator.validate_offset_commit``) of ``partitions`` (``(topic, partition)``
    pairs, or a mapping with them as keys; a KIP-848 member's commit at an older epoch is
    judged by them)."""
    if not isinstance(generation_id, int) or isinstance(generation_id, bool):
        raise IllegalGenerationError(f"generation_id must be an int, not {generation_id!r}")
    if not isinstance(member_id, str):
        raise UnknownMemberIdError(f"member_id must be a str, not {member_id!r}")
    if group_instance_id is not None and not isinstance(group_instance_id, str):
        raise UnknownMemberIdError(
            f"group_instance_id must be a str or None, not {group_instance_id!r}")
    coord = part.coordinator
    # The usual standalone call (generation -1 as a plain int, no member, no instance) takes
    # the route's check; an equal call of other types arrives here.
    standalone = generation_id == -1 and not member_id and group_instance_id is None

    consumer = part.consumer_coordinator
    # a steady member (the coordinator published it: ``_native.SteadyBoard``) passes there,
    # its commit counted as its heartbeat, with no call into the coordinator
    steady = part.steady if _I32_MIN <= generation_id <= _I32_MAX else None

    def check() -> None:
        if steady is not None and steady.check(group_id, member_id, generation_id,
                                               group_instance_id, now_ms):
            return
        if consumer is not None and group_id in consumer.groups:
            if transactional and standalone:
                # a TxnOffsetCommit naming no member (v0-2 cannot): Kafka does not check it
                # against the group's members; its producer's transaction fences it
                return
            # a KIP-848 group: the member and its epoch (generation_id carries it, as
            # OffsetCommit's generation_id_or_member_epoch does), checked in this same hold
            _raise(consumer.check_offset_request(group_id, member_id, generation_id,
                                                 partitions=partitions))
            return
        known = coord.has_group(group_id)
        if standalone and not known:
            return
        # only a group the coordinator does not hold can be Kafka's simple group, so only then
        # does the table need asking
        table = part.table
        holds = not known and bool(table.offsets.get(group_id) or table.txn.keys.get(group_id))
        coord.validate_offset_commit(group_id, member_id=member_id,
                                     group_instance_id=group_instance_id,
                                     generation_id=generation_id, now_ms=now_ms,
                                     transactional=transactional, holds_offsets=holds)

    return check
