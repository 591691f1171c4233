"""A classic group's bookkeeping (Kafka's ``GroupMetadata``/``ClassicGroup``): members, static
members, leader, protocol, generation and state. It answers questions and keeps its own
invariants; deciding *when* to rebalance and what to answer is the coordinator's job.

Members are kept in join order (a dict): the longest-standing member is first. That order makes
leader re-election deterministic, and it is the order of the ``members`` list in the group's
GROUP_METADATA record, so a reloaded group has the same order.
"""

from __future__ import annotations

from collections.abc import Iterable

from offsetlog.assignors import choose_protocol
from offsetlog.group.consumer_protocol import PROTOCOL_TYPE as CONSUMER
from offsetlog.group.consumer_protocol import subscribed_topics
from offsetlog.group.member import Member
from offsetlog.group.state import EMPTY, GroupState, check_transition

#: kinds of the join-phase timer (see ``Group.join_phase``)
INITIAL_DELAY = "initial-delay"
REBALANCE_TIMEOUT = "rebalance-timeout"


class Group:
    """One group. Not thread-safe; the coordinator owns it."""

    def __init__(self, group_id: str, *, state: GroupState = EMPTY, state_timestamp: int | None,
                 generation: int = 0, protocol_type: str | None = None,
                 protocol: str | None = None, leader: str | None = None) -> None:
        self.group_id = group_id
        self.state = state
        #: epoch ms of the last state change (Kafka's currentStateTimestamp); None when it was
        #: loaded from a record that had none
        self.state_timestamp = state_timestamp
        self.generation = generation
        self.protocol_type = protocol_type
        self.protocol = protocol
        self.leader = leader
        self.members: dict[str, Member] = {}
        #: group_instance_id -> member_id of the static members
        self.static_members: dict[str, str] = {}
        #: KIP-394: ids handed out with MemberIdRequired whose owners have not joined yet
        self.pending_members: set[str] = set()
        #: member ids that must still send SyncGroup for this generation (Kafka's
        #: pendingSyncMembers); may keep the old id of a replaced static member (see
        #: :meth:`replace_static_member`)
        self.pending_sync: set[str] = set()
        #: which timer ends the join phase: INITIAL_DELAY (a new group waits for more members)
        #: or REBALANCE_TIMEOUT (wait for known members); None outside PreparingRebalance
        self.join_phase: str | None = None
        #: INITIAL_DELAY bookkeeping: the delay now running and what is left of the rebalance
        #: timeout after it (Kafka's InitialDelayedJoin delayMs / remainingMs)
        self.initial_delay_ms = 0
        self.initial_remaining_ms = 0
        #: a member joined a generation-0 group during its initial delay
        self.new_member_added = False

    def __repr__(self) -> str:
        return (f"<Group {self.group_id!r} {self.state} generation={self.generation} "
                f"members={list(self.members)}>")

    # -- state -----------------------------------------------------------------------------

    def transition_to(self, target: GroupState, now_ms: int) -> None:
        """Change state (checked against the transition table) and stamp the time."""
        check_transition(self.group_id, self.state, target)
        self.state = target
        self.state_timestamp = now_ms

    # -- membership --------------------------------------------------------------------------

    def add(self, member: Member, *, protocol_type: str | None = None) -> None:
        """Add ``member``; the first member of a group sets its ``protocol_type`` (Kafka keeps
        the type after the group empties, and so does the GROUP_METADATA record)."""
        if member.member_id in self.members:
            raise ValueError(f"member {member.member_id!r} is already in group {self.group_id!r}")
        if member.group_instance_id is not None:
            if member.group_instance_id in self.static_members:
                raise ValueError(f"static member {member.group_instance_id!r} is already in "
                                 f"group {self.group_id!r}")
            self.static_members[member.group_instance_id] = member.member_id
        if not self.members and protocol_type is not None:
            self.protocol_type = protocol_type
        if self.leader is None:
            self.leader = member.member_id
        self.members[member.member_id] = member
        self.pending_members.discard(member.member_id)

    def remove(self, member_id: str) -> Member | None:
        member = self.members.pop(member_id, None)
        if member is not None and member.group_instance_id is not None:
            self.static_members.pop(member.group_instance_id, None)
        if self.leader == member_id:
            self.leader = next(iter(self.members), None)
        self.pending_members.discard(member_id)
        self.pending_sync.discard(member_id)
        return member

    def replace_static_member(self, instance_id: str, old_id: str, new_id: str) -> Member:
        """Give the static member ``instance_id`` a new member id, keeping its place in the join
        order, its leadership and everything else.

        A SyncGroup the old member id still owes stays owed under the old id, which the new one
        cannot send (Kafka's ``replaceStaticMember`` leaves ``pendingSyncMembers`` alone too), so
        the sync deadline rebalances the group. That rebalance matters: an old member id that
        never synced this generation took no part in it (it missed the join phase, or restarted
        before syncing), so the assignment was made without its current subscription, and a
        cooperative assignment may be holding back partitions it is expected to revoke. The new
        process owns nothing and revokes nothing; without the rebalance those partitions would
        stay unowned."""
        member = self.members[old_id]
        self.members = {(new_id if mid == old_id else mid): m for mid, m in self.members.items()}
        member.member_id = new_id
        self.static_members[instance_id] = new_id
        if self.leader == old_id:
            self.leader = new_id
        return member

    def static_member_id(self, instance_id: str | None) -> str | None:
        return None if instance_id is None else self.static_members.get(instance_id)

    # -- the join phase ------------------------------------------------------------------------

    def rebalance_timeout_ms(self) -> int:
        """How long the join phase waits for known members: the longest of theirs (0 if none)."""
        return max((m.rebalance_timeout_ms for m in self.members.values()), default=0)

    def awaiting_join_count(self) -> int:
        return sum(1 for m in self.members.values() if m.awaiting_join)

    def has_all_members_joined(self) -> bool:
        return (not self.pending_members
                and all(m.awaiting_join for m in self.members.values()))

    def not_yet_rejoined(self) -> list[Member]:
        return [m for m in self.members.values() if not m.awaiting_join]

    def elect_joined_leader(self) -> bool:
        """Keep the leader if it rejoined, else make the longest-standing member that did the
        leader. False if there is no leader or no member rejoined."""
        leader = self.members.get(self.leader) if self.leader is not None else None
        if leader is None:
            return False
        if leader.awaiting_join:
            return True
        for member in self.members.values():
            if member.awaiting_join:
                self.leader = member.member_id
                return True
        return False

    # -- protocols ----------------------------------------------------------------------------

    def member_protocols(self) -> dict[str, list[str]]:
        return {mid: m.protocol_names() for mid, m in self.members.items()}

    def common_protocols(self) -> set[str]:
        """The protocols every member supports (the vote's candidates)."""
        lists = [set(m.protocol_names()) for m in self.members.values()]
        return set.intersection(*lists) if lists else set()

    def supports_protocols(self, protocol_type: str, names: Iterable[str]) -> bool:
        """Whether a member offering ``names`` under ``protocol_type`` may join (Kafka's
        ``supportsProtocols``): any non-empty offer while Empty; otherwise the same protocol type
        and at least one protocol that every member supports."""
        names = set(names)
        if self.state is EMPTY:
            return bool(protocol_type) and bool(names)
        if protocol_type != self.protocol_type:
            return False
        if not self.members:  # everybody left mid-rebalance: no protocol is excluded yet
            return bool(names)
        return bool(names & self.common_protocols())

    def select_protocol(self) -> str:
        """The protocol vote (``offsetlog.assignors.choose_protocol``, Kafka's rules with a
        deterministic tie-break), over the members' protocol lists."""
        return choose_protocol(self.member_protocols())

    # -- what retention needs ------------------------------------------------------------------

    def subscribed_topics(self) -> frozenset[str] | None:
        """Topics the members subscribe to, or None if unknown (not a consumer group, no
        protocol chosen, or a subscription that does not parse) - Kafka's
        ``computeSubscribedTopics``."""
        if self.protocol_type != CONSUMER:
            return None
        if not self.members:
            return frozenset()
        if self.protocol is None:
            return None
        topics: set[str] = set()
        for member in self.members.values():
            try:
                found = subscribed_topics(member.metadata(self.protocol))
            except KeyError:
                return None
            if found is None:
                return None
            topics |= found
        return frozenset(topics)
