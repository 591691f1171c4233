"""ListGroups, DescribeGroups, DeleteGroups and CreateTopics: what Kafka's admin tools use.

Groups that only commit offsets (consumers using ``assign()``, admin tools) are listed and
described as Kafka shows them: state Empty, protocol type "".
"""

from __future__ import annotations

import uuid

from offsetlog.errors import OffsetlogError
from offsetlog.server import authz
from offsetlog.server import errors as E
from offsetlog.server.context import Call, Context
from offsetlog.server.offsets import known_groups
from offsetlog.server.work import run_blocking
from offsetlog.validation import check_group_id


def list_groups(ctx: Context, call: Call, now_ms: int):
    b = call.body
    states = {s.lower() for s in getattr(b, "states_filter", ())}
    types = {t.lower() for t in getattr(b, "types_filter", ())}
    groups = []
    consumer = dict(ctx.store.consumer_groups.group_ids())  # KIP-848 groups: type "consumer"
    if not types or "classic" in types:
        for gid, state, protocol_type in ctx.store.list_groups():
            if gid in consumer or (states and state.lower() not in states):
                continue
            groups.append(dict(group_id=gid, protocol_type=protocol_type, group_state=state,
                               group_type="classic"))
    if not types or "consumer" in types:
        for gid, state in consumer.items():
            if not states or state.lower() in states:
                groups.append(dict(group_id=gid, protocol_type="consumer", group_state=state,
                                   group_type="consumer"))
    if not authz.allowed(ctx, call, authz.DESCRIBE, authz.CLUSTER):
        # Describe on the cluster lists every group; else those the caller may describe
        shown = authz.allowed_names(ctx, call, authz.DESCRIBE, authz.GROUP,
                                    (g["group_id"] for g in groups))
        groups = [g for g in groups if g["group_id"] in shown]
    return call.respond(error_code=E.NONE, groups=sorted(groups, key=lambda g: g["group_id"]))


def describe_groups(ctx: Context, call: Call, now_ms: int):
    b = call.body
    listed = None
    out = []
    asked = bool(getattr(b, "include_authorized_operations", False))
    described = authz.allowed_names(ctx, call, authz.DESCRIBE, authz.GROUP, b.groups)
    denied = []
    for gid in b.groups:
        if gid not in described:  # answered before the others, as Kafka does
            denied.append(_dead(call, gid, E.GROUP_AUTHORIZATION_FAILED, authz.NOT_ASKED,
                                state=""))
            continue
        operations = authz.operations(ctx, call, asked, authz.GROUP, gid)
        try:
            # "" is no group's id: described as an unknown one, as Kafka does
            d = ctx.store.describe_group(check_group_id(gid)) if gid else None
        except OffsetlogError as e:
            out.append(_dead(call, gid, E.code_of(e), operations))
            continue
        if d is None:
            if listed is None:
                listed = {g for g, _, _ in ctx.store.list_groups()}
                # a consumer-protocol group is not a classic group: Kafka describes it as an
                # unknown one (ConsumerGroupDescribe describes it)
                listed -= {g for g, _ in ctx.store.consumer_groups.group_ids()}
            if gid in listed:  # offsets only
                out.append(dict(error_code=E.NONE, group_id=gid, group_state="Empty",
                                protocol_type="", protocol_data="", members=(),
                                authorized_operations=operations))
            else:
                # Kafka: state Dead (with the operations asked for, as for any group), and
                # from v6 on GROUP_ID_NOT_FOUND
                if call.version >= 6:  # KIP-1043: not found, its operations not computed
                    out.append(_dead(call, gid, E.GROUP_ID_NOT_FOUND, authz.NOT_ASKED,
                                     f"no group {gid!r}"))
                else:
                    out.append(_dead(call, gid, E.NONE, operations))
            continue
        # Kafka shows the protocol and the members' metadata only of a Stable group (in a
        # rebalance they are being replaced); the assignments, always
        stable = str(d.state) == "Stable"
        out.append(dict(
            error_code=E.NONE, group_id=gid, group_state=str(d.state),
            protocol_type=d.protocol_type or "",
            protocol_data=(d.protocol or "") if stable else "",
            members=[dict(member_id=m.member_id, group_instance_id=m.group_instance_id,
                          client_id=m.client_id, client_host=m.client_host,
                          member_metadata=m.metadata if stable else b"",
                          member_assignment=m.assignment)
                     for m in d.members],
            authorized_operations=operations))
    return call.respond(groups=denied + out)


def _dead(call: Call, gid: str, code: int, operations: int,
          message: str | None = None, state: str = "Dead") -> dict:
    return dict(error_code=code, group_id=gid, group_state=state, protocol_type="",
                protocol_data="", members=(), authorized_operations=operations,
                error_message=message)


def delete_groups(ctx: Context, call: Call, now_ms: int):
    names = list(call.body.groups_names)
    store = ctx.store
    deletable = authz.allowed_names(ctx, call, authz.DELETE, authz.GROUP, names)

    def delete() -> list[dict]:
        known = known_groups(store)
        out = []
        for gid in names:
            try:
                if gid not in deletable:
                    out.append(dict(group_id=gid, error_code=E.GROUP_AUTHORIZATION_FAILED))
                    continue
                check_group_id(gid)
                if gid not in known:
                    code = E.GROUP_ID_NOT_FOUND
                else:
                    store.delete_group(gid)  # NonEmptyGroupError while it has members
                    code = E.NONE
            except Exception as e:
                code = E.code_of(e)
            out.append(dict(group_id=gid, error_code=code))
        return out

    return run_blocking(delete, lambda o: call.respond(results=o.get()))


def create_topics(ctx: Context, call: Call, now_ms: int):
    b = call.body
    validate_only = bool(getattr(b, "validate_only", False))
    default = ctx.config.num_partitions
    registry = ctx.topics
    names = [t.name for t in b.topics]
    if authz.allowed(ctx, call, authz.CREATE, authz.CLUSTER):
        creatable = set(names)
    else:
        creatable = authz.allowed_names(ctx, call, authz.CREATE, authz.TOPIC, names)
    describable = authz.allowed_names(ctx, call, authz.DESCRIBE_CONFIGS, authz.TOPIC, names)

    def create() -> list[dict]:
        out = []
        for t in b.topics:
            n = default if t.num_partitions == -1 else int(t.num_partitions)
            answer = dict(name=t.name, topic_id=None, error_code=E.NONE, error_message=None,
                          num_partitions=n, replication_factor=1, configs=())
            if t.name not in describable and t.name in creatable:
                # Kafka: created, its configs not shown
                answer["topic_config_error_code"] = E.TOPIC_AUTHORIZATION_FAILED
            if t.name not in creatable:
                answer.update(error_code=E.TOPIC_AUTHORIZATION_FAILED,
                              error_message="Authorization failed.")
            elif t.assignments:
                answer.update(error_code=E.INVALID_REQUEST,
                              error_message="replica assignments are not supported")
            elif n < 1:
                answer.update(error_code=E.INVALID_PARTITIONS,
                              error_message=f"{n} partitions: at least 1")
            elif t.replication_factor not in (-1, 1):
                answer.update(error_code=E.INVALID_REPLICATION_FACTOR,
                              error_message=f"replication factor {t.replication_factor}: "
                                            "this server is one node")
            elif registry.partitions(t.name) is not None:
                answer.update(error_code=E.TOPIC_ALREADY_EXISTS,
                              error_message=f"topic {t.name!r} already exists")
            elif not validate_only:
                try:
                    value = registry.create(t.name, n)
                    answer["topic_id"] = value["topic_id"]
                except Exception as e:
                    answer.update(error_code=E.code_of(e), error_message=str(e))
            else:
                answer["topic_id"] = uuid.uuid4()  # Kafka names the topic it would make too
            if answer["error_code"] != E.NONE:
                # a topic not created has no partitions or replicas: Kafka answers -1 (v5+)
                answer.update(num_partitions=-1, replication_factor=-1)
            out.append(answer)
        return out

    return run_blocking(create, lambda o: call.respond(topics=o.get()))
