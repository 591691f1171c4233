"""The five states of a classic consumer group, and which state may follow which.

Rules (Kafka's ``GroupMetadata``/``ClassicGroupState``):

* A group is born **Empty** (a first JoinGroup creates it) and is loaded from the log as
  **Empty** (no members) or **Stable** (members), whatever it was in when it was written.
* Every rebalance goes Empty/Stable/CompletingRebalance -> **PreparingRebalance** (collect
  JoinGroups) -> **CompletingRebalance** (wait for the leader's SyncGroup) -> **Stable**; a
  rebalance that ends with no members goes PreparingRebalance -> Empty instead.
* **Dead** is final: the group is being deleted or unloaded and is dropped from the coordinator.

Transitions are data: :data:`VALID_PREVIOUS_STATES` maps a target state to the states it may be
entered from. :func:`check_transition` raises :class:`IllegalGroupTransitionError` for anything
else, before the caller changes anything, so a refused transition leaves the group as it was.

How each state answers (the coordinator implements this; docs/GROUPS.md has the same table):

Empty
    join: accepted, starts a rebalance (after the initial delay). sync, heartbeat, leave:
    UnknownMemberId. commit: only with generation -1 (a standalone consumer or admin).
    Preceded by: PreparingRebalance (a rebalance ended with no members); or created/loaded so.
PreparingRebalance
    join: parked until every known member has rejoined or the join deadline passes.
    sync, heartbeat: RebalanceInProgress (a heartbeat still counts). leave: member removed,
    which may complete the join phase. commit: accepted from members of the current generation.
    Preceded by: Empty, Stable, CompletingRebalance.
CompletingRebalance
    join: same metadata -> the current generation again; changed metadata -> new rebalance.
    sync: parked until the leader's SyncGroup, which completes it. heartbeat: OK.
    leave: member removed, new rebalance. commit: RebalanceInProgress.
    Preceded by: PreparingRebalance.
Stable
    join: the leader, or changed metadata -> new rebalance; else the current generation.
    sync: the member's assignment. heartbeat: OK. leave: member removed, new rebalance.
    commit: accepted from members of the current generation.
    Preceded by: CompletingRebalance; or loaded so.
Dead
    everything: CoordinatorNotAvailable (the group is being deleted or unloaded).
    Preceded by: any state.
"""

from __future__ import annotations

from enum import StrEnum

from offsetlog.group.errors import IllegalGroupTransitionError


class GroupState(StrEnum):
    """A classic group's state; the value is Kafka's name for it (as DescribeGroups shows it)."""

    EMPTY = "Empty"
    PREPARING_REBALANCE = "PreparingRebalance"
    COMPLETING_REBALANCE = "CompletingRebalance"
    STABLE = "Stable"
    DEAD = "Dead"


EMPTY = GroupState.EMPTY
PREPARING_REBALANCE = GroupState.PREPARING_REBALANCE
COMPLETING_REBALANCE = GroupState.COMPLETING_REBALANCE
STABLE = GroupState.STABLE
DEAD = GroupState.DEAD

#: target state -> the states a group may be in to enter it
VALID_PREVIOUS_STATES: dict[GroupState, frozenset[GroupState]] = {
    # the last member left, or a rebalance ended with nobody
    EMPTY: frozenset({PREPARING_REBALANCE}),
    # a member joined, left, changed its metadata or failed
    PREPARING_REBALANCE: frozenset({EMPTY, STABLE, COMPLETING_REBALANCE}),
    # the join phase completed with members
    COMPLETING_REBALANCE: frozenset({PREPARING_REBALANCE}),
    # the leader's SyncGroup brought the assignment
    STABLE: frozenset({COMPLETING_REBALANCE}),
    # deletion, expiry or unload: from anywhere, and idempotent
    DEAD: frozenset(GroupState),
}


def check_transition(group_id: str, source: GroupState, target: GroupState) -> None:
    """Raise :class:`IllegalGroupTransitionError` unless ``source -> target`` is allowed."""
    if source not in VALID_PREVIOUS_STATES[target]:
        allowed = ", ".join(sorted(VALID_PREVIOUS_STATES[target]))
        raise IllegalGroupTransitionError(
            f"group {group_id!r} cannot go from {source} to {target} "
            f"(only from: {allowed})", source=str(source), target=str(target))


def can_rebalance(state: GroupState) -> bool:
    """Whether a group in ``state`` may start a rebalance now."""
    return state in VALID_PREVIOUS_STATES[PREPARING_REBALANCE]
