"""ConsumerGroupHeartbeat (key 68) and ConsumerGroupDescribe (key 69): the consumer group
protocol (KIP-848) on the wire, through the store's ``consumer_groups`` part and its sans-IO
coordinators (offsetlog/group/consumer/, docs/GROUPS.md, "The consumer group protocol").

Topics travel by id on the wire and by name in the coordinator: the server's topic registry
translates (an owned partition of an unknown topic id is dropped from what the member says it
owns, as Kafka's coordinator only knows topics of its metadata image).
"""

from __future__ import annotations

import sys
from collections.abc import Iterable

from offsetlog.errors import OffsetlogError
from offsetlog.group.errors import GroupIdNotFoundError
from offsetlog.server import authz
from offsetlog.server import errors as E
from offsetlog.server.codec import build, ms, response_schema
from offsetlog.server.context import Call, Context
from offsetlog.server.work import after

#: OffsetCommit's first version with the member epoch (KIP-848): a consumer-protocol member
#: must commit with it or later
COMMIT_MEMBER_EPOCH_VERSION = 9
#: ConsumerGroupDescribe's authorized_operations when they were not asked for (INT32_MIN)
NO_OPERATIONS = -2147483648
#: ConsumerGroupDescribe v1 member_type: a classic-protocol member, a consumer-protocol member
CLASSIC_MEMBER, CONSUMER_MEMBER = 0, 1


def _partitions_by_id(ctx: Context, assignment, revoking=frozenset()) -> list[dict]:
    """An assignment by topic id, in topic name order; ``revoking``'s partitions (a member's
    describe shows what it still owns, as Kafka 4.4 does) after the others of their topic."""
    by_topic: dict[str, list[int]] = {}
    for t, p in sorted(assignment):
        by_topic.setdefault(t, []).append(p)
    for t, p in sorted(revoking):
        by_topic.setdefault(t, []).append(p)
    out = []
    for t, ps in sorted(by_topic.items()):
        tid = ctx.topics.topic_id(t)
        if tid is not None:
            out.append(dict(topic_id=tid, topic_name=t, partitions=ps))
    return out


def _owned(ctx: Context, topic_partitions) -> frozenset | None:
    if topic_partitions is None:
        return None
    by_id = ctx.topics.by_id
    out: set[tuple[str, int]] = set()
    for tp in topic_partitions:
        name = by_id.get(tp.topic_id.bytes) if tp.topic_id is not None else None
        if name is not None:
            out.update((name, int(p)) for p in tp.partitions)
    return frozenset(out)


def consumer_group_heartbeat(ctx: Context, call: Call, now_ms: int):
    b = call.body

    def error(code: int, message: str | None):
        return call.respond(error_code=code, error_message=message, member_id=None,
                            member_epoch=0, heartbeat_interval=0, assignment=None)

    rebalance = ms(b.rebalance_timeout)
    names = None if b.subscribed_topic_names is None else [str(t) for t in
                                                           b.subscribed_topic_names]
    topics = {name: value["partitions"] for name, value in ctx.topics.topics.items()}
    try:
        fut = ctx.store.consumer_groups.heartbeat(
            b.group_id, topics=topics, member_id=b.member_id, member_epoch=b.member_epoch,
            instance_id=b.instance_id, rack_id=b.rack_id,
            rebalance_timeout_ms=-1 if rebalance is None else rebalance,
            subscribed_topic_names=names, subscribed_topic_regex=b.subscribed_topic_regex,
            server_assignor=b.server_assignor,
            owned=_owned(ctx, b.topic_partitions), client_id=call.client_id,
            client_host=call.client_host, member_id_required=call.version >= 1)
    except Exception as e:
        return error(E.code_of(e), str(e) or None)

    def finish(outcomes):
        outcome = outcomes[0]
        if outcome.error is not None:
            return error(E.code_of(outcome.error), None)
        r = outcome.value
        if r.error is not None:
            return error(E.code_of(r.error), str(r.error) or None)
        assignment = None
        if r.assignment is not None:
            # a nullable nested entity: built here (the codec builds non-null ones from dicts)
            module = sys.modules[response_schema(call.api_key, call.version).__module__]
            assignment = build(module.Assignment, topic_partitions=[
                build(module.TopicPartitions, **tp) for tp in _partitions_by_id(ctx, r.assignment)])
        return call.respond(error_code=E.NONE, error_message=None, member_id=r.member_id,
                            member_epoch=r.member_epoch,
                            heartbeat_interval=r.heartbeat_interval_ms, assignment=assignment)
    return after([fut], finish)


def consumer_group_describe(ctx: Context, call: Call, now_ms: int):
    b = call.body
    groups = []
    asked = bool(getattr(b, "include_authorized_operations", False))
    for gid in b.group_ids:
        if not authz.allowed(ctx, call, authz.DESCRIBE, authz.GROUP, gid):
            groups.append(dict(error_code=E.GROUP_AUTHORIZATION_FAILED, error_message=None,
                               group_id=gid, group_state="", group_epoch=0,
                               assignment_epoch=0, assignor_name="", members=(),
                               authorized_operations=NO_OPERATIONS))
            continue
        try:
            group = ctx.store.consumer_groups.describe(gid)
        except Exception as e:
            groups.append(dict(error_code=E.code_of(e), error_message=str(e) or None,
                               group_id=gid, group_state="", group_epoch=0,
                               assignment_epoch=0, assignor_name="", members=(),
                               authorized_operations=NO_OPERATIONS))
            continue
        if group is None:
            groups.append(dict(error_code=GroupIdNotFoundError.code,
                               error_message=f"Group {gid} not found.", group_id=gid,
                               group_state="", group_epoch=0, assignment_epoch=0,
                               assignor_name="", members=(),
                               authorized_operations=NO_OPERATIONS))
            continue
        topics = {t for m in group.members.values()
                  for t in (*m.subscribed_topics,
                            *(tp[0] for tp in m.assigned | m.pending_revocation))}
        hidden = topics - authz.allowed_names(ctx, call, authz.DESCRIBE, authz.TOPIC, topics)
        if hidden:  # Kafka: a group on topics the caller may not describe is not described
            groups.append(dict(error_code=E.TOPIC_AUTHORIZATION_FAILED,
                               error_message="The group has described topic(s) that the "
                               "client is not authorized to describe.", group_id=gid,
                               group_state="", group_epoch=0, assignment_epoch=0,
                               assignor_name="", members=(),
                               authorized_operations=NO_OPERATIONS))
            continue
        coordinator = ctx.store.consumer_groups.coordinators[ctx.store.partition_of(gid)]
        members = [dict(
            member_id=m.member_id, instance_id=m.instance_id, rack_id=m.rack_id,
            member_epoch=m.member_epoch, client_id=m.client_id, client_host=m.client_host,
            subscribed_topic_names=list(m.subscribed_topics),
            subscribed_topic_regex=m.subscribed_topic_regex or "",
            assignment=dict(topic_partitions=_partitions_by_id(ctx, m.assigned,
                                                               m.pending_revocation)),
            target_assignment=dict(topic_partitions=_partitions_by_id(
                ctx, group.targets.get(m.member_id, frozenset()))),
            member_type=CLASSIC_MEMBER if m.uses_classic_protocol else CONSUMER_MEMBER)
            for m in group.members.values()]
        groups.append(dict(
            error_code=E.NONE, error_message=None, group_id=gid, group_state=group.state(),
            group_epoch=group.group_epoch, assignment_epoch=group.assignment_epoch,
            assignor_name=coordinator.preferred_assignor(group), members=members,
            authorized_operations=authz.operations(ctx, call, asked, authz.GROUP, gid)))
    return call.respond(groups=groups)


def offset_check(ctx: Context, group_id: str, member_id: str | None, member_epoch: int,
                 fetch: bool = False, version: int = COMMIT_MEMBER_EPOCH_VERSION,
                 partitions: Iterable | None = None) -> int | None:
    """None when ``group_id`` is not a consumer-protocol group; else the error code of an
    OffsetCommit of ``version`` and ``partitions`` (or, ``fetch``, an OffsetFetch) naming
    ``member_id`` at ``member_epoch`` (0 when it may go ahead): UNKNOWN_MEMBER_ID,
    UNSUPPORTED_VERSION (a consumer-protocol member's commit below v9), STALE_MEMBER_EPOCH
    (``ConsumerGroupCoordinator.check_offset_request``). An OffsetFetch that names
    no member (an admin client's) is not checked. This answers early; a commit is checked
    again by the store under the partition lock, in the same step as its write
    (store/routing.py), so a member fenced in between does not get its commit through."""
    groups = getattr(ctx.store, "consumer_groups", None)  # None: a store without them
    if groups is None:
        return None
    try:
        if groups.describe(group_id) is None:
            return None
        if fetch and not member_id and member_epoch < 0:
            return E.NONE
        return E.code_of(groups.check_offset_request(
            group_id, member_id, member_epoch,
            classic_commit=not fetch and version < COMMIT_MEMBER_EPOCH_VERSION,
            partitions=None if fetch else partitions))
    except OffsetlogError as e:
        return E.code_of(e)
