"""Who may act for a group: member checks and offset-commit fencing, in Kafka's order (pure).

Offset commits (Kafka's ``validateOffsetCommit`` then ``doCommitOffsets``), first failing rule
wins:

1. no such group: generation -1 is accepted (a standalone consumer; any member id is ignored,
   as Kafka ignores it); a generation >= 0 is ``IllegalGenerationError``. A group without
   group metadata whose offsets the log holds is no such group but Kafka's *simple group*
   (an Empty group of generation 0 without members: ``validate_offset_commit``'s
   ``holds_offsets``), so the rules below judge it: a member id or generation gets
   ``UnknownMemberIdError`` there;
2. the group is Dead: ``CoordinatorNotAvailableError``;
3. generation -1 and the group is Empty: accepted (an admin tool or a standalone consumer
   committing for an idle group);
4. a generation >= 0, a member id or an instance id: the caller claims membership, so
   a. an instance id that is not in the group: ``UnknownMemberIdError``;
   b. an instance id bound to another member id: ``FencedInstanceIdError``;
   c. a member id that is not in the group: ``UnknownMemberIdError``;
   d. a generation other than the group's: ``IllegalGenerationError``;
5. generation -1 without member or instance id while the group has members:
   ``UnknownMemberIdError`` (only members commit for a group with members);
6. the group is CompletingRebalance: ``RebalanceInProgressError`` (the member knows the new
   generation but has no assignment yet); PreparingRebalance and Stable accept.

Transactional commits (TxnOffsetCommit) are exempt from rules 5 and 6, as in Kafka: its
versions 0-2 carry no member id or generation, and a producer whose consumer never joined a
group sends member ``""`` and generation -1 in v3+ too.

An accepted commit from a member counts as its heartbeat; the coordinator applies that (this
module changes nothing).
"""

from __future__ import annotations

from offsetlog.errors import (
    FencedInstanceIdError,
    IllegalGenerationError,
    OffsetlogError,
    RebalanceInProgressError,
    UnknownMemberIdError,
)
from offsetlog.group.consumer_protocol import PROTOCOL_TYPE as CONSUMER
from offsetlog.group.errors import (
    CoordinatorNotAvailableError,
    GroupSubscribedToTopicError,
    NonEmptyGroupError,
)
from offsetlog.group.group import Group
from offsetlog.group.state import COMPLETING_REBALANCE, DEAD, EMPTY


def check_member(group: Group, member_id: str, group_instance_id: str | None,
                 operation: str) -> OffsetlogError | None:
    """Kafka's ``validateCurrentMember``: the instance id (if given) must exist and be bound to
    ``member_id``, and ``member_id`` must be a member."""
    if group_instance_id is not None:
        bound = group.static_members.get(group_instance_id)
        if bound is None:
            return UnknownMemberIdError(
                f"{operation}: group {group.group_id!r} has no static member "
                f"{group_instance_id!r}")
        if bound != member_id:
            return FencedInstanceIdError(
                f"{operation}: instance {group_instance_id!r} of group {group.group_id!r} is now "
                f"member {bound!r}; member {member_id!r} is fenced")
    if member_id not in group.members:
        return UnknownMemberIdError(
            f"{operation}: group {group.group_id!r} has no member {member_id!r}")
    return None


def check_generation(group: Group, generation_id: int, operation: str
                     ) -> IllegalGenerationError | None:
    if generation_id != group.generation:
        return IllegalGenerationError(
            f"{operation}: group {group.group_id!r} is at generation {group.generation}, "
            f"not {generation_id}")
    return None


def check_offset_commit(group: Group | None, *, member_id: str, group_instance_id: str | None,
                        generation_id: int, transactional: bool = False
                        ) -> OffsetlogError | None:
    """The error that rejects this commit, or None to accept it (rules in the module doc)."""
    if group is None:
        if generation_id < 0:
            return None
        return IllegalGenerationError(
            f"offset-commit: there is no group with generation {generation_id}: the group is not "
            "managed by the coordinator, so commit with generation_id=-1")
    if group.state is DEAD:
        return CoordinatorNotAvailableError(
            f"offset-commit: group {group.group_id!r} is being deleted")
    if generation_id < 0 and group.state is EMPTY:
        return None
    if generation_id >= 0 or member_id or group_instance_id is not None:
        error = (check_member(group, member_id, group_instance_id, "offset-commit")
                 or check_generation(group, generation_id, "offset-commit"))
        if error is not None:
            return error
    elif not transactional:
        return UnknownMemberIdError(
            f"offset-commit: group {group.group_id!r} has members; only they may commit "
            "(pass member_id and generation_id)")
    if group.state is COMPLETING_REBALANCE and not transactional:
        return RebalanceInProgressError(
            f"offset-commit: group {group.group_id!r} is completing a rebalance; commit after "
            "SyncGroup")
    return None


def check_offset_delete(group: Group | None, group_id: str, partitions) -> None:
    """Kafka's OffsetDelete rule (KIP-496): an unmanaged or Empty group's offsets can all be
    deleted; a consumer group with members refuses the partitions of topics they subscribe
    to; any other group with members refuses the request. offsetlog refuses the whole call
    where Kafka answers per partition (as for commits: all or nothing).

    :raises GroupSubscribedToTopicError: a requested topic is subscribed; nothing deleted
    :raises NonEmptyGroupError: the group has members and is not a consumer group
    """
    if group is None or group.state is EMPTY or group.state is DEAD:
        return
    if group.protocol_type != CONSUMER:
        raise NonEmptyGroupError(f"group {group_id!r} is {group.state} and not a consumer "
                                 "group; its offsets can be deleted once it is empty")
    topics = group.subscribed_topics() or frozenset()  # unknown: nothing counts, as Kafka
    check_unsubscribed(f"group {group_id!r} is {group.state} and", topics, partitions)


def check_unsubscribed(group: str, topics, partitions) -> None:
    """Refuse an OffsetDelete of ``partitions`` if any is of one of ``topics``, the topics
    the group's members subscribe to; ``group`` names the group in the message. Shared by
    classic consumer groups (above) and KIP-848 consumer groups (``Migration``).

    :raises GroupSubscribedToTopicError: naming every such partition
    """
    busy = sorted(tp for tp in partitions if tp[0] in topics)
    if busy:
        raise GroupSubscribedToTopicError(
            f"{group} subscribes to {sorted({tp[0] for tp in busy})}; their offsets can be "
            "deleted once no member subscribes to them", partitions=busy)
