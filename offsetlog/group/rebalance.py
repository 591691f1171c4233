"""How a classic group rebalances: the join phase, generations, static members and evictions.

This is the engine under :class:`~offsetlog.group.coordinator.GroupCoordinator` (whose module
docstring gives the theory of operation): it owns the groups and the timer queue, and every
method here changes soft state in memory and appends to the ``Result`` of the call in progress.
The coordinator adds the public requests (validating them and answering errors), offset-commit
fencing, retention, loading and reads.

Timer keys are tuples ``(kind, group_id[, member_id])`` with ``kind`` one of ``"join"`` (end of
the join phase), ``"sync"`` (members that must have sent SyncGroup), ``"session"`` (a member's
session) and ``"pending"`` (a KIP-394 member id waiting to be used).
"""

from __future__ import annotations

from dataclasses import dataclass

from offsetlog.errors import InvalidGroupIdError, RebalanceInProgressError, UnknownMemberIdError
from offsetlog.group.config import GroupConfig
from offsetlog.group.consumer_protocol import PROTOCOL_TYPE as CONSUMER
from offsetlog.group.consumer_protocol import held_back_for
from offsetlog.group.errors import (
    CoordinatorNotAvailableError,
    FencedInstanceIdError,
    GroupMaxSizeReachedError,
    InconsistentGroupProtocolError,
    InvalidSessionTimeoutError,
    MemberIdRequiredError,
)
from offsetlog.group.fencing import check_member
from offsetlog.group.group import INITIAL_DELAY, REBALANCE_TIMEOUT, Group
from offsetlog.group.member import Member, Protocol
from offsetlog.group.responses import JoinGroupMember, JoinGroupResponse, Result, SyncGroupResponse
from offsetlog.group.schema import group_value
from offsetlog.group.state import (
    COMPLETING_REBALANCE,
    DEAD,
    EMPTY,
    PREPARING_REBALANCE,
    STABLE,
    can_rebalance,
    check_transition,
)
from offsetlog.group.steady import steady_member, take_stamps
from offsetlog.group.timers import TIMER_JOIN, TIMER_PENDING, TIMER_SESSION, TIMER_SYNC, TimerQueue
from offsetlog.log.records import group_metadata as group_metadata_record


@dataclass(frozen=True)
class JoinRequest:
    """The fields of one JoinGroup request, checked."""

    request_id: int
    member_id: str
    group_instance_id: str | None
    client_id: str
    client_host: str
    session_timeout_ms: int
    rebalance_timeout_ms: int
    protocol_type: str
    protocols: tuple[Protocol, ...]
    require_known_member_id: bool


class RebalanceEngine:
    """The groups of one log partition, their deadlines, and the rebalance protocol's moves."""

    def __init__(self, config: GroupConfig | None = None) -> None:
        self.config = config if config is not None else GroupConfig()
        self._groups: dict[str, Group] = {}
        self._timers = TimerQueue()
        self._next_request_id = 1
        self._now: int | None = None
        #: the partition's steady board (``offsetlog.log._native.SteadyBoard``) when the
        #: store's native paths answer steady members' heartbeats and commits from it, else
        #: None: members this coordinator stated steady, and the heartbeats passed there
        self.steady = None

    # -- time and plumbing ---------------------------------------------------------------------

    def _advance(self, now_ms: int, *, keep_steady: bool = False) -> int:
        """Advance time to ``now_ms`` and take the heartbeats the steady board passed since the
        last call; the board is cleared unless ``keep_steady`` (a call that changes no group
        unless a deadline fires: ``_fire_due`` clears it then)."""
        if not isinstance(now_ms, int) or isinstance(now_ms, bool):
            raise TypeError(f"now_ms must be an int (epoch ms), not {now_ms!r}")
        if self._now is None or now_ms > self._now:
            self._now = now_ms
        self._take_steady(keep_steady)
        return self._now

    def _begin(self, now_ms: int, *, request: bool = True, keep_steady: bool = False,
               fire: bool = True) -> tuple[Result, int]:
        """Advance time, open the Result of this call and fire the deadlines that are due
        (not with ``fire=False``: a call whose caller keeps only the Result's records, where
        the answers to parked requests that a deadline gives would be lost; they fire at the
        next request or ``poll``)."""
        now = self._advance(now_ms, keep_steady=keep_steady)
        out = Result()
        if request:
            out.request_id = self._next_request_id
            self._next_request_id += 1
        if fire:
            self._fire_due(now, out)
        return out, now

    def _take_steady(self, keep: bool) -> None:
        """(``steady.take_stamps``) The board's stamps counted; its members forgotten unless
        ``keep``."""
        if self.steady is not None:
            take_stamps(self.steady, self._groups, self._timers, keep)

    def steady_member(self, group_id: str, member_id: str
                      ) -> tuple[int, str | None, int, int] | None:
        """What the steady board is told of ``member_id`` (``steady.steady_member``), or None:
        not a Stable group's member with its session running."""
        return steady_member(self._groups, self._timers, group_id, member_id)

    @staticmethod
    def _record(out: Result, group_id: str, value: dict | None) -> None:
        out.records.append(group_metadata_record(len(out.records), group_id, value))

    def _touch(self, group: Group, member: Member, now: int) -> None:
        """Restart ``member``'s session: a heartbeat, or anything that proves it alive."""
        self._timers.schedule((TIMER_SESSION, group.group_id, member.member_id),
                              now + member.session_timeout_ms)

    # -- joining -------------------------------------------------------------------------------

    def _join(self, group_id: str, req: JoinRequest, now: int, out: Result) -> None:
        cfg = self.config
        if not group_id:
            return self._join_error(out, req, InvalidGroupIdError("group_id must not be empty"))
        if not cfg.min_session_timeout_ms <= req.session_timeout_ms <= cfg.max_session_timeout_ms:
            return self._join_error(out, req, InvalidSessionTimeoutError(
                f"session_timeout_ms {req.session_timeout_ms} is outside "
                f"[{cfg.min_session_timeout_ms}, {cfg.max_session_timeout_ms}]",
                session_timeout_ms=req.session_timeout_ms, minimum=cfg.min_session_timeout_ms,
                maximum=cfg.max_session_timeout_ms))
        group = self._groups.get(group_id)
        if group is None:
            if req.member_id:
                return self._join_error(out, req, UnknownMemberIdError(
                    f"join-group: group {group_id!r} does not exist, so it has no member "
                    f"{req.member_id!r}"))
            group = self._groups[group_id] = Group(group_id, state_timestamp=now)
        if not self._accepts_joining_member(group, req.member_id):
            member = group.members.get(req.member_id)
            if member is not None:
                self._remove_member(group, member, out)
            self._join_error(out, req, GroupMaxSizeReachedError(
                f"group {group_id!r} has reached its maximum size of {cfg.max_size}"),
                member_id="")
        elif not req.member_id:
            self._join_new_member(group, req, now, out)
        else:
            self._join_known_member(group, req, now, out)
        if group.state is PREPARING_REBALANCE:
            self._maybe_complete_join(group, now, out)
        self._forget_if_unused(group)

    def _forget_if_unused(self, group: Group) -> None:
        """A group that never got a generation (a rejected first JoinGroup, or a pending member
        id that lapsed) has nothing in the log; once nobody is in it, forget it."""
        if (group.state is EMPTY and group.generation == 0 and not group.members
                and not group.pending_members):
            self._forget(group.group_id)

    @staticmethod
    def _join_error(out: Result, req: JoinRequest, error, *,
                    member_id: str | None = None) -> None:
        out.responses.append(JoinGroupResponse(
            req.request_id, error, member_id=req.member_id if member_id is None else member_id))

    def _accepts_joining_member(self, group: Group, member_id: str) -> bool:
        """Kafka's ``acceptJoiningMember``: room for a new member under ``max_size``? During a
        join phase the members that already rejoined count, so a shrunk limit sheds the last
        ones to rejoin."""
        limit = self.config.max_size
        if limit is None or group.state in (EMPTY, DEAD):
            return True
        member = group.members.get(member_id)
        if group.state is PREPARING_REBALANCE:
            return (member is not None and member.awaiting_join) or \
                group.awaiting_join_count() < limit
        return member is not None or len(group.members) < limit

    def _join_new_member(self, group: Group, req: JoinRequest, now: int, out: Result) -> None:
        if group.state is DEAD:
            return self._join_error(out, req, CoordinatorNotAvailableError(
                f"group {group.group_id!r} is being deleted; retry"))
        if not group.supports_protocols(req.protocol_type, (n for n, _ in req.protocols)):
            return self._join_error(out, req, self._inconsistent(group, req))
        prefix = req.group_instance_id if req.group_instance_id is not None else req.client_id
        new_id = self.config.member_id_factory(prefix)
        if new_id in group.members or new_id in group.pending_members:
            raise RuntimeError(f"member_id_factory returned {new_id!r}, which is in use")
        old_id = group.static_member_id(req.group_instance_id)
        if old_id is not None:
            self._replace_static_member(group, old_id, new_id, req, now, out)
        elif req.group_instance_id is None and req.require_known_member_id:
            group.pending_members.add(new_id)
            self._timers.schedule((TIMER_PENDING, group.group_id, new_id),
                                  now + req.session_timeout_ms)
            self._join_error(out, req, MemberIdRequiredError(
                f"join again with member id {new_id!r}"), member_id=new_id)
        else:
            self._add_member(group, new_id, req, now, out)

    def _join_known_member(self, group: Group, req: JoinRequest, now: int, out: Result) -> None:
        if group.state is DEAD:
            return self._join_error(out, req, CoordinatorNotAvailableError(
                f"group {group.group_id!r} is being deleted; retry"))
        if not group.supports_protocols(req.protocol_type, (n for n, _ in req.protocols)):
            return self._join_error(out, req, self._inconsistent(group, req))
        if req.member_id in group.pending_members:
            if req.group_instance_id is not None:  # pending ids are only given to dynamic members
                return self._join_error(out, req, UnknownMemberIdError(
                    f"member id {req.member_id!r} was given to a dynamic member"))
            self._timers.cancel((TIMER_PENDING, group.group_id, req.member_id))
            return self._add_member(group, req.member_id, req, now, out)
        error = check_member(group, req.member_id, req.group_instance_id, "join-group")
        if error is not None:
            return self._join_error(out, req, error)
        member = group.members[req.member_id]
        state = group.state
        if state is PREPARING_REBALANCE:
            self._update_member(group, member, req, out)
            self._maybe_prepare_rebalance(group, now, out)
        elif state is COMPLETING_REBALANCE:
            if member.matches(req.protocols):
                # it missed its JoinGroup response: send the current generation again
                self._answer_current_generation(group, member, req.request_id, out,
                                                with_members=group.leader == member.member_id)
            else:
                self._update_member(group, member, req, out)
                self._maybe_prepare_rebalance(group, now, out)
        elif state is STABLE:
            if group.leader == member.member_id or not member.matches(req.protocols):
                # the leader rejoins to force a rebalance (e.g. topic metadata changed);
                # a follower with new metadata (subscription, owned partitions) needs one too
                self._update_member(group, member, req, out)
                self._maybe_prepare_rebalance(group, now, out)
            else:
                self._answer_current_generation(group, member, req.request_id, out,
                                                with_members=False)
        else:
            self._join_error(out, req, UnknownMemberIdError(
                f"join-group: group {group.group_id!r} is {state}"))

    @staticmethod
    def _inconsistent(group: Group, req: JoinRequest) -> InconsistentGroupProtocolError:
        return InconsistentGroupProtocolError(
            f"group {group.group_id!r} ({group.protocol_type}) shares no protocol with "
            f"{req.protocol_type} {[n for n, _ in req.protocols]}",
            member_protocols={**{m: tuple(p) for m, p in group.member_protocols().items()},
                              (req.member_id or "<new>"): tuple(n for n, _ in req.protocols)})

    def _answer_current_generation(self, group: Group, member: Member, request_id: int,
                                   out: Result, *, with_members: bool,
                                   skip_assignment: bool = False) -> None:
        out.responses.append(JoinGroupResponse(
            request_id, None, member_id=member.member_id, generation_id=group.generation,
            protocol_type=group.protocol_type, protocol_name=group.protocol,
            leader_id=group.leader or "",
            members=self._member_list(group) if with_members else (),
            skip_assignment=skip_assignment))

    @staticmethod
    def _member_list(group: Group) -> tuple[JoinGroupMember, ...]:
        return tuple(JoinGroupMember(m.member_id, m.group_instance_id, m.metadata(group.protocol))
                     for m in group.members.values())

    def _add_member(self, group: Group, member_id: str, req: JoinRequest, now: int,
                    out: Result) -> None:
        member = Member(member_id, req.group_instance_id, req.client_id, req.client_host,
                        req.session_timeout_ms, req.rebalance_timeout_ms, req.protocols,
                        join_request=req.request_id, is_new=True)
        if group.state is PREPARING_REBALANCE and group.generation == 0:
            group.new_member_added = True
        group.add(member, protocol_type=req.protocol_type)
        # it cannot heartbeat before it has a generation; if it never completes its join
        # (e.g. the client gave up and retried under a new id), drop it after this long
        self._timers.schedule((TIMER_SESSION, group.group_id, member_id),
                              now + self.config.new_member_join_timeout_ms)
        self._maybe_prepare_rebalance(group, now, out)

    def _update_member(self, group: Group, member: Member, req: JoinRequest,
                       out: Result) -> None:
        """Take a known member's new JoinGroup: its protocols, timeouts, and park the request."""
        if member.join_request is not None:  # superseded by this one; nobody waits for it now
            out.responses.append(JoinGroupResponse(
                member.join_request, RebalanceInProgressError("superseded by a newer JoinGroup"),
                member_id=member.member_id))
        member.protocols = req.protocols
        member.session_timeout_ms = req.session_timeout_ms
        member.rebalance_timeout_ms = req.rebalance_timeout_ms
        member.join_request = req.request_id

    def _replace_static_member(self, group: Group, old_id: str, new_id: str, req: JoinRequest,
                               now: int, out: Result) -> None:
        """A static member rejoined without its member id (it restarted): it takes the place of
        the previous member of its instance, whose id is fenced from now on.

        In a Stable group that is all (KIP-345), unless the vote would change or the old
        process owed the group a follow-up rebalance: its subscription claims partitions that
        the assignment holds back from everyone until it revokes them (cooperative), and the
        new process owns nothing, so it will never revoke them and rejoin. Kafka rebalances
        only for the vote; there the partitions wait for the next rebalance, which may never
        come (or, if the old id had not synced, for the sync deadline)."""
        member = group.members[old_id]
        held_back = self._held_back(group, member) if group.state is STABLE else []
        self._fail_parked(member, FencedInstanceIdError(
            f"instance {req.group_instance_id!r} rejoined as member {new_id!r}"), out,
            member_id=old_id)
        self._timers.cancel((TIMER_SESSION, group.group_id, old_id))
        group.replace_static_member(req.group_instance_id, old_id, new_id)
        self._update_member(group, member, req, out)
        self._touch(group, member, now)
        if group.state is STABLE:
            if group.select_protocol() == group.protocol and not held_back:
                # nothing the assignment depends on changed: keep the generation and its
                # assignment, record the new member id, and answer at once
                self._record(out, group.group_id, group_value(group))
                member.join_request = None
                is_leader = group.leader == new_id
                self._answer_current_generation(group, member, req.request_id, out,
                                                with_members=is_leader, skip_assignment=is_leader)
            else:
                self._maybe_prepare_rebalance(group, now, out)
        elif group.state is COMPLETING_REBALANCE:
            # the leader may already be assigning to the old member id: start over
            self._prepare_rebalance(group, now, out)
        elif group.state is not PREPARING_REBALANCE:
            raise AssertionError(f"static member in a {group.state} group {group.group_id!r}")

    @staticmethod
    def _held_back(group: Group, member: Member) -> list:
        """Partitions held back for ``member`` to revoke (consumer groups; see
        :func:`~offsetlog.group.consumer_protocol.held_back_for`)."""
        if group.protocol_type != CONSUMER or group.protocol is None:
            return []
        try:
            subscription = member.metadata(group.protocol)
        except KeyError:
            return []
        return held_back_for(subscription, member.assignment,
                             (m.assignment for m in group.members.values() if m is not member))

    # -- the join phase ------------------------------------------------------------------------

    def _maybe_prepare_rebalance(self, group: Group, now: int, out: Result) -> None:
        if can_rebalance(group.state):
            self._prepare_rebalance(group, now, out)

    def _prepare_rebalance(self, group: Group, now: int, out: Result) -> None:
        check_transition(group.group_id, group.state, PREPARING_REBALANCE)
        if group.state is COMPLETING_REBALANCE:
            self._fail_pending_syncs(group, now, out)
        self._timers.cancel((TIMER_SYNC, group.group_id))
        group.pending_sync.clear()
        if group.state is EMPTY:
            delay = self.config.initial_rebalance_delay_ms
            group.join_phase = INITIAL_DELAY
            group.initial_delay_ms = delay
            group.initial_remaining_ms = max(group.rebalance_timeout_ms() - delay, 0)
        else:
            delay = group.rebalance_timeout_ms()
            group.join_phase = REBALANCE_TIMEOUT
        group.transition_to(PREPARING_REBALANCE, now)
        self._timers.schedule((TIMER_JOIN, group.group_id), now + delay)
        self._maybe_complete_join(group, now, out)

    def _fail_pending_syncs(self, group: Group, now: int, out: Result) -> None:
        """A rebalance interrupts CompletingRebalance: drop the assignment and tell every parked
        SyncGroup to rejoin."""
        for member in group.members.values():
            member.assignment = b""
            if member.sync_request is not None:
                out.responses.append(SyncGroupResponse(
                    member.sync_request, RebalanceInProgressError(
                        f"group {group.group_id!r} is rebalancing again; rejoin")))
                member.sync_request = None
                self._touch(group, member, now)

    def _maybe_complete_join(self, group: Group, now: int, out: Result) -> None:
        if (group.state is PREPARING_REBALANCE and group.join_phase == REBALANCE_TIMEOUT
                and group.has_all_members_joined()):
            self._complete_join(group, now, out)

    def _complete_join(self, group: Group, now: int, out: Result) -> None:
        """End the join phase: drop dynamic members that did not rejoin, elect the leader,
        start the next generation and answer every parked JoinGroup."""
        gid = group.group_id
        self._timers.cancel((TIMER_JOIN, gid))
        for member in group.not_yet_rejoined():
            if not member.is_static:  # a static member keeps its place until its session ends
                self._remove_member(group, member, out)
        if group.members and not group.elect_joined_leader():
            # only static members that have not rejoined are left: wait another round (their
            # sessions will expire if they are gone)
            group.join_phase = REBALANCE_TIMEOUT
            self._timers.schedule((TIMER_JOIN, gid), now + group.rebalance_timeout_ms())
            return
        target = COMPLETING_REBALANCE if group.members else EMPTY
        check_transition(gid, group.state, target)
        group.generation += 1
        group.protocol = group.select_protocol() if group.members else None
        group.join_phase = None
        group.new_member_added = False
        group.pending_sync.clear()
        group.transition_to(target, now)
        if target is EMPTY:
            self._record(out, gid, group_value(group))
            return
        members = self._member_list(group)
        for member in group.members.values():
            if member.join_request is not None:
                is_leader = group.leader == member.member_id
                out.responses.append(JoinGroupResponse(
                    member.join_request, None, member_id=member.member_id,
                    generation_id=group.generation, protocol_type=group.protocol_type,
                    protocol_name=group.protocol, leader_id=group.leader,
                    members=members if is_leader else ()))
                member.join_request = None
            member.is_new = False
            self._touch(group, member, now)
            group.pending_sync.add(member.member_id)
        self._timers.schedule((TIMER_SYNC, gid), now + group.rebalance_timeout_ms())

    # -- syncing and leaving -------------------------------------------------------------------

    def _synced(self, group: Group, member_id: str) -> None:
        group.pending_sync.discard(member_id)
        if not group.pending_sync:
            self._timers.cancel((TIMER_SYNC, group.group_id))

    def _remove_member(self, group: Group, member: Member, out: Result) -> None:
        """Drop ``member``; a JoinGroup or SyncGroup of it that is parked is answered with
        UnknownMemberId (a client still alive joins again as a new member)."""
        self._fail_parked(member, UnknownMemberIdError(
            f"member {member.member_id!r} was removed from group {group.group_id!r}"), out,
            member_id="")
        group.remove(member.member_id)
        self._timers.cancel((TIMER_SESSION, group.group_id, member.member_id))

    @staticmethod
    def _fail_parked(member: Member, error, out: Result, *, member_id: str) -> None:
        """Answer ``member``'s parked JoinGroup and SyncGroup, if any, with ``error``
        (``member_id`` goes in the JoinGroup answer)."""
        if member.join_request is not None:
            out.responses.append(JoinGroupResponse(member.join_request, error,
                                                   member_id=member_id))
            member.join_request = None
        if member.sync_request is not None:
            out.responses.append(SyncGroupResponse(member.sync_request, error))
            member.sync_request = None

    def _remove_and_rebalance(self, group: Group, member: Member, now: int,
                              out: Result) -> None:
        self._remove_member(group, member, out)
        if group.state in (STABLE, COMPLETING_REBALANCE):
            self._maybe_prepare_rebalance(group, now, out)
        elif group.state is PREPARING_REBALANCE:
            self._maybe_complete_join(group, now, out)

    def _forget(self, group_id: str) -> None:
        group = self._groups.pop(group_id, None)
        if group is None:
            return
        for key in [(TIMER_JOIN, group_id), (TIMER_SYNC, group_id)]:
            self._timers.cancel(key)
        for mid in list(group.members) + list(group.pending_members):
            self._timers.cancel((TIMER_SESSION, group_id, mid))
            self._timers.cancel((TIMER_PENDING, group_id, mid))

    # -- a group changing protocol (offsetlog.group.migration) -----------------------------------

    def begin_request(self, now_ms: int) -> Result:
        """Open the Result of a request another state machine answers (a classic member's
        request to a consumer group), so that its answer is routed as this coordinator's are;
        due deadlines fire first."""
        out, _ = self._begin(now_ms)
        return out

    def group(self, group_id: str) -> Group | None:
        """The live group (read it, do not change it)."""
        return self._groups.get(group_id)

    def give_up(self, group_id: str, out: Result) -> Group | None:
        """Stop serving ``group_id``, which becomes a consumer group (its GROUP_METADATA
        tombstone is the caller's): parked JoinGroups and SyncGroups are answered
        REBALANCE_IN_PROGRESS, so that their members rejoin the consumer group."""
        group = self._groups.get(group_id)
        if group is None:
            return None
        self._take_steady(False)  # (called outside this coordinator's requests)
        rejoin = RebalanceInProgressError(
            f"group {group_id!r} is becoming a consumer group; rejoin")
        for member in group.members.values():
            self._fail_parked(member, rejoin, out, member_id=member.member_id)
        self._forget(group_id)
        return group

    def adopt(self, group: Group, now_ms: int, *, rebalance: bool = True) -> Result:
        """Serve ``group`` (a consumer group whose members all speak the classic protocol now),
        given Stable with its members' assignments (its GROUP_METADATA value is the caller's),
        and start a rebalance, as Kafka does after a downgrade (not when a static member's
        new process caused it: ``rebalance=False``). Due deadlines do not fire here: the
        caller keeps no answers of this Result."""
        out, now = self._begin(now_ms, request=False, fire=False)
        self._groups[group.group_id] = group
        for member in group.members.values():
            self._touch(group, member, now)
        if rebalance:
            self._prepare_rebalance(group, now, out)
        return out

    # -- deadlines -----------------------------------------------------------------------------

    def _fire_due(self, now: int, out: Result) -> None:
        while (due := self._timers.pop_due(now)) is not None:
            self._take_steady(False)  # (a deadline may change a group)
            key, at = due
            group = self._groups.get(key[1])
            if group is None:
                continue
            kind = key[0]
            if kind == TIMER_SESSION:
                member = group.members.get(key[2])
                # a member parked in a JoinGroup/SyncGroup is alive; its session restarts when
                # it is answered
                if member is not None and not member.satisfies_heartbeat():
                    self._remove_and_rebalance(group, member, at, out)
            elif kind == TIMER_PENDING:
                group.pending_members.discard(key[2])
                if group.state is PREPARING_REBALANCE:
                    self._maybe_complete_join(group, at, out)
                self._forget_if_unused(group)
            elif kind == TIMER_JOIN:
                self._on_join_deadline(group, at, out)
            elif kind == TIMER_SYNC:
                if group.pending_sync and group.state in (COMPLETING_REBALANCE, STABLE):
                    # an id no longer in the group is a replaced static member's: nobody to
                    # drop, but the generation was assigned without it, so rebalance all the same
                    for mid in [m for m in group.members if m in group.pending_sync]:
                        self._remove_member(group, group.members[mid], out)
                    self._prepare_rebalance(group, at, out)

    def _on_join_deadline(self, group: Group, at: int, out: Result) -> None:
        if group.state is not PREPARING_REBALANCE:
            return
        if (group.join_phase == INITIAL_DELAY and group.new_member_added
                and group.initial_remaining_ms > 0):
            # members are still arriving at a new group: wait a little longer, but never past
            # the rebalance timeout (Kafka's InitialDelayedJoin)
            group.new_member_added = False
            delay = min(self.config.initial_rebalance_delay_ms, group.initial_remaining_ms)
            group.initial_remaining_ms = max(group.initial_remaining_ms - group.initial_delay_ms,
                                             0)
            group.initial_delay_ms = delay
            self._timers.schedule((TIMER_JOIN, group.group_id), at + delay)
            return
        self._complete_join(group, at, out)
