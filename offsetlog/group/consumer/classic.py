"""Classic-protocol members of a consumer group: JoinGroup, SyncGroup, Heartbeat and LeaveGroup
answered by the consumer group coordinator (Kafka's ``classicGroup*ToConsumerGroup``).

A classic group upgraded to a consumer group (``offsetlog.group.migration``) keeps its members;
they, and classic members joining later, go on speaking the classic protocol, and the
coordinator maps it onto the consumer group's model:

* **JoinGroup** is a heartbeat that (re)states the member's subscription (from its "consumer"
  protocol metadata: topics, owned partitions, rack). It is answered at once, never parked:
  the generation is the member's epoch after reconciliation, the protocol its most preferred,
  no leader and no member list (the server assigns). The member must then sync within its
  rebalance timeout.
* **SyncGroup** answers the member's current assignment, in the "consumer" protocol's
  Assignment of its subscription's version; REBALANCE_IN_PROGRESS when the group epoch moved
  past the member's epoch (unless it still has partitions to revoke).
* **Heartbeat** restarts the member's session (its own session timeout) and answers
  REBALANCE_IN_PROGRESS when the member should rejoin: the group epoch moved past its epoch,
  it has partitions to revoke, or partitions it waits for have been released. It must rejoin
  within its rebalance timeout.
* **LeaveGroup** removes members and bumps the group epoch once.

Every handler takes the coordinator, the group (which has members) and the classic
``request_id`` its answer carries; errors are answers, as in ``offsetlog.group.responses``.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping
from dataclasses import replace

from offsetlog.assignors.errors import InconsistentGroupProtocolError
from offsetlog.errors import (
    FencedInstanceIdError,
    IllegalGenerationError,
    OffsetlogError,
    RebalanceInProgressError,
    UnknownMemberIdError,
)
from offsetlog.group.consumer.coordinator import JOIN, SYNC, ConsumerGroupCoordinator
from offsetlog.group.consumer.group import ConsumerGroup, group_record, removal_records
from offsetlog.group.consumer.member import (
    UNRELEASED_PARTITIONS,
    UNREVOKED_PARTITIONS,
    ClassicMetadata,
    ConsumerMember,
)
from offsetlog.group.consumer_protocol import PROTOCOL_TYPE, decode_subscription, encode_assignment
from offsetlog.group.errors import GroupMaxSizeReachedError, MemberIdRequiredError
from offsetlog.group.responses import (
    HeartbeatResponse,
    JoinGroupResponse,
    LeaveGroupResponse,
    LeaveMemberResponse,
    MemberIdentity,
    SyncGroupResponse,
)


def supports_protocols(group: ConsumerGroup, protocol_type: str, names: Iterable[str]) -> bool:
    """Kafka's ``supportsClassicProtocols``: protocol type "consumer", and some protocol that
    every classic member of the group supports."""
    names = set(names)
    if protocol_type != PROTOCOL_TYPE or not names:
        return False
    classic = [m for m in group.members.values() if m.classic is not None]
    return any(all(n in {p for p, _ in m.classic.protocols} for m in classic) for n in names)


def join(coord: ConsumerGroupCoordinator, group: ConsumerGroup, *, request_id: int,
         member_id: str, group_instance_id: str | None, client_id: str, client_host: str,
         session_timeout_ms: int, rebalance_timeout_ms: int, protocol_type: str,
         protocols: tuple, require_known_member_id: bool, topics: Mapping[str, int],
         records: list,
         unsettled: Callable[[ConsumerMember], bool] | None = None) -> JoinGroupResponse:
    """A classic member's JoinGroup to ``group``; its records go to ``records``.

    :param unsettled: asked, once the member's subscription is written (and the group epoch
        bumped if it changed), whether to leave the target and the member as they are: the
        caller turns the group classic with a rebalance instead (``Migration``: a stale
        target at a downgrade), and the answer names the member's epoch unreconciled."""
    unknown = not member_id
    if unknown:
        member_id = coord.config.member_id_factory()
    try:
        max_size = coord.config.max_size
        if max_size is not None and len(group.members) >= max_size and (
                unknown or member_id not in group.members):
            raise GroupMaxSizeReachedError(
                f"The consumer group has reached its maximum capacity of {max_size} members.")
        if not supports_protocols(group, protocol_type, (n for n, _ in protocols)):
            raise InconsistentGroupProtocolError(
                f"Member {member_id}'s protocols are not supported.", member_protocols={})
        if unknown and require_known_member_id and group_instance_id is None:
            return JoinGroupResponse(request_id, MemberIdRequiredError(
                "a new member must join again with the member id it was given"),
                member_id=member_id)
        try:
            subscription = decode_subscription(protocols[0][1])
        except ValueError as e:
            raise InconsistentGroupProtocolError(
                f"Member {member_id}'s consumer protocol subscription is malformed: {e}",
                member_protocols={}) from None
        member, replaced = _member(group, member_id, group_instance_id, unknown)
    except OffsetlogError as e:
        return JoinGroupResponse(request_id, e, member_id="" if unknown else member_id)
    if replaced is not None:
        coord.replace_static(group, replaced, member, records)
    classic = ClassicMetadata(session_timeout_ms, tuple(protocols))
    updated = replace(
        member, instance_id=group_instance_id or member.instance_id,
        rack_id=subscription["rack_id"] or member.rack_id,
        rebalance_timeout_ms=rebalance_timeout_ms,
        subscribed_topics=tuple(sorted(set(subscription["topics"]))),
        client_id=client_id, client_host=client_host, classic=classic)
    owned = frozenset((tp.topic, tp.partition) for tp in subscription["owned_partitions"]
                      if tp.topic in topics)
    coord.update_subscription(group, member, updated, topics, records)
    if unsettled is not None and unsettled(updated):
        reconciled = updated
    else:
        reconciled = coord.settle_member(group, updated, owned, records)
    coord.cancel(JOIN, group.group_id, member_id)
    coord.touch(group.group_id, reconciled)
    coord.schedule(SYNC, group.group_id, member_id, rebalance_timeout_ms)
    return JoinGroupResponse(request_id, None, member_id=member_id,
                             generation_id=reconciled.member_epoch, protocol_type=PROTOCOL_TYPE,
                             protocol_name=classic.protocol_name(), leader_id="")


def _member(group: ConsumerGroup, member_id: str, instance_id: str | None, unknown: bool):
    """(the member as it is, the static member it replaces or None)."""
    if instance_id is None:
        return group.members.get(member_id) or ConsumerMember(member_id), None
    existing_id = group.static.get(instance_id)
    if existing_id is None:
        return group.members.get(member_id) or ConsumerMember(member_id), None
    existing = group.members[existing_id]
    if unknown:  # a static member's new process takes over its place, and (unlike a
        # consumer-protocol one, ``membership.new_process``) keeps its partitions' assignment
        # epochs, as Kafka 4.4 does (judged by tests/kafka/test_diff_random_mixed_groups.py)
        return replace(existing, member_id=member_id, member_epoch=0,
                       previous_member_epoch=0), existing
    if existing_id != member_id:
        raise FencedInstanceIdError(
            f"Static member {member_id} with instance id {instance_id} is fenced by existing "
            f"member {existing_id}.")
    return existing, None


def _known(group: ConsumerGroup, member_id: str, instance_id: str | None, *,
           classic_only: bool = True) -> ConsumerMember:
    """Kafka's ``validateConsumerGroupMember`` and ``throwIfMemberDoesNotUseClassicProtocol``."""
    if instance_id is None:
        member = group.members.get(member_id)
        if member is None:
            raise UnknownMemberIdError(
                f"Member {member_id} is not a member of group {group.group_id}.")
    else:
        static_id = group.static.get(instance_id)
        if static_id is None:
            raise UnknownMemberIdError(f"Member with instance id {instance_id} is not a member "
                                       f"of group {group.group_id}.")
        if static_id != member_id:
            raise FencedInstanceIdError(
                f"Static member {member_id} with instance id {instance_id} is fenced by "
                f"existing member {static_id}.")
        member = group.members[static_id]
    if classic_only and member.classic is None:
        raise UnknownMemberIdError(f"Member {member.member_id} does not use the classic protocol.")
    return member


def _check_generation(member: ConsumerMember, generation_id: int) -> None:
    if generation_id != member.member_epoch:
        raise IllegalGenerationError(
            f"The request generation id {generation_id} is not equal to the member epoch "
            f"{member.member_epoch} of member {member.member_id}.")


def sync(coord: ConsumerGroupCoordinator, group: ConsumerGroup, *, request_id: int,
         member_id: str, group_instance_id: str | None, generation_id: int,
         protocol_type: str | None, protocol_name: str | None) -> SyncGroupResponse:
    try:
        member = _known(group, member_id, group_instance_id)
        _check_generation(member, generation_id)
        name = member.classic.protocol_name()
        if protocol_type is not None and protocol_type != PROTOCOL_TYPE:
            raise InconsistentGroupProtocolError(
                f"The protocol type {protocol_type} from member {member_id} request is not equal "
                f"to the group protocol type {PROTOCOL_TYPE}.", member_protocols={})
        if protocol_name is not None and protocol_name != name:
            raise InconsistentGroupProtocolError(
                f"The protocol name {protocol_name} from member {member_id} request is not equal "
                f"to the protocol name {name} returned in the join response.",
                member_protocols={})
        # (the assignment epoch, not the group's: a leave bumps the group epoch but leaves the
        # target to the next heartbeat, and only a new target is worth a rejoin; Kafka 4.4,
        # KAFKA-20272)
        if group.assignment_epoch > member.member_epoch and member.state != UNREVOKED_PARTITIONS:
            coord.schedule(JOIN, group.group_id, member.member_id, member.rebalance_timeout_ms,
                           if_absent=True)
            raise RebalanceInProgressError(
                f"A new rebalance is triggered in group {group.group_id} and member "
                f"{member.member_id} should rejoin to catch up.")
    except OffsetlogError as e:
        return SyncGroupResponse(request_id, e)
    coord.cancel(SYNC, group.group_id, member.member_id)
    coord.touch(group.group_id, member)
    return SyncGroupResponse(request_id, None, protocol_type, protocol_name,
                             assignment_bytes(member, member.assigned))


def assignment_bytes(member: ConsumerMember, partitions: Iterable) -> bytes:
    """``partitions`` as the "consumer" protocol's Assignment, in the version of the member's
    subscription (its most preferred protocol's)."""
    version = int.from_bytes(member.classic.protocols[0][1][:2], "big", signed=True)
    return encode_assignment(partitions, version=version)


def heartbeat(coord: ConsumerGroupCoordinator, group: ConsumerGroup, *, request_id: int,
              member_id: str, group_instance_id: str | None,
              generation_id: int) -> HeartbeatResponse:
    try:
        member = _known(group, member_id, group_instance_id)
        _check_generation(member, generation_id)
    except OffsetlogError as e:
        return HeartbeatResponse(request_id, e)
    coord.touch(group.group_id, member)
    # (a new target, not just a new group epoch, calls for a rejoin: see sync)
    if (member.member_epoch < group.assignment_epoch or member.state == UNREVOKED_PARTITIONS
            or (member.state == UNRELEASED_PARTITIONS
                and not _waiting_on_unreleased(group, member))):
        coord.schedule(JOIN, group.group_id, member.member_id, member.rebalance_timeout_ms,
                       if_absent=True)
        return HeartbeatResponse(request_id, RebalanceInProgressError(
            f"group {group.group_id!r} is rebalancing; rejoin"))
    return HeartbeatResponse(request_id, None)


def _waiting_on_unreleased(group: ConsumerGroup, member: ConsumerMember) -> bool:
    """Some partition of its target it does not have yet is still owned by another member."""
    target = group.targets.get(member.member_id, frozenset())
    return any(group.owner_epoch(tp) != -1 for tp in target - member.assigned)


def leave(coord: ConsumerGroupCoordinator, group: ConsumerGroup, *, request_id: int,
          members: Iterable[MemberIdentity], records: list) -> LeaveGroupResponse:
    """Members leave. Classic members are removed and the group epoch bumped once (Kafka's
    order); a consumer-protocol member is fenced as if it had left itself, which may turn the
    group into a classic group (then the members after it are no longer found)."""
    results = []
    removed = False
    for ident in members:
        member_id = ident.member_id
        try:
            if coord.group(group.group_id) is not group:
                raise UnknownMemberIdError(f"Group {group.group_id} is no consumer group now.")
            # any member, classic or not: Kafka 4.4 lets LeaveGroup remove a consumer-protocol
            # member too (how admin tools remove members), where 4.0 refused it
            member = _known(group, member_id or group.static.get(ident.group_instance_id, ""),
                            ident.group_instance_id, classic_only=False)
        except OffsetlogError as e:
            results.append(LeaveMemberResponse(member_id, ident.group_instance_id, e))
            continue
        member_id = member.member_id
        if member.classic is None:
            coord.fence(group, member_id, records)
        else:
            records.extend(removal_records(group.group_id, member_id))
            group.drop_member(member_id)
            coord.cancel_member_timers(group.group_id, member_id)
            removed = True
        # (answered with the member id the request named, "" for one named by instance id
        # alone, as Kafka 4.4 answers)
        results.append(LeaveMemberResponse(ident.member_id, ident.group_instance_id, None))
    if removed and coord.group(group.group_id) is group:
        group.subscription_metadata = {t: n for t, n in group.subscription_metadata.items()
                                       if t in group.subscribed_topics()}
        group.group_epoch += 1
        records.append(group_record(group))
    return LeaveGroupResponse(request_id, None, tuple(results))
