"""Which member a ConsumerGroupHeartbeat names, and whether it may: a dynamic member by its
id, a static one by its instance id (a new process of an instance that left for now takes
its place), and Kafka's member-epoch rule. Pure functions of the group and the request; the
coordinator (``coordinator.py``) applies what they return."""

from __future__ import annotations

from dataclasses import replace

from offsetlog.errors import FencedInstanceIdError, UnknownMemberIdError
from offsetlog.group.consumer.errors import FencedMemberEpochError, UnreleasedInstanceIdError
from offsetlog.group.consumer.group import ConsumerGroup
from offsetlog.group.consumer.member import LEAVE_STATIC_EPOCH, ConsumerMember, given_at


def dynamic_member(group: ConsumerGroup, member_id: str, member_epoch: int,
                   owned: frozenset | None) -> ConsumerMember:
    """The dynamic member a heartbeat names: a new one at epoch 0, else the known one, its
    epoch checked (``check_epoch``)."""
    member = group.members.get(member_id)
    if member is None:
        if member_epoch != 0:
            raise UnknownMemberIdError(
                f"Member {member_id} is not a member of group {group.group_id}.")
        return ConsumerMember(member_id)
    if member_epoch != 0:
        check_epoch(member, member_epoch, owned)
    return member


def new_process(existing: ConsumerMember, member_id: str) -> ConsumerMember:
    """A consumer-protocol static member's new process, ``member_id``, in ``existing``'s
    place: at epoch 0, holding the instance's partitions as given at epoch 0, as Kafka 4.4
    resets them, so a commit of the instance at any epoch up to its own is taken for them.
    (A classic member's new process keeps their epochs: ``classic._member``.)"""
    return replace(existing, member_id=member_id, member_epoch=0, previous_member_epoch=0,
                   assignment_epochs=given_at(existing.assigned, 0))


def static_member(group: ConsumerGroup, member_id: str, member_epoch: int, instance_id: str,
                  owned: frozenset | None) -> tuple[ConsumerMember, ConsumerMember | None]:
    """The static member a heartbeat names, and the one it replaces (a new process of an
    instance that left for now takes its place) or None; its epoch checked."""
    existing_id = group.static.get(instance_id)
    existing = group.members.get(existing_id) if existing_id is not None else None
    if member_epoch == 0:
        if existing is None:
            return group.members.get(member_id) or ConsumerMember(member_id), None
        if existing.member_epoch != LEAVE_STATIC_EPOCH:
            raise UnreleasedInstanceIdError(
                f"Static member {member_id} with instance id {instance_id} cannot join the "
                f"group because the instance id is owned by {existing.member_id} member.")
        return new_process(existing, member_id), existing
    if existing is None:
        raise UnknownMemberIdError(f"Instance id {instance_id} is unknown.")
    if existing.member_id != member_id:
        raise FencedInstanceIdError(
            f"Static member {member_id} with instance id {instance_id} is fenced by "
            f"existing member {existing.member_id}.")
    check_epoch(existing, member_epoch, owned)
    return existing, None


def check_epoch(member: ConsumerMember, received: int, owned: frozenset | None) -> None:
    """Kafka's epoch rule for a heartbeat: its own epoch, or the previous one with no
    partition it no longer has; else ``FencedMemberEpochError``."""
    if received > member.member_epoch:
        raise FencedMemberEpochError(
            f"The consumer group member has a greater member epoch ({received}) than the one "
            f"known by the group coordinator ({member.member_epoch}). The member must abandon "
            "all its partitions and rejoin.")
    if received < member.member_epoch and (
            received != member.previous_member_epoch or owned is None
            or not owned <= member.assigned):
        raise FencedMemberEpochError(
            f"The consumer group member has a smaller member epoch ({received}) than the one "
            f"known by the group coordinator ({member.member_epoch}). The member must abandon "
            "all its partitions and rejoin.")
