"""A consumer-protocol member and how it moves towards its target assignment.

A member's assignment is a frozenset of ``(topic, partition)``. Its reconciliation follows
Kafka's ``CurrentAssignmentBuilder``, in three states:

* ``stable``: the member has everything of its target it can have at its epoch;
* ``unrevoked_partitions``: it must first give up partitions that are no longer its
  (``pending_revocation``); it stays at its epoch, keeps ``assigned`` (what it may still
  own, its target's share of what it had) and moves on only when a heartbeat's owned
  partitions no longer include any partition pending revocation;
* ``unreleased_partitions``: it is at the target epoch but some partitions of its target are
  still owned (assigned or pending revocation) by another member; it gets them on a later
  heartbeat, once they are free.

So a partition is never given to a member while another member may still own it.

Each partition a member owns carries its *assignment epoch*, the member epoch at which it was
given the partition (Kafka's KIP-1251): a partition kept through later epochs keeps it. An
OffsetCommit at an older epoch than the member's is then taken for the partitions it held
since that epoch or before (``commit_error``).
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from dataclasses import dataclass, replace

STABLE = "stable"
UNREVOKED_PARTITIONS = "unrevoked_partitions"
UNRELEASED_PARTITIONS = "unreleased_partitions"
STATES = (STABLE, UNREVOKED_PARTITIONS, UNRELEASED_PARTITIONS)

#: the member epoch a member sends to leave, and a static member to leave for a while
LEAVE_EPOCH = -1
LEAVE_STATIC_EPOCH = -2

NOTHING: frozenset = frozenset()


@dataclass(frozen=True)
class ClassicMetadata:
    """What a classic-protocol member of a consumer group joined with."""

    session_timeout_ms: int
    #: its JoinGroup protocols, ``(name, metadata)``, most preferred first
    protocols: tuple[tuple[str, bytes], ...]

    @classmethod
    def from_value(cls, value: dict | None) -> ClassicMetadata | None:
        if value is None:
            return None
        return cls(int(value["session_timeout_ms"]),
                   tuple((str(n), bytes(m)) for n, m in value["supported_protocols"]))

    def protocol_name(self) -> str:
        """The protocol a JoinGroup answer names: its most preferred (Kafka's)."""
        return self.protocols[0][0]


@dataclass(frozen=True)
class ConsumerMember:
    member_id: str
    instance_id: str | None = None
    rack_id: str | None = None
    client_id: str = ""
    client_host: str = ""
    subscribed_topics: tuple[str, ...] = ()  # sorted, no repeats
    subscribed_topic_regex: str | None = None  # RE2 syntax (``regex``); None: none
    server_assignor: str | None = None
    rebalance_timeout_ms: int = -1
    # the current assignment (Kafka's ConsumerGroupCurrentMemberAssignment)
    state: str = STABLE
    member_epoch: int = 0
    previous_member_epoch: int = 0
    assigned: frozenset = NOTHING
    pending_revocation: frozenset = NOTHING
    #: ``((topic, partition), epoch)`` pairs, sorted: the assignment epoch of each partition
    #: of ``assigned`` and ``pending_revocation`` that has a known one (a record written before
    #: assignment epochs has none: its partitions take only commits at the member's epoch)
    assignment_epochs: tuple = ()
    #: a member that speaks the classic protocol (JoinGroup, SyncGroup, Heartbeat) in a
    #: consumer group: its session timeout and JoinGroup protocols (Kafka's
    #: ClassicMemberMetadata); None for a consumer-protocol member
    classic: ClassicMetadata | None = None

    @property
    def uses_classic_protocol(self) -> bool:
        return self.classic is not None

    def metadata(self) -> dict:
        out = {"instance_id": self.instance_id, "rack_id": self.rack_id,
               "client_id": self.client_id, "client_host": self.client_host,
               "subscribed_topic_names": list(self.subscribed_topics),
               "server_assignor": self.server_assignor,
               "rebalance_timeout_ms": self.rebalance_timeout_ms}
        if self.subscribed_topic_regex is not None:  # left out when none: older readers
            out["subscribed_topic_regex"] = self.subscribed_topic_regex
        if self.classic is not None:  # likewise: only a classic member's record has it
            out["classic_member_metadata"] = {
                "session_timeout_ms": self.classic.session_timeout_ms,
                "supported_protocols": [[n, m] for n, m in self.classic.protocols]}
        return out

    def current_assignment(self) -> dict:
        out = {"member_epoch": self.member_epoch,
               "previous_member_epoch": self.previous_member_epoch, "state": self.state,
               "assigned": partitions_value(self.assigned),
               "pending_revocation": partitions_value(self.pending_revocation)}
        if self.assignment_epochs:  # left out when none: records as before
            out["assignment_epochs"] = epochs_value(self.assignment_epochs)
        return out

    def commit_error(self, member_epoch: int, partitions: Iterable | None) -> str | None:
        """Why this consumer-protocol member's OffsetCommit at ``member_epoch`` of
        ``partitions`` (``(topic, partition)`` pairs; None: not known) is stale, or None
        when it may go ahead: at its own epoch, anything; at an older one, only partitions it
        owns and was given at that epoch or before (KIP-1251); at a newer one, nothing."""
        if member_epoch == self.member_epoch:
            return None
        if member_epoch > self.member_epoch or partitions is None:
            return f"The member epoch {member_epoch} is not the current one ({self.member_epoch})."
        epochs = dict(self.assignment_epochs)
        for tp in partitions:
            at = epochs.get((tp[0], tp[1]))
            if at is None or at > member_epoch:
                return (f"Partition {tp[0]}-{tp[1]} was not assigned to the member at epoch "
                        f"{member_epoch} (its epoch is {self.member_epoch}).")
        return None

    def owned(self) -> frozenset:
        """Every partition this member may own now: assigned or still to revoke."""
        return self.assigned | self.pending_revocation


def partitions_value(tps: Iterable) -> list:
    """``[[topic, [partition, ...]], ...]``, topics by name, partitions ascending: how records
    and responses carry an assignment."""
    by_topic: dict[str, list[int]] = {}
    for t, p in sorted(tps):
        by_topic.setdefault(t, []).append(p)
    return [[t, ps] for t, ps in by_topic.items()]


def partitions_from_value(value: Iterable) -> frozenset:
    return frozenset((t, int(p)) for t, ps in value for p in ps)


def epochs_value(epochs: Iterable) -> list:
    """``[[topic, [[partition, epoch], ...]], ...]``, topics by name, partitions ascending:
    how a record carries assignment epochs."""
    by_topic: dict[str, list[list[int]]] = {}
    for (t, p), e in sorted(epochs):
        by_topic.setdefault(t, []).append([p, e])
    return [[t, pes] for t, pes in by_topic.items()]


def epochs_from_value(value: Iterable) -> tuple:
    return tuple(sorted(((t, int(p)), int(e)) for t, pes in value for p, e in pes))


def given_at(partitions: Iterable, epoch: int) -> tuple:
    """Assignment epochs (``ConsumerMember.assignment_epochs``) of ``partitions``, all
    given at ``epoch``."""
    return tuple(sorted((tp, epoch) for tp in partitions))


def _epochs_of(member: ConsumerMember, keep: frozenset, new: frozenset = NOTHING,
               new_epoch: int = 0) -> tuple:
    """The assignment epochs of a member that keeps ``keep`` and is given ``new`` at
    ``new_epoch``: a kept partition keeps its epoch (0 for a static member's new process);
    one without (a record from before assignment epochs) takes the member's epoch as it
    leaves it, if it had one."""
    old = dict(member.assignment_epochs)
    out = {}
    for tp in keep:
        at = old.get(tp)
        if at is None and member.member_epoch > 0:
            at = member.member_epoch
        if at is not None:
            out[tp] = at
    for tp in new:
        out[tp] = new_epoch
    return tuple(sorted(out.items()))


def _with_epoch(member: ConsumerMember, epoch: int, **changes) -> ConsumerMember:
    """Kafka's ``updateMemberEpoch``: the epoch it leaves becomes the previous one."""
    return replace(member, member_epoch=epoch, previous_member_epoch=member.member_epoch,
                   **changes)


def reconcile(member: ConsumerMember, target_epoch: int, target: frozenset,
              partition_owner_epoch: Callable[[tuple], int],
              owned: frozenset | None) -> ConsumerMember:
    """The member's next current assignment, given the group's target epoch, the member's
    target, the epoch of whichever member owns a partition now (-1 if none does) and the
    partitions the member says it owns (None if this heartbeat does not say)."""
    if member.state == STABLE:
        if member.member_epoch == target_epoch:
            return member
        return _next(member, member.member_epoch, target_epoch, target, partition_owner_epoch,
                     owned)
    if member.state == UNREVOKED_PARTITIONS:
        if _still_owns(owned, member.pending_revocation):
            return member
        # revoked: on to the target's epoch, unless more is to be revoked first, which the
        # member does at the epoch it has (Kafka 4.2+, KAFKA-19974: no partition is owned by
        # two members at one epoch, even one after the other)
        return _next(member, member.member_epoch, target_epoch, target,
                     partition_owner_epoch, owned)
    return _next(member, member.member_epoch, target_epoch, target, partition_owner_epoch,
                 owned)


def _still_owns(owned: frozenset | None, revoking: frozenset) -> bool:
    return owned is None or not owned.isdisjoint(revoking)


def _next(member, epoch, target_epoch, target, partition_owner_epoch, owned) -> ConsumerMember:
    kept = member.assigned & target
    revoking = member.assigned - kept
    pending = target - kept
    # (a partition this member itself was revoking is not another's to release: the member
    # has just said it gave it up, and Kafka 4.4 hands it back at once)
    unreleased = frozenset(tp for tp in pending if tp not in member.pending_revocation
                           and partition_owner_epoch(tp) != -1)
    pending -= unreleased
    if revoking and _still_owns(owned, revoking):
        return _with_epoch(member, epoch, state=UNREVOKED_PARTITIONS, assigned=kept,
                           pending_revocation=revoking,
                           assignment_epochs=_epochs_of(member, kept | revoking))
    state = UNRELEASED_PARTITIONS if unreleased else STABLE
    return _with_epoch(member, target_epoch, state=state, assigned=kept | pending,
                       pending_revocation=NOTHING,
                       assignment_epochs=_epochs_of(member, kept, pending, target_epoch))
