"""Groups changing protocol: KIP-848's online migration between a classic group and a consumer
group (``group.consumer.migration.policy``), across the two sans-IO coordinators of one log
partition.

A group id names at most one group at a time, classic (``GroupCoordinator``) or consumer
(``ConsumerGroupCoordinator``). The store drives both through this module, under the
partition's lock, so that a request to a group id reaches whichever coordinator has it and a
group can move from one to the other within one request:

* **Upgrade**: a consumer-protocol member (ConsumerGroupHeartbeat, epoch 0) joining a classic
  group. An Empty classic group is simply deleted (a GROUP_METADATA tombstone) and a consumer
  group made, new as any other (``new_group``: epoch 1, so the member joins at 2). One with
  members becomes a consumer group if the policy allows an upgrade (``bidirectional`` or
  ``upgrade``), its protocol type is "consumer" and it has no more
  members than ``group.consumer.max.size``; else the heartbeat is answered GROUP_ID_NOT_FOUND.
  The classic group's generation becomes the group epoch and every member's epoch, each
  member's assignment its target and current assignment; its members live on as classic
  members of the consumer group (``offsetlog.group.consumer.classic``); JoinGroups and
  SyncGroups parked in the classic group are answered REBALANCE_IN_PROGRESS. Records, in
  Kafka's order: the classic tombstone, then the consumer group's records
  (``group_records``), then the joining member's.
* **Downgrade**: when the last consumer-protocol member of a consumer group leaves or is
  fenced and classic members remain, the group becomes a classic group again if the policy
  allows a downgrade (``bidirectional`` or ``downgrade``) and they are no more than
  ``group.max.size``: the consumer group's tombstones, then the classic group's
  GROUP_METADATA (Stable, generation = the group epoch, each member's target assignment
  serialised in its subscription's version, the protocol by vote), and a rebalance starts
  (its members are told REBALANCE_IN_PROGRESS on their next heartbeat). A JoinGroup for an
  *empty* consumer group deletes it (its tombstones) and the classic coordinator takes the
  request.
* Classic requests (JoinGroup, SyncGroup, Heartbeat, LeaveGroup) for a consumer group with
  members go to the consumer coordinator's classic handlers.

Records: the consumer coordinator's ``(kind, key, value)`` tuples and the classic
coordinator's log records meet here; :func:`log_records` makes one batch of them.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field

from offsetlog.group.cleanup import ExpiryResult
from offsetlog.group.consumer import classic as classic_members
from offsetlog.group.consumer.coordinator import ConsumerGroupCoordinator, ConsumerResult
from offsetlog.group.consumer.group import (
    CLASSIC_GROUP_METADATA,
    ConsumerGroup,
    group_records,
    group_tombstones,
    new_group,
    new_group_records,
)
from offsetlog.group.consumer.member import STABLE, ClassicMetadata, ConsumerMember, given_at
from offsetlog.group.consumer_protocol import PROTOCOL_TYPE, decode_assignment, decode_subscription
from offsetlog.group.coordinator import GroupCoordinator
from offsetlog.group.errors import GroupIdNotFoundError, NonEmptyGroupError
from offsetlog.group.expiry import RetentionView
from offsetlog.group.fencing import check_unsubscribed
from offsetlog.group.group import Group
from offsetlog.group.member import Member
from offsetlog.group.responses import MemberIdentity, Result
from offsetlog.group.schema import group_value
from offsetlog.group.state import EMPTY
from offsetlog.group.state import STABLE as CLASSIC_STABLE
from offsetlog.log.records import CONSUMER_GROUP_KINDS, consumer_group_record, group_metadata


def log_records(records: Iterable[tuple], start: int = 0) -> list:
    """The consumer coordinator's ``(kind, key, value)`` records (a classic group's
    GROUP_METADATA among them) as log records, offset deltas from ``start``."""
    out = []
    for i, (kind, key, value) in enumerate(records, start):
        if kind == CLASSIC_GROUP_METADATA:
            out.append(group_metadata(i, key[0], value))
        else:
            out.append(consumer_group_record(i, CONSUMER_GROUP_KINDS[kind], key, value))
    return out


def _renumbered(records: Iterable) -> list:
    return [(i, *r[1:]) for i, r in enumerate(records)]


@dataclass
class _Takeover:
    """A group the joining consumer-protocol member takes over (see ``on_new_group``)."""

    group: ConsumerGroup
    classic: GroupCoordinator
    tombstone: bool
    records: list = field(default_factory=list)
    #: answers to the classic group's parked requests, once committed
    responses: list = field(default_factory=list)

    def commit(self) -> list:
        out = Result()
        self.classic.give_up(self.group.group_id, out)
        self.responses.extend(out.responses)
        head = [(CLASSIC_GROUP_METADATA, (self.group.group_id,), None)] if self.tombstone else []
        return head + self.records


class Migration:
    """The classic and the consumer coordinator of one log partition, linked."""

    def __init__(self, classic: GroupCoordinator, consumer: ConsumerGroupCoordinator) -> None:
        self.classic = classic
        self.consumer = consumer
        self._takeovers: list[_Takeover] = []
        consumer.on_new_group = self._on_new_group
        consumer.on_fence = self._on_fence

    # -- the consumer protocol -----------------------------------------------------------

    def consumer_heartbeat(self, group_id: str, *, now_ms: int, **request) -> ConsumerResult:
        """``ConsumerGroupCoordinator.heartbeat``, upgrading a classic group of that id; the
        result's ``classic_responses`` answer requests parked in it."""
        self._takeovers.clear()
        result = self.consumer.heartbeat(group_id, now_ms=now_ms, **request)
        for t in self._takeovers:
            result.classic_responses.extend(t.responses)
        self._takeovers.clear()
        return result

    def _on_new_group(self, group_id: str, topics: Mapping[str, int]) -> _Takeover | None:
        old = self.classic.group(group_id)
        if old is None:
            return None
        if old.state is EMPTY:  # simply taken over
            group = new_group(group_id)
            takeover = _Takeover(group, self.classic, old.generation > 0,
                                 records=new_group_records(group))
        else:
            takeover = _Takeover(self._upgraded(old, topics), self.classic, True)
            takeover.records = group_records(takeover.group)
        self._takeovers.append(takeover)
        return takeover

    def _upgraded(self, old: Group, topics: Mapping[str, int]) -> ConsumerGroup:
        cfg = self.consumer.config
        max_size = cfg.max_size
        if (not cfg.upgrade_enabled or old.protocol_type != PROTOCOL_TYPE
                or (max_size is not None and len(old.members) > max_size)):
            raise GroupIdNotFoundError(f"Group {old.group_id} is not a consumer group.")
        gen = old.generation
        group = ConsumerGroup(old.group_id, group_epoch=gen, assignment_epoch=gen)
        for m in old.members.values():
            try:
                sub = decode_subscription(m.metadata(old.protocol or m.protocols[0][0]))
                assigned = frozenset((tp.topic, tp.partition)
                                     for tp in decode_assignment(m.assignment)
                                     if tp.topic in topics)
            except (ValueError, KeyError):
                raise GroupIdNotFoundError(
                    f"Cannot upgrade the classic group {old.group_id} to consumer group because "
                    "the embedded consumer protocol is malformed.") from None
            group.put_member(ConsumerMember(
                m.member_id, instance_id=m.group_instance_id, rack_id=sub["rack_id"],
                client_id=m.client_id, client_host=m.client_host,
                subscribed_topics=tuple(sorted(set(sub["topics"]))),
                rebalance_timeout_ms=m.rebalance_timeout_ms, state=STABLE, member_epoch=gen,
                previous_member_epoch=gen, assigned=assigned,
                # (given at the classic generation, as Kafka 4.4 records them: a new process
                # of a static member keeps them, KIP-1251)
                assignment_epochs=given_at(assigned, gen),
                classic=ClassicMetadata(m.session_timeout_ms, tuple(m.protocols))))
            group.targets[m.member_id] = assigned
        return group

    def _on_fence(self, group: ConsumerGroup, member_id: str, records: list) -> bool:
        """Downgrade ``group`` instead of removing ``member_id`` from it, if this is the
        downgrade's moment and the settings allow it."""
        leaving = group.members.get(member_id)
        rest = [m for mid, m in group.members.items() if mid != member_id]
        if leaving is None or leaving.uses_classic_protocol or not self._may_downgrade(rest):
            return False
        self._downgrade(group, rest, records, rebalance=True)
        return True

    def _may_downgrade(self, members: list) -> bool:
        limit = self.classic.config.max_size
        return (bool(members) and all(m.uses_classic_protocol for m in members)
                and self.consumer.config.downgrade_enabled
                and (limit is None or len(members) <= limit))

    def _downgrade(self, group: ConsumerGroup, members: list, records: list, *,
                   rebalance: bool, generation: int | None = None) -> None:
        """``group`` becomes a classic group of ``members`` (all classic), Stable at
        ``generation`` (by default its group epoch) with their targets as assignments; a
        rebalance starts if ``rebalance``."""
        now = self.consumer.now_ms
        classic = Group(group.group_id, state=CLASSIC_STABLE, state_timestamp=now,
                        generation=group.group_epoch if generation is None else generation,
                        protocol_type=PROTOCOL_TYPE)
        for m in members:
            classic.add(Member(m.member_id, m.instance_id, m.client_id, m.client_host,
                               m.classic.session_timeout_ms, m.rebalance_timeout_ms,
                               m.classic.protocols))
        classic.protocol = classic.select_protocol()
        for m in members:
            classic.members[m.member_id].assignment = classic_members.assignment_bytes(
                m, group.targets.get(m.member_id, frozenset()))
        self.consumer.drop(group.group_id)
        records.extend(group_tombstones(group))
        records.append((CLASSIC_GROUP_METADATA, (group.group_id,), group_value(classic)))
        self.classic.adopt(classic, now, rebalance=rebalance)

    # -- the classic protocol ------------------------------------------------------------

    def _consumer_group(self, group_id: str, now_ms: int, records: list):
        """Fire both coordinators' deadlines, then the consumer group of ``group_id`` with
        members, if there is one."""
        self.consumer.advance(now_ms, records)
        group = self.consumer.group(group_id)
        return group if group is not None and group.members else None

    def _finish(self, out: Result, records: list) -> Result:
        out.records = _renumbered(log_records(records) + out.records)
        return out

    def join_group(self, group_id: str, *, topics: Mapping[str, int], now_ms: int,
                   **request) -> Result:
        """``GroupCoordinator.join_group``'s arguments (and the topics that exist)."""
        records: list = []
        group = self._consumer_group(group_id, now_ms, records)
        cfg = self.classic.config
        session = request["session_timeout_ms"]
        # Kafka checks the session timeout before it looks at the group: a JoinGroup refused
        # for it changes no group, of either kind
        valid = cfg.min_session_timeout_ms <= session <= cfg.max_session_timeout_ms
        if group is None or not valid:
            empty = self.consumer.group(group_id)
            if valid and empty is not None and not empty.members:  # replaced by a classic one
                records.extend(group_tombstones(empty))
                self.consumer.drop(group_id)
            return self._finish(self.classic.join_group(group_id, now_ms=now_ms, **request),
                                records)
        out = self.classic.begin_request(now_ms)
        rebalance = request.get("rebalance_timeout_ms")
        protocols = tuple((n, bytes(m)) for n, m in request["protocols"])
        instance_id = request.get("group_instance_id")
        held_by = group.members.get(group.static.get(instance_id, "")) if instance_id else None
        generation = group.group_epoch  # (the classic group's, should this join downgrade)
        stale = False

        def replacing(member) -> bool:
            """A classic process takes the place of the last consumer-protocol member (a
            static one): the group turns classic (Kafka's
            validateOnlineDowngradeWithReplacedMemberId)."""
            return (held_by is not None and not held_by.uses_classic_protocol
                    and member.member_id != held_by.member_id
                    and self._may_downgrade(list(group.members.values())))

        def unsettled(member) -> bool:
            # a downgrade with a target behind the group epoch (a leave bumped it, or this
            # join's new subscription did) leaves the target alone and rebalances, as Kafka
            # 4.4 (KAFKA-20273); the answer names the process's unreconciled epoch, 0
            nonlocal stale
            stale = replacing(member) and group.assignment_epoch < group.group_epoch
            return stale

        answer = classic_members.join(
            self.consumer, group, request_id=out.request_id, member_id=request["member_id"],
            group_instance_id=request.get("group_instance_id"),
            client_id=request.get("client_id", ""), client_host=request.get("client_host", ""),
            session_timeout_ms=session,
            rebalance_timeout_ms=session if rebalance is None else rebalance,
            protocol_type=request.get("protocol_type", PROTOCOL_TYPE), protocols=protocols,
            require_known_member_id=request.get("require_known_member_id", False),
            topics=topics, records=records, unsettled=unsettled)
        out.responses.append(answer)
        joined = group.members.get(answer.member_id)
        if answer.error is None and joined is not None and replacing(joined):
            # the group is classic again, at the generation it had: without a rebalance when
            # its target was current, the JoinGroup answered with the group's generation,
            # which its SyncGroup then names; else with one (judged in
            # tests/kafka/test_diff_consumer_group_migration.py)
            self._downgrade(group, list(group.members.values()), records,
                            rebalance=stale, generation=generation)
        return self._finish(out, records)

    def sync_group(self, group_id: str, *, now_ms: int, **request) -> Result:
        records: list = []
        group = self._consumer_group(group_id, now_ms, records)
        if group is None:
            return self._finish(self.classic.sync_group(group_id, now_ms=now_ms, **request),
                                records)
        out = self.classic.begin_request(now_ms)
        out.responses.append(classic_members.sync(
            self.consumer, group, request_id=out.request_id, member_id=request["member_id"],
            group_instance_id=request.get("group_instance_id"),
            generation_id=request["generation_id"],
            protocol_type=request.get("protocol_type"),
            protocol_name=request.get("protocol_name")))
        return self._finish(out, records)

    def heartbeat(self, group_id: str, *, now_ms: int, **request) -> Result:
        records: list = []
        group = self._consumer_group(group_id, now_ms, records)
        if group is None:
            return self._finish(self.classic.heartbeat(group_id, now_ms=now_ms, **request),
                                records)
        out = self.classic.begin_request(now_ms)
        out.responses.append(classic_members.heartbeat(
            self.consumer, group, request_id=out.request_id, member_id=request["member_id"],
            group_instance_id=request.get("group_instance_id"),
            generation_id=request["generation_id"]))
        return self._finish(out, records)

    def leave_group(self, group_id: str, *, now_ms: int, member_id: str = "",
                    group_instance_id: str | None = None,
                    members: Iterable[MemberIdentity] | None = None) -> Result:
        records: list = []
        group = self._consumer_group(group_id, now_ms, records)
        if group is None:
            return self._finish(self.classic.leave_group(
                group_id, member_id=member_id, group_instance_id=group_instance_id,
                members=members, now_ms=now_ms), records)
        out = self.classic.begin_request(now_ms)
        idents = (list(members) if members is not None
                  else [MemberIdentity(member_id, group_instance_id)])
        out.responses.append(classic_members.leave(
            self.consumer, group, request_id=out.request_id, members=idents, records=records))
        return self._finish(out, records)

    # -- retention -----------------------------------------------------------------------

    def expire_offsets(self, offsets: Mapping[str, Mapping[tuple[str, int], tuple]], *,
                       now_ms: int, retention_ms: int,
                       pending: Mapping[str, set] | None = None,
                       delete_groups: bool = True) -> ExpiryResult:
        """The retention pass of the partition's groups of both kinds
        (``GroupCoordinator.expire_offsets``'s arguments). A consumer group's offsets of
        topics no member subscribes to expire ``retention_ms`` after their last commit, in
        any state (``RetentionView.of_consumer_group``: Kafka's ``ConsumerGroup``); an Empty
        consumer group left without offsets, and without pending transactional ones, is
        deleted (its tombstones: Kafka's ``maybeDeleteGroup``). No deadline fires here (the
        caller keeps only the records), of either coordinator."""
        consumer = self.consumer

        def view(group_id: str) -> RetentionView | None:
            group = consumer.group(group_id)
            return None if group is None else RetentionView.of_consumer_group(
                group.subscribed_topics())

        out = self.classic.expire_offsets(offsets, now_ms=now_ms, retention_ms=retention_ms,
                                          pending=pending, others=view,
                                          delete_groups=delete_groups)
        if not delete_groups:
            return out
        tombstones: list = []
        for group_id, group in sorted(consumer.groups.items()):
            left = out.remaining.get(group_id, 0)
            if group.members or left or (pending and pending.get(group_id)):
                continue
            tombstones.extend(group_tombstones(group))
            consumer.drop(group_id)
        if tombstones:
            out.records = _renumbered(out.records + log_records(tombstones))
        return out

    # -- deletes (OffsetDelete, DeleteGroups) --------------------------------------------

    def check_offset_delete(self, group_id: str, partitions: Iterable) -> None:
        """Kafka's OffsetDelete rule (KIP-496) for whichever coordinator has ``group_id``: a
        consumer group refuses the partitions of topics a member subscribes to (by name or a
        regex's resolution), in any state (an Empty one subscribes to none); a classic group
        as ``GroupCoordinator.check_offset_delete``.

        :raises GroupSubscribedToTopicError: a requested topic is subscribed; nothing deleted
        :raises NonEmptyGroupError: a classic group with members, not a consumer group
        """
        group = self.consumer.group(group_id)
        if group is None:
            self.classic.check_offset_delete(group_id, partitions)
            return
        check_unsubscribed(f"group {group_id!r}", group.subscribed_topics(), partitions)

    def delete_group(self, group_id: str, *, now_ms: int, logged_members: bool) -> Result:
        """Delete ``group_id``, Empty, whichever coordinator has it: the records of a
        consumer group tombstoned (``group_tombstones``), a classic group's GROUP_METADATA
        (``GroupCoordinator.delete_group``); the caller tombstones its offsets.

        ``logged_members``: the log as written so far still holds members of the group. The
        caller runs at the head of the partition's queue, where calls queued behind it are
        already computed: a group their records empty is not Empty yet at this point of the
        log, and deleting it would put its tombstones before them.

        :raises NonEmptyGroupError: the group has members (here or in the log so far)
        """
        group = self.consumer.group(group_id)
        if (group is not None and group.members) or logged_members:
            raise NonEmptyGroupError(f"group {group_id!r} has members; it can be deleted once "
                                     "they have left")
        if group is None:
            return self.classic.delete_group(group_id, now_ms=now_ms)
        self.consumer.drop(group_id)
        out = Result()
        out.records = log_records(group_tombstones(group))
        return out
