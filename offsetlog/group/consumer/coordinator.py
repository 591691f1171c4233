"""The consumer group protocol (KIP-848) coordinator as a sans-IO state machine.

Like the classic ``offsetlog.group.GroupCoordinator``: no I/O, no threads, no clock. Every call
takes ``now_ms`` and returns a :class:`ConsumerResult`: the records to append (``(kind, key,
value)``, ``offsetlog.group.consumer.group``) and the response. The caller appends the records
and makes them durable before it sends the response. Deadlines are data in a timer queue; every
call first fires those due at ``now_ms``; :meth:`poll` fires them alone.

One heartbeat, as Kafka's ``GroupMetadataManager.consumerGroupHeartbeat``:

1. the request is checked (INVALID_REQUEST, UNSUPPORTED_ASSIGNOR), then the member: a new one
   (epoch 0; GROUP_MAX_SIZE_REACHED), a static member replacing its earlier self (which must
   have left with epoch -2, or UNRELEASED_INSTANCE_ID), or a known one whose epoch must be the
   coordinator's or, when the response carrying the new one may have been lost, the previous
   one with owned partitions within its assignment (FENCED_MEMBER_EPOCH);
2. a changed subscription, a new member or a changed partition count of a subscribed topic
   bumps the **group epoch**;
3. if the group epoch is ahead of the assignment epoch, the assignor (the one most members
   name, else the first of ``assignors``) computes every member's **target** assignment;
4. the member is **reconciled** towards its target (``member.reconcile``): partitions to give
   up are revoked first (the member stays at its epoch until a heartbeat no longer reports
   them), partitions another member still owns are held back, and the member moves to the
   assignment epoch as soon as nothing is left to revoke;
5. the response carries the member's epoch, the interval to its next heartbeat and, on a
   join, a full request or a change, its assignment. The interval is
   ``heartbeat_interval_ms`` (all Kafka ever answers) unless ``schedule`` chooses a shorter
   one: for a member in the middle of a reconciliation, so that it comes back for its
   partitions soon after they are free, and to spread members' heartbeats over the interval.

Deadlines: a member's **session** (``session_timeout_ms`` after its last heartbeat) and, while
it has partitions to revoke, its **rebalance timeout** (its own ``rebalance_timeout_ms``);
either removes it from the group and bumps the group epoch. Leaving: epoch -1 removes the
member, epoch -2 (static members only) keeps it and its partitions under its instance id until
its session runs out or a new member with that instance id replaces it.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field, replace

from offsetlog.errors import (
    FencedInstanceIdError,
    IllegalGenerationError,
    OffsetlogError,
    UnknownMemberIdError,
    UnsupportedVersionError,
)
from offsetlog.group.consumer import regex
from offsetlog.group.consumer.assignors import ASSIGNORS, AssignorMember
from offsetlog.group.consumer.config import ConsumerGroupConfig
from offsetlog.group.consumer.errors import (
    InvalidRequestError,
    StaleMemberEpochError,
    UnsupportedAssignorError,
)
from offsetlog.group.consumer.group import (
    ConsumerGroup,
    apply_records,
    current_record,
    group_record,
    member_record,
    new_group,
    new_group_records,
    removal_records,
    target_metadata_record,
    target_record,
)
from offsetlog.group.consumer.member import (
    LEAVE_EPOCH,
    LEAVE_STATIC_EPOCH,
    STABLE,
    UNREVOKED_PARTITIONS,
    ConsumerMember,
    reconcile,
)
from offsetlog.group.consumer.membership import dynamic_member, static_member
from offsetlog.group.consumer.schedule import HeartbeatSchedule
from offsetlog.group.errors import GroupIdNotFoundError, GroupMaxSizeReachedError
from offsetlog.group.timers import TimerQueue

SESSION = "session"
REBALANCE = "rebalance"
#: a classic member's deadlines: to rejoin once told to (JoinGroup), and to sync after joining
JOIN = "join"
SYNC = "sync"


@dataclass(frozen=True)
class ConsumerHeartbeatResponse:
    """ConsumerGroupHeartbeat's answer. ``assignment`` is None when the response carries none
    (the member's assignment has not changed)."""

    error: OffsetlogError | None = None
    member_id: str | None = None
    member_epoch: int = 0
    heartbeat_interval_ms: int = 0
    assignment: frozenset | None = None

    @property
    def error_code(self) -> int:
        return 0 if self.error is None else (self.error.code or -1)


@dataclass
class ConsumerResult:
    records: list[tuple] = field(default_factory=list)
    #: a ConsumerGroupHeartbeat's answer, or the classic answer (``offsetlog.group.responses``)
    #: to a classic member's request
    response: object | None = None
    #: answers to requests parked in a classic group that this call upgraded
    classic_responses: list = field(default_factory=list)


class ConsumerGroupCoordinator:
    """The consumer-protocol groups of one log partition. See the module docstring."""

    def __init__(self, config: ConsumerGroupConfig | None = None) -> None:
        self.config = config or ConsumerGroupConfig()
        self.groups: dict[str, ConsumerGroup] = {}
        self._timers = TimerQueue()
        self._rebalance_epochs: dict[tuple, int] = {}
        #: the intervals answered, and when each member is therefore expected (not state)
        self.heartbeats = HeartbeatSchedule()
        self._now = 0
        #: called as ``on_fence(group, member_id, records)`` before a member is removed;
        #: True when it has dealt with the group (downgraded it: ``offsetlog.group.migration``)
        self.on_fence = None
        #: called as ``on_new_group(group_id, topics)`` when a member joins a group this
        #: coordinator does not have: None, or a takeover whose ``group`` the member joins and
        #: whose ``commit()`` (called once the request is found valid) returns the records of
        #: the change; it may raise the request's error (``offsetlog.group.migration``)
        self.on_new_group = None

    # -- time ----------------------------------------------------------------------------

    def next_deadline(self) -> int | None:
        return self._timers.next_deadline()

    def poll(self, now_ms: int) -> ConsumerResult:
        out = ConsumerResult()
        self._fire(now_ms, out.records)
        return out

    def advance(self, now_ms: int, records: list) -> None:
        """Move time to ``now_ms`` and fire the deadlines due by then."""
        self._fire(now_ms, records)

    def _fire(self, now_ms: int, records: list) -> None:
        self._now = max(self._now, now_ms)
        while (due := self._timers.pop_due(self._now)) is not None:
            key: tuple = due[0]  # type: ignore[assignment]
            kind, group_id, member_id = key
            group = self.groups.get(group_id)
            member = group.members.get(member_id) if group is not None else None
            if group is None or member is None:
                continue
            if kind == REBALANCE:
                epoch = self._rebalance_epochs.pop((group_id, member_id), None)
                if member.state != UNREVOKED_PARTITIONS or member.member_epoch != epoch:
                    continue
            self._fence(group, member_id, records)

    # -- heartbeat -----------------------------------------------------------------------

    def heartbeat(self, group_id: str, *, member_id: str, member_epoch: int,
                  topics: Mapping[str, int], now_ms: int, instance_id: str | None = None,
                  rack_id: str | None = None, rebalance_timeout_ms: int = -1,
                  subscribed_topic_names: Iterable[str] | None = None,
                  subscribed_topic_regex: str | None = None,
                  server_assignor: str | None = None, owned: Iterable | None = None,
                  client_id: str = "", client_host: str = "",
                  member_id_required: bool = True) -> ConsumerResult:
        """One ConsumerGroupHeartbeat. ``topics`` is every existing topic's partition count;
        ``owned`` the ``(topic, partition)`` pairs the member says it owns (None: not said).
        ``subscribed_topic_regex``: None leaves the member's as it is, "" removes it.
        ``member_id_required``: from v1 the client names itself even when joining."""
        out = ConsumerResult()
        self._fire(now_ms, out.records)
        owned_set = None if owned is None else frozenset(owned)
        subs = None if subscribed_topic_names is None else tuple(sorted(set(
            subscribed_topic_names)))
        records: list[tuple] = []
        try:
            self._check_request(group_id, member_id, member_epoch, instance_id, rack_id,
                                rebalance_timeout_ms, subs, subscribed_topic_regex,
                                server_assignor, owned_set, member_id_required)
            if member_epoch in (LEAVE_EPOCH, LEAVE_STATIC_EPOCH):
                response = self._leave(group_id, member_id, member_epoch, instance_id, records)
            else:
                response = self._heartbeat(
                    group_id, member_id, member_epoch, topics, instance_id, rack_id,
                    rebalance_timeout_ms, subs, subscribed_topic_regex, server_assignor,
                    owned_set, client_id, client_host, records)
        except OffsetlogError as e:
            out.response = ConsumerHeartbeatResponse(error=e)
            return out
        out.records.extend(records)
        out.response = response
        return out

    def _check_request(self, group_id, member_id, member_epoch, instance_id, rack_id,
                       rebalance_timeout_ms, subs, regex_, server_assignor, owned,
                       member_id_required) -> None:
        if not group_id:
            raise InvalidRequestError("GroupId can't be empty.")
        if instance_id == "":
            raise InvalidRequestError("InstanceId can't be empty.")
        if rack_id == "":
            raise InvalidRequestError("RackId can't be empty.")
        if not member_id and (member_id_required or member_epoch != 0):
            raise InvalidRequestError("MemberId can't be empty.")
        if member_epoch == 0:
            if rebalance_timeout_ms == -1:
                raise InvalidRequestError("RebalanceTimeoutMs must be provided in first request.")
            if owned is None or owned:
                raise InvalidRequestError("TopicPartitions must be empty when (re-)joining.")
            if subs is None and regex_ is None:
                raise InvalidRequestError(
                    "Either SubscribedTopicNames or SubscribedTopicRegex must be non-null when "
                    "(re-)joining.")
        elif member_epoch == LEAVE_STATIC_EPOCH:
            if instance_id is None:
                raise InvalidRequestError("InstanceId can't be null.")
        elif member_epoch < LEAVE_EPOCH:
            raise InvalidRequestError("MemberEpoch is invalid.")
        if server_assignor is not None and server_assignor not in self.config.assignors:
            raise UnsupportedAssignorError(
                f"ServerAssignor {server_assignor} is not supported. Supported assignors: "
                f"{', '.join(self.config.assignors)}.")

    def _heartbeat(self, group_id, member_id, member_epoch, topics, instance_id, rack_id,
                   rebalance_timeout_ms, subs, regex_, server_assignor, owned, client_id,
                   client_host, records) -> ConsumerHeartbeatResponse:
        group = self.groups.get(group_id)
        takeover = None
        fresh = group is None
        if group is None:
            if member_epoch != 0:
                raise GroupIdNotFoundError(f"Group {group_id} not found.")
            if self.on_new_group is not None:  # a classic group of that id: upgrade it
                takeover = self.on_new_group(group_id, topics)
            group = new_group(group_id) if takeover is None else takeover.group
        if not member_id:
            member_id = self.config.member_id_factory()
        max_size = self.config.max_size
        if (max_size is not None and member_id not in group.members
                and len(group.members) >= max_size):
            raise GroupMaxSizeReachedError(
                f"The consumer group has reached its maximum capacity of {max_size} members.")
        replaced = None
        if instance_id is None:
            member = dynamic_member(group, member_id, member_epoch, owned)
        else:
            member, replaced = static_member(group, member_id, member_epoch, instance_id,
                                             owned)
        regex_given = regex_ is not None
        if regex_given:
            regex_ = regex_ or None  # "": no regex
            if regex_ is not None and regex_ != member.subscribed_topic_regex:
                regex.check(regex_)
        # from here on the request is valid: change the group
        if takeover is not None:
            records.extend(takeover.commit())
            self.install(group)
        self.groups[group_id] = group
        if fresh and takeover is None:
            records.extend(new_group_records(group))
        if replaced is not None:
            self.replace_static(group, replaced, member, records)
        before = member
        updated = replace(
            member, instance_id=instance_id if instance_id is not None else member.instance_id,
            rack_id=rack_id if rack_id is not None else member.rack_id,
            rebalance_timeout_ms=(rebalance_timeout_ms if rebalance_timeout_ms != -1
                                  else member.rebalance_timeout_ms),
            server_assignor=(server_assignor if server_assignor is not None
                             else member.server_assignor),
            subscribed_topics=subs if subs is not None else member.subscribed_topics,
            subscribed_topic_regex=regex_ if regex_given else member.subscribed_topic_regex,
            client_id=client_id, client_host=client_host)
        reconciled = self.update_member(group, member, updated, topics, owned, records)
        self._timers.schedule((SESSION, group_id, member_id),
                              self._now + self.config.session_timeout_ms)
        full = member_epoch == 0 or (
            rebalance_timeout_ms != -1 and owned is not None
            and (subs is not None or regex_given))
        settled = (reconciled.state == STABLE and reconciled.member_epoch == group.assignment_epoch
                   and (member_epoch == 0 or before.state != STABLE))
        interval = self.heartbeats.interval(self.config, group, reconciled, self._now,
                                            settled=settled)
        return ConsumerHeartbeatResponse(
            member_id=member_id, member_epoch=reconciled.member_epoch,
            heartbeat_interval_ms=interval,
            assignment=(reconciled.assigned if full or reconciled.assigned != before.assigned
                        else None))

    def update_member(self, group: ConsumerGroup, member: ConsumerMember,
                      updated: ConsumerMember, topics: Mapping[str, int],
                      owned: frozenset | None, records: list) -> ConsumerMember:
        """Steps 2-4 of a heartbeat (a classic member's JoinGroup takes them too): write the
        member's changes, bump the group epoch if its subscription or the subscribed topics
        changed (``update_subscription``), compute the target assignment if it is behind, and
        reconcile the member (``settle_member``). Returns the member as reconciled."""
        self.update_subscription(group, member, updated, topics, records)
        return self.settle_member(group, updated, owned, records)

    def update_subscription(self, group: ConsumerGroup, member: ConsumerMember,
                            updated: ConsumerMember, topics: Mapping[str, int],
                            records: list) -> None:
        """Step 2 of a heartbeat: write the member's changes, and bump the group epoch if its
        subscription or the subscribed topics changed."""
        bump = False
        if (updated.metadata() != member.metadata()
                or updated.member_id not in group.members):
            records.append(member_record(group.group_id, updated))
            bump = (updated.subscribed_topics != member.subscribed_topics
                    or updated.subscribed_topic_regex != member.subscribed_topic_regex)
        group.put_member(updated)
        metadata = {t: topics[t] for t in sorted(group.subscribed_topics(topics))
                    if t in topics}
        if metadata != group.subscription_metadata:
            group.subscription_metadata = metadata
            bump = True
        if bump:
            group.group_epoch += 1
            records.append(group_record(group))

    def settle_member(self, group: ConsumerGroup, updated: ConsumerMember,
                      owned: frozenset | None, records: list) -> ConsumerMember:
        """Steps 3-4 of a heartbeat: compute the target assignment if it is behind the group
        epoch, and reconcile ``updated`` (in the group) with its target. Returns the member as
        reconciled."""
        if group.group_epoch > group.assignment_epoch:
            self._assign(group, records, here=updated.member_id)
        target = group.targets.get(updated.member_id, frozenset())
        reconciled = reconcile(updated, group.assignment_epoch, target, group.owner_epoch,
                               owned)
        if reconciled != updated:
            records.append(current_record(group.group_id, reconciled))
            group.put_member(reconciled)
            key = (group.group_id, updated.member_id)
            # a classic member has its join and sync deadlines instead (``classic``)
            if (reconciled.state == UNREVOKED_PARTITIONS
                    and not reconciled.uses_classic_protocol):
                self._rebalance_epochs[key] = reconciled.member_epoch
                self._timers.schedule((REBALANCE, group.group_id, updated.member_id),
                                      self._now + max(reconciled.rebalance_timeout_ms, 0))
            else:
                self._rebalance_epochs.pop(key, None)
                self._timers.cancel((REBALANCE, group.group_id, updated.member_id))
        return reconciled

    def replace_static(self, group: ConsumerGroup, replaced: ConsumerMember,
                       member: ConsumerMember, records: list) -> None:
        """A static member's new incarnation ``member`` takes over ``replaced``'s target and
        assignment."""
        target = group.targets.get(replaced.member_id, frozenset())
        records.extend(removal_records(group.group_id, replaced.member_id))
        group.drop_member(replaced.member_id)
        self._cancel_timers(group.group_id, replaced.member_id)
        records.append(member_record(group.group_id, member))
        group.targets[member.member_id] = target
        records.append(target_record(group.group_id, member.member_id, target))
        records.append(current_record(group.group_id, member))
        group.put_member(member)

    def _assign(self, group: ConsumerGroup, records: list, here: str) -> None:
        """Compute every member's target. ``here`` is the member whose request this is: it
        hears of its target in this answer. The others are expected at their next heartbeat,
        or just after ``here`` if that is overdue; members whose next heartbeat is not known
        (since a restart, classic members, static members away) come last. ``uniform`` uses
        this for its free choices (``assignors``): partitions go to the member that hears of
        them first."""
        assignor = self.preferred_assignor(group)
        specs = {mid: AssignorMember(mid, group.member_topics(m), m.instance_id, m.rack_id)
                 for mid, m in group.members.items()}
        new = ASSIGNORS[assignor](specs, group.subscription_metadata, group.targets,
                                  self.heartbeats.due(group, here, self._now))
        for mid in sorted(new):
            if group.targets.get(mid) != new[mid]:
                records.append(target_record(group.group_id, mid, new[mid]))
        group.targets = dict(new)
        group.assignment_epoch = group.group_epoch
        records.append(target_metadata_record(group))

    def preferred_assignor(self, group: ConsumerGroup) -> str:
        """The assignor most members name (ties: the earlier in ``assignors``), else the
        first of ``assignors``."""
        named = Counter(m.server_assignor for m in group.members.values()
                        if m.server_assignor is not None)
        if not named:
            return self.config.assignors[0]
        order = {a: i for i, a in enumerate(self.config.assignors)}
        return min(named, key=lambda a: (-named[a], order.get(a, len(order))))

    # -- leaving and fencing -------------------------------------------------------------

    def _leave(self, group_id, member_id, member_epoch, instance_id, records):
        group = self.groups.get(group_id)
        if group is None:
            raise GroupIdNotFoundError(f"Group {group_id} not found.")
        if instance_id is None:
            if member_id not in group.members:
                raise UnknownMemberIdError(
                    f"Member {member_id} is not a member of group {group_id}.")
            self._fence(group, member_id, records)
            return ConsumerHeartbeatResponse(member_id=member_id, member_epoch=member_epoch)
        existing_id = group.static.get(instance_id)
        if existing_id is None:
            raise UnknownMemberIdError(f"Instance id {instance_id} is unknown.")
        if existing_id != member_id:
            raise FencedInstanceIdError(
                f"Static member {member_id} with instance id {instance_id} is fenced by "
                f"existing member {existing_id}.")
        if member_epoch == LEAVE_STATIC_EPOCH:
            self.heartbeats.forget(group_id, member_id)  # away: not expected back soon
            away = group.members[member_id]
            member = replace(away, member_epoch=LEAVE_STATIC_EPOCH, pending_revocation=frozenset(),
                             assignment_epochs=tuple(e for e in away.assignment_epochs
                                                     if e[0] in away.assigned))
            group.put_member(member)
            records.append(current_record(group_id, member))
            return ConsumerHeartbeatResponse(member_id=member_id,
                                              member_epoch=LEAVE_STATIC_EPOCH)
        self._fence(group, member_id, records)
        return ConsumerHeartbeatResponse(member_id=member_id, member_epoch=member_epoch)

    def _fence(self, group: ConsumerGroup, member_id: str, records: list) -> None:
        """Remove a member (it left, or its session or rebalance timeout ran out) and bump the
        group epoch, unless ``on_fence`` turns the group into a classic group instead."""
        if self.on_fence is not None and self.on_fence(group, member_id, records):
            return
        records.extend(removal_records(group.group_id, member_id))
        group.drop_member(member_id)
        self._cancel_timers(group.group_id, member_id)
        group.subscription_metadata = {t: n for t, n in group.subscription_metadata.items()
                                       if t in group.subscribed_topics()}
        group.group_epoch += 1
        records.append(group_record(group))
        if not group.members:
            # Kafka 4.3+ (KAFKA-20442): an empty group's target (nothing: ``drop_member`` took
            # the last) is its group epoch's
            group.assignment_epoch = group.group_epoch
            records.append(target_metadata_record(group))

    def _cancel_timers(self, group_id: str, member_id: str) -> None:
        for kind in (SESSION, REBALANCE, JOIN, SYNC):
            self._timers.cancel((kind, group_id, member_id))
        self._rebalance_epochs.pop((group_id, member_id), None)
        self.heartbeats.forget(group_id, member_id)

    def cancel_member_timers(self, group_id: str, member_id: str) -> None:
        self._cancel_timers(group_id, member_id)

    @property
    def now_ms(self) -> int:
        """The latest time this coordinator has seen."""
        return self._now

    def session_timeout_ms(self, member: ConsumerMember) -> int:
        """A classic member's own session timeout, else ``group.consumer.session.timeout.ms``."""
        if member.classic is not None:
            return member.classic.session_timeout_ms
        return self.config.session_timeout_ms

    def touch(self, group_id: str, member: ConsumerMember) -> None:
        """Restart the member's session."""
        self._timers.schedule((SESSION, group_id, member.member_id),
                              self._now + self.session_timeout_ms(member))

    def schedule(self, kind: str, group_id: str, member_id: str, delay_ms: int, *,
                 if_absent: bool = False) -> None:
        """A classic member's JOIN or SYNC deadline: it is removed if it passes."""
        key = (kind, group_id, member_id)
        if not if_absent or self._timers.deadline(key) is None:
            self._timers.schedule(key, self._now + max(delay_ms, 0))

    def cancel(self, kind: str, group_id: str, member_id: str) -> None:
        self._timers.cancel((kind, group_id, member_id))

    def install(self, group: ConsumerGroup) -> None:
        """Serve ``group`` (a classic group upgraded), every member's session starting now."""
        self.groups[group.group_id] = group
        for m in group.members.values():
            self.touch(group.group_id, m)

    def drop(self, group_id: str) -> ConsumerGroup | None:
        """Stop serving a group (it became a classic group; its tombstones are the caller's)."""
        group = self.groups.pop(group_id, None)
        if group is not None:
            for mid in group.members:
                self._cancel_timers(group_id, mid)
        return group

    def fence(self, group: ConsumerGroup, member_id: str, records: list) -> None:
        """Remove a member now (a classic member's LeaveGroup, or a deadline of its)."""
        self._fence(group, member_id, records)

    # -- offsets, description, replay -----------------------------------------------------

    def check_offset_request(self, group_id: str, member_id: str | None, member_epoch: int,
                             *, classic_commit: bool = False,
                             partitions: Iterable | None = None) -> OffsetlogError | None:
        """Whether an OffsetCommit (or an OffsetFetch naming a member) from ``member_id`` at
        ``member_epoch`` may go ahead: None, or the error to answer. Epoch -1 with no member
        is a commit from outside the group (an admin client), allowed while it is empty.

        ``classic_commit``: the request is an OffsetCommit of the classic protocol's versions
        (the wire's v8 and older), which a member of the consumer protocol may not send:
        refused after the member is found and before its epoch is judged, as Kafka does.

        ``partitions``: the ``(topic, partition)`` pairs an OffsetCommit commits. A member's
        commit at an older epoch than its own (a classic member's generation alike) is taken
        when every one of them was assigned to it at that epoch or before (KIP-1251,
        ``ConsumerMember.commit_error``); without them (an OffsetFetch) the epoch must be
        the member's."""
        group = self.groups.get(group_id)
        if group is None:
            return None
        if member_epoch < 0 and not group.members:
            return None
        member = group.members.get(member_id or "")
        if member is None:
            return UnknownMemberIdError(
                f"Member {member_id} is not a member of group {group_id}.")
        if classic_commit and not member.uses_classic_protocol:
            return UnsupportedVersionError(
                "OffsetCommit version 9 or above must be used by members of the consumer "
                "group protocol.")
        stale = member.commit_error(member_epoch, partitions)
        if stale is None:
            return None
        # (a classic member's generation is judged by the same rule, KIP-1251's assignment
        # epochs included, as Kafka 4.4 judges it; its clients know ILLEGAL_GENERATION)
        return (IllegalGenerationError if member.uses_classic_protocol
                else StaleMemberEpochError)(stale)

    def group(self, group_id: str) -> ConsumerGroup | None:
        return self.groups.get(group_id)

    def replay(self, records: Iterable[tuple], now_ms: int) -> None:
        """Rebuild the groups from their records (in log order); every member's session
        starts at ``now_ms``, as Kafka's coordinator does when it loads a partition."""
        apply_records(self.groups, records)
        self._now = max(self._now, now_ms)
        for group in self.groups.values():
            for mid, m in group.members.items():
                self.touch(group.group_id, m)
                if m.state == UNREVOKED_PARTITIONS and not m.uses_classic_protocol:
                    self._rebalance_epochs[(group.group_id, mid)] = m.member_epoch
                    self._timers.schedule((REBALANCE, group.group_id, mid),
                                          self._now + max(m.rebalance_timeout_ms, 0))

