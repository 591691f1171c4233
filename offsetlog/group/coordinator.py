"""The classic group coordinator as a sans-IO state machine (Kafka's ``GroupCoordinator``).

Theory of operation
-------------------

No I/O, no threads, no clock. Every method takes ``now_ms`` and returns a
:class:`~offsetlog.group.responses.Result`: the records to append and the responses to send.
Time moves only through ``now_ms`` (a value older than one already seen counts as that one, so
a wall clock stepping back cannot reorder events). Deadlines are data in a timer queue:

* the **join deadline** of a rebalancing group: the initial rebalance delay of a new group
  (``initial_rebalance_delay_ms``, extended while new members keep arriving, within the
  rebalance timeout) or the rebalance timeout (longest of the members');
* the **sync deadline** after a join phase: members that have not sent SyncGroup by the
  rebalance timeout are evicted and the group rebalances (also when the one that has not is
  the old member id of a static member replaced since, see ``Group.replace_static_member``);
* each member's **session deadline**: no heartbeat (or commit, JoinGroup, SyncGroup) for its
  session timeout evicts it and rebalances the group. A member parked in a JoinGroup or
  SyncGroup cannot heartbeat, so a lapse then does not evict it (its session restarts when it
  is answered), except a member new to this rebalance, which is dropped after
  ``new_member_join_timeout_ms``;
* each **pending member id** (KIP-394) lapses after the session timeout.

Every call first fires the deadlines due at ``now_ms``, earliest first, each at its own deadline
(so calling :meth:`poll` late gives the same outcome as calling it on time). :meth:`poll` fires
them alone; :meth:`next_deadline` says when it is next worth calling.

A JoinGroup is usually *parked*: the join phase waits for every known member (or the deadline),
and the responses to all parked JoinGroups come out of whichever call completes it. A follower's
SyncGroup is parked until the leader's SyncGroup brings the assignment. See
``offsetlog.group.responses`` for how responses name the request they answer.

Records and state: membership is soft state; only Stable and Empty generations (and deletes)
are written as GROUP_METADATA records, so a fresh coordinator fed the records through
:meth:`replay` describes a Stable or Empty group identically (docs/GROUPS.md, "What is
written to the log", says what is written when, and why not every membership change).

One coordinator serves the groups of one log partition (Kafka's coordinator shard): the
records of one Result are one batch for that partition. States and transitions:
``offsetlog.group.state``; fencing: ``fencing``; retention: ``expiry``; the retention
pass, DeleteGroups and OffsetDelete: ``cleanup``.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping

from offsetlog.errors import InvalidGroupIdError, RebalanceInProgressError, UnknownMemberIdError
from offsetlog.group.arguments import (
    check_assignments,
    check_int,
    check_optional_str,
    check_protocols,
    check_str,
)
from offsetlog.group.cleanup import GroupCleanup
from offsetlog.group.errors import CoordinatorNotAvailableError, InconsistentGroupProtocolError
from offsetlog.group.fencing import check_generation, check_member, check_offset_commit
from offsetlog.group.group import Group
from offsetlog.group.member import Member
from offsetlog.group.rebalance import JoinRequest
from offsetlog.group.responses import (
    GroupDescription,
    HeartbeatResponse,
    LeaveGroupResponse,
    LeaveMemberResponse,
    MemberDescription,
    MemberIdentity,
    Result,
    SyncGroupResponse,
)
from offsetlog.group.schema import group_value, load_group
from offsetlog.group.state import (
    COMPLETING_REBALANCE,
    DEAD,
    EMPTY,
    PREPARING_REBALANCE,
    STABLE,
    check_transition,
)
from offsetlog.group.timers import TIMER_PENDING, TIMER_SESSION
from offsetlog.log.records import GROUP_METADATA, OFFSET_COMMIT, Record, check_version


class GroupCoordinator(GroupCleanup):
    """Join, sync, heartbeat, leave, commit fencing and retention for the groups of one log
    partition. See the module docstring for the rules of the game.

    >>> from offsetlog.group import GroupConfig, GroupCoordinator
    >>> coordinator = GroupCoordinator(GroupConfig(member_id_factory=lambda p: p + "-1"))
    >>> r = coordinator.join_group("g", client_id="c", session_timeout_ms=10_000,
    ...                            protocols=[("range", b"")], now_ms=0)
    >>> r.response is None        # parked: a new group waits initial_rebalance_delay_ms
    True
    >>> r = coordinator.poll(3_000)
    >>> r.responses[0].member_id, r.responses[0].generation_id, r.responses[0].is_leader
    ('c-1', 1, True)
    >>> r = coordinator.sync_group("g", member_id="c-1", generation_id=1,
    ...                            assignments={"c-1": b"a"}, now_ms=3_001)
    >>> r.response.assignment, coordinator.describe_group("g").state
    (b'a', 'Stable')
    """

    def next_deadline(self) -> int | None:
        """Epoch ms of the earliest pending deadline (None if there is none): call :meth:`poll`
        then."""
        return self._timers.next_deadline()

    def poll(self, now_ms: int) -> Result:
        """Fire every deadline due at ``now_ms``; return the records and responses that causes
        (completed join phases, evictions, ...)."""
        out, _ = self._begin(now_ms, request=False, keep_steady=True)
        return out

    # -- JoinGroup -----------------------------------------------------------------------------

    def join_group(self, group_id: str, *, member_id: str = "",
                   group_instance_id: str | None = None, client_id: str = "",
                   client_host: str = "", session_timeout_ms: int,
                   rebalance_timeout_ms: int | None = None, protocol_type: str = "consumer",
                   protocols: Iterable[tuple[str, bytes]],
                   require_known_member_id: bool = False, now_ms: int) -> Result:
        """A member joins (or rejoins) ``group_id``.

        :param member_id: ``""`` for a member that has no id yet; the coordinator gives it one
            (``<client_id>-<uuid>``, or ``<group_instance_id>-<uuid>``)
        :param group_instance_id: makes the member static (KIP-345): rejoining with it replaces
            the previous member of that instance without a rebalance when the group is Stable
        :param session_timeout_ms: between the configured bounds, else InvalidSessionTimeout
        :param rebalance_timeout_ms: how long the group waits for this member to rejoin during a
            rebalance; defaults to ``session_timeout_ms``
        :param protocols: ``(name, metadata)`` pairs, most preferred first
        :param require_known_member_id: KIP-394: a new dynamic member first gets
            ``MemberIdRequiredError`` and its id, and must join again with it
        :return: a Result whose ``response`` is None while the JoinGroup is parked; its
            :class:`JoinGroupResponse` then comes from a later call
        """
        check_str("group_id", group_id)
        check_str("member_id", member_id)
        check_optional_str("group_instance_id", group_instance_id)
        check_str("client_id", client_id)
        check_str("client_host", client_host)
        check_str("protocol_type", protocol_type)
        check_int("session_timeout_ms", session_timeout_ms)
        if rebalance_timeout_ms is None:
            rebalance_timeout_ms = session_timeout_ms
        check_int("rebalance_timeout_ms", rebalance_timeout_ms)
        checked_protocols = check_protocols(protocols)
        out, now = self._begin(now_ms)
        req = JoinRequest(out.request_id, member_id, group_instance_id, client_id, client_host,
                          session_timeout_ms, rebalance_timeout_ms, protocol_type,
                          checked_protocols, bool(require_known_member_id))
        self._join(group_id, req, now, out)
        return out

    # -- SyncGroup -----------------------------------------------------------------------------

    def sync_group(self, group_id: str, *, member_id: str, generation_id: int,
                   group_instance_id: str | None = None, protocol_type: str | None = None,
                   protocol_name: str | None = None,
                   assignments: Mapping[str, bytes] | None = None, now_ms: int) -> Result:
        """A member asks for its assignment; the leader brings everyone's.

        :param assignments: from the leader: member id -> assignment bytes (members it leaves
            out get ``b""``); ignored from followers
        :param protocol_type: if given, must be the group's (else InconsistentGroupProtocol)
        :param protocol_name: if given, must be the generation's protocol
        :return: a Result; a follower's SyncGroup in CompletingRebalance is parked until the
            leader's arrives, and the leader's completes it and every parked one
        """
        check_str("group_id", group_id)
        check_str("member_id", member_id)
        check_int("generation_id", generation_id)
        check_optional_str("group_instance_id", group_instance_id)
        check_optional_str("protocol_type", protocol_type)
        check_optional_str("protocol_name", protocol_name)
        checked = check_assignments(assignments)
        out, now = self._begin(now_ms)
        rid = out.request_id
        group = self._groups.get(group_id)
        error = self._current_member_error(group, group_id, member_id, group_instance_id,
                                           generation_id, "sync-group")
        if group is not None:
            if error is None and ((protocol_type is not None
                                   and protocol_type != group.protocol_type)
                                  or (protocol_name is not None
                                      and protocol_name != group.protocol)):
                error = InconsistentGroupProtocolError(
                    f"sync-group: group {group_id!r} uses {group.protocol_type}/{group.protocol}"
                    f", not {protocol_type}/{protocol_name}", member_protocols={})
            elif error is None and group.state is EMPTY:
                error = UnknownMemberIdError(f"sync-group: group {group_id!r} is Empty")
            elif error is None and group.state is PREPARING_REBALANCE:
                error = RebalanceInProgressError(f"group {group_id!r} is rebalancing; rejoin")
        if error is not None:
            out.responses.append(SyncGroupResponse(rid, error))
            return out
        member = group.members[member_id]
        self._synced(group, member_id)
        if group.state is STABLE:
            out.responses.append(SyncGroupResponse(rid, None, group.protocol_type,
                                                   group.protocol, member.assignment))
            self._touch(group, member, now)
            return out
        # CompletingRebalance: park it; the leader's SyncGroup completes them all
        if member.sync_request is not None:
            out.responses.append(SyncGroupResponse(
                member.sync_request, RebalanceInProgressError("superseded by a newer SyncGroup")))
        member.sync_request = rid
        if group.leader == member_id:
            check_transition(group_id, group.state, STABLE)
            for mid, m in group.members.items():
                m.assignment = checked.get(mid, b"")
            group.transition_to(STABLE, now)
            self._record(out, group_id, group_value(group))
            for m in group.members.values():
                if m.sync_request is not None:
                    out.responses.append(SyncGroupResponse(m.sync_request, None,
                                                           group.protocol_type, group.protocol,
                                                           m.assignment))
                    m.sync_request = None
                    self._touch(group, m, now)
        return out

    @staticmethod
    def _current_member_error(group: Group | None, group_id: str, member_id: str,
                              group_instance_id: str | None, generation_id: int,
                              operation: str):
        """SyncGroup's and Heartbeat's shared checks: the group exists and is alive, and the
        caller is its member in its current generation. The error, or None."""
        if not group_id:
            return InvalidGroupIdError("group_id must not be empty")
        if group is None:
            return UnknownMemberIdError(f"{operation}: group {group_id!r} does not exist")
        if group.state is DEAD:
            return CoordinatorNotAvailableError(f"group {group_id!r} is being deleted; retry")
        return (check_member(group, member_id, group_instance_id, operation)
                or check_generation(group, generation_id, operation))

    # -- Heartbeat -----------------------------------------------------------------------------

    def heartbeat(self, group_id: str, *, member_id: str, generation_id: int,
                  group_instance_id: str | None = None, now_ms: int) -> Result:
        """A member says it is alive; the answer tells it whether to rejoin
        (``RebalanceInProgressError``) or that it is out of date (``IllegalGenerationError``,
        ``UnknownMemberIdError``, ``FencedInstanceIdError``)."""
        check_str("group_id", group_id)
        check_str("member_id", member_id)
        check_int("generation_id", generation_id)
        check_optional_str("group_instance_id", group_instance_id)
        out, now = self._begin(now_ms, keep_steady=True)
        group = self._groups.get(group_id)
        error = self._current_member_error(group, group_id, member_id, group_instance_id,
                                           generation_id, "heartbeat")
        if group is not None:
            if error is None and group.state is EMPTY:
                error = UnknownMemberIdError(f"heartbeat: group {group_id!r} is Empty")
            elif error is None:
                self._touch(group, group.members[member_id], now)
                if group.state is PREPARING_REBALANCE:
                    error = RebalanceInProgressError(
                        f"group {group_id!r} is rebalancing; rejoin")
        out.responses.append(HeartbeatResponse(out.request_id, error))
        return out

    # -- LeaveGroup ----------------------------------------------------------------------------

    def leave_group(self, group_id: str, *, member_id: str = "",
                    group_instance_id: str | None = None,
                    members: Iterable[MemberIdentity] | None = None, now_ms: int) -> Result:
        """Members leave: one (``member_id``/``group_instance_id``) or a batch (``members``).

        A batch entry with ``member_id=""`` removes the static member of its
        ``group_instance_id`` whatever its member id (how an operator removes static members).
        Each member gets its own outcome in ``LeaveGroupResponse.members``.
        """
        check_str("group_id", group_id)
        if members is None:
            check_str("member_id", member_id)
            check_optional_str("group_instance_id", group_instance_id)
            leaving = [MemberIdentity(member_id, group_instance_id)]
        else:
            leaving = list(members)
            for ident in leaving:
                if not isinstance(ident, MemberIdentity):
                    raise TypeError(f"members must hold MemberIdentity, not {ident!r}")
                check_str("member_id", ident.member_id)
                check_optional_str("group_instance_id", ident.group_instance_id)
        out, now = self._begin(now_ms)
        rid = out.request_id
        group = self._groups.get(group_id)
        if not group_id:
            out.responses.append(LeaveGroupResponse(rid, InvalidGroupIdError(
                "group_id must not be empty")))
            return out
        if group is not None and group.state is DEAD:
            out.responses.append(LeaveGroupResponse(rid, CoordinatorNotAvailableError(
                f"group {group_id!r} is being deleted; retry")))
            return out
        results = []
        removed_member = removed_pending = False
        for ident in leaving:
            error = None
            if group is None:
                error = UnknownMemberIdError(f"leave-group: group {group_id!r} does not exist")
            elif not ident.member_id:
                mid = group.static_member_id(ident.group_instance_id)
                if mid is None:
                    error = UnknownMemberIdError(
                        f"leave-group: no static member {ident.group_instance_id!r}")
                else:
                    self._remove_member(group, group.members[mid], out)
                    removed_member = True
            elif ident.member_id in group.pending_members:
                group.pending_members.discard(ident.member_id)
                self._timers.cancel((TIMER_PENDING, group_id, ident.member_id))
                removed_pending = True
            else:
                error = check_member(group, ident.member_id, ident.group_instance_id,
                                     "leave-group")
                if error is None:
                    self._remove_member(group, group.members[ident.member_id], out)
                    removed_member = True
            results.append(LeaveMemberResponse(ident.member_id, ident.group_instance_id, error))
        if group is not None:
            if removed_member and group.state in (STABLE, COMPLETING_REBALANCE):
                self._maybe_prepare_rebalance(group, now, out)
            elif (removed_member or removed_pending) and group.state is PREPARING_REBALANCE:
                self._maybe_complete_join(group, now, out)
            self._forget_if_unused(group)
        out.responses.append(LeaveGroupResponse(rid, None, tuple(results)))
        return out

    # -- offset commits and retention ----------------------------------------------------------

    def validate_offset_commit(self, group_id: str, *, member_id: str = "",
                               group_instance_id: str | None = None, generation_id: int = -1,
                               now_ms: int, transactional: bool = False,
                               holds_offsets: bool = False) -> None:
        """Raise the error that fences this offset commit, or accept it (rules and their order:
        ``offsetlog.group.fencing``). An accepted commit of a member of a Stable or rebalancing
        group counts as its heartbeat.

        ``holds_offsets``: the log partition holds offsets of the group (committed, or pending
        in a transaction). A group without group metadata is then Kafka's *simple group*, an
        Empty group of generation 0 without members, and judged as one.

        It fires no deadlines (it has nowhere to return their records; call :meth:`poll` first),
        but a member whose session has lapsed by ``now_ms`` is treated as already evicted, so
        the answer does not depend on when ``poll`` last ran.

        :raises UnknownMemberIdError, FencedInstanceIdError, IllegalGenerationError,
            RebalanceInProgressError, CoordinatorNotAvailableError: the commit is fenced
        """
        check_str("group_id", group_id)
        check_str("member_id", member_id)
        check_optional_str("group_instance_id", group_instance_id)
        check_int("generation_id", generation_id)
        now = self._advance(now_ms, keep_steady=True)
        group = self._groups.get(group_id)
        if group is None and holds_offsets:
            group = Group(group_id, state_timestamp=None)  # (for the check only: not kept)
        error = check_offset_commit(group, member_id=member_id,
                                    group_instance_id=group_instance_id,
                                    generation_id=generation_id, transactional=transactional)
        member = group.members.get(member_id) if group is not None else None
        if error is None and member is not None and group.state is not EMPTY:
            deadline = self._timers.deadline((TIMER_SESSION, group_id, member_id))
            if deadline is not None and deadline <= now and not member.satisfies_heartbeat():
                error = UnknownMemberIdError(
                    f"offset-commit: the session of member {member_id!r} has expired")
            elif group.state in (STABLE, PREPARING_REBALANCE):
                self._touch(group, member, now)
        if error is not None:
            raise error

    # -- loading -------------------------------------------------------------------------------

    def load(self, group_id: str, value: dict | None, *, now_ms: int) -> Result:
        """Install ``group_id`` as its GROUP_METADATA ``value`` describes it (None: forget it),
        as after a restart: Stable with its members (or Empty), each member's session deadline
        ``now_ms + session_timeout_ms``. Replaces what the coordinator had for the group; a
        request of the replaced group that was parked is answered with
        ``CoordinatorNotAvailableError`` (in the returned Result, which has no records).

        :raises InvalidGroupMetadataError: the value is malformed (nothing is changed)
        """
        check_str("group_id", group_id)
        group = None if value is None else load_group(group_id, value)
        out, now = self._begin(now_ms, request=False)
        old = self._groups.get(group_id)
        if old is not None:
            self._unload_group(old, now, out)
        if group is None:
            return out
        self._groups[group_id] = group
        for member in group.members.values():
            self._touch(group, member, now)
        limit = self.config.max_size
        if limit is not None and len(group.members) > limit:
            # the limit shrank since the group was written: rebalance so members beyond it are
            # shed (they get GroupMaxSizeReached when they rejoin)
            self._prepare_rebalance(group, now, out)
        return out

    def replay(self, record: Record, *, now_ms: int) -> Result:
        """Apply one record read from the log while loading a partition: a GROUP_METADATA value
        loads its group (:meth:`load`), a tombstone forgets it; OFFSET_COMMIT records belong to
        the table and are skipped. An unknown record type or a newer version raises."""
        _delta, rtype, version, key, value = record
        check_version(rtype, version)
        if rtype == GROUP_METADATA:
            return self.load(key["group"], value, now_ms=now_ms)
        if rtype != OFFSET_COMMIT:
            raise ValueError(f"the group coordinator cannot replay record type {rtype}")
        return Result()

    def unload(self, *, now_ms: int) -> Result:
        """Stop serving every group (the store is closing): answer every parked request with
        ``CoordinatorNotAvailableError`` and forget all groups (they stay in the log)."""
        out, now = self._begin(now_ms, request=False)
        for group in list(self._groups.values()):
            self._unload_group(group, now, out)
        return out

    def _unload_group(self, group: Group, now: int, out: Result) -> None:
        gone = CoordinatorNotAvailableError(
            f"group {group.group_id!r} was unloaded from the coordinator; retry")
        for member in group.members.values():
            self._fail_parked(member, gone, out, member_id=member.member_id)
        group.transition_to(DEAD, now)
        self._forget(group.group_id)

    # -- reads ---------------------------------------------------------------------------------

    def group_ids(self) -> list[str]:
        return sorted(self._groups)

    def has_group(self, group_id: str) -> bool:
        """Whether the coordinator manages ``group_id`` (else it is standalone or unknown)."""
        return group_id in self._groups

    def managed_groups(self):
        """The groups the coordinator manages as a live, read-only view (it follows later
        changes), for callers that test membership on a hot path."""
        return self._groups.keys()

    def describe_group(self, group_id: str) -> GroupDescription | None:
        """A snapshot of ``group_id``, or None if the coordinator does not know it."""
        group = self._groups.get(group_id)
        if group is None:
            return None
        return GroupDescription(
            group.group_id, str(group.state), group.generation, group.protocol_type,
            group.protocol, group.leader, group.state_timestamp,
            tuple(MemberDescription(m.member_id, m.group_instance_id, m.client_id,
                                    m.client_host, m.session_timeout_ms, m.rebalance_timeout_ms,
                                    _metadata_or_empty(m, group.protocol), m.assignment)
                  for m in group.members.values()))

    def session_deadline(self, group_id: str, member_id: str) -> int | None:
        """When ``member_id``'s session lapses (None: no member, or its session is suspended
        while it waits in a JoinGroup or SyncGroup)."""
        return self._timers.deadline((TIMER_SESSION, group_id, member_id))

    def group_value(self, group_id: str) -> dict | None:
        """The GROUP_METADATA value ``group_id`` would be written with now (None if unknown)."""
        group = self._groups.get(group_id)
        return None if group is None else group_value(group)


def _metadata_or_empty(member: Member, protocol: str | None) -> bytes:
    try:
        return member.metadata(protocol) if protocol is not None else b""
    except KeyError:  # mid-rebalance it may have dropped the old protocol
        return b""
