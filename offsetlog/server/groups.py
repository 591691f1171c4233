"""FindCoordinator, JoinGroup, SyncGroup, Heartbeat, LeaveGroup: the store's group
coordinator (offsetlog.group, docs/GROUPS.md) on the wire.

The coordinator answers with the store's futures; a JoinGroup parked until the join phase
completes is a future like any other, and its connection keeps answering in request order.
"""

from __future__ import annotations

from typing import NamedTuple

from offsetlog.group import MemberIdentity
from offsetlog.log import _native
from offsetlog.server import authz
from offsetlog.server import errors as E
from offsetlog.server.codec import ms
from offsetlog.server.context import NODE_ID, Call, Context
from offsetlog.server.work import Outcome, after

GROUP_KEY, TRANSACTION_KEY = 0, 1


def find_coordinator(ctx: Context, call: Call, now_ms: int):
    body = call.body
    if call.version >= 4:
        keys = list(body.coordinator_keys)
    else:
        keys = [body.key]
    key_type = getattr(body, "key_type", GROUP_KEY)
    answers = []
    host, port = ctx.address(call.listener)  # the listener the client came in on
    for key in keys:
        if key_type not in (GROUP_KEY, TRANSACTION_KEY):
            answers.append(dict(key=key, error_code=E.INVALID_REQUEST, node_id=-1, host="",
                                port=-1, error_message=f"key type {key_type} is not served"))
        elif not authz.allowed(ctx, call, authz.DESCRIBE, *_KEY_RESOURCE[key_type], key):
            code = _KEY_DENIED[key_type]
            # Kafka's message: the error's own before v4, "" from v4
            answers.append(dict(key=key, error_code=code, node_id=-1, host="", port=-1,
                                error_message="" if call.version >= 4
                                else _DENIED_MESSAGE[code]))
        else:
            # Kafka's message on success: the error's name before v4 (one key), "" from v4
            answers.append(dict(key=key, error_code=E.NONE, node_id=NODE_ID, host=host,
                                port=port, error_message="" if call.version >= 4 else "NONE"))
    if call.version >= 4:
        return call.respond(coordinators=answers)
    return call.respond(**answers[0])


_KEY_RESOURCE = {GROUP_KEY: (authz.GROUP,), TRANSACTION_KEY: (authz.TRANSACTIONAL_ID,)}
_KEY_DENIED = {GROUP_KEY: E.GROUP_AUTHORIZATION_FAILED,
               TRANSACTION_KEY: E.TRANSACTIONAL_ID_AUTHORIZATION_FAILED}
#: Kafka's messages of the two errors (their exceptions' defaults)
_DENIED_MESSAGE = {E.GROUP_AUTHORIZATION_FAILED: "Group authorization failed.",
                   E.TRANSACTIONAL_ID_AUTHORIZATION_FAILED:
                   "Transactional Id authorization failed."}


def _error(outcome: Outcome):
    """(response or None, error code) of a coordinator future's outcome."""
    if outcome.error is not None:
        return None, E.code_of(outcome.error)
    response = outcome.value
    return response, E.code_of(response.error)


def join_group(ctx: Context, call: Call, now_ms: int):
    b = call.body
    instance = getattr(b, "group_instance_id", None)
    old_member = None
    if instance is not None and call.version < 9:
        old_member = _static_member(ctx, b.group_id, instance)
    session = ms(b.session_timeout)
    rebalance = ms(getattr(b, "rebalance_timeout", None))
    try:
        fut = ctx.store.join_group(
            b.group_id, protocols=[(p.name, bytes(p.metadata)) for p in b.protocols],
            member_id=b.member_id, group_instance_id=instance, client_id=call.client_id,
            client_host=call.client_host, session_timeout_ms=session,
            rebalance_timeout_ms=session if rebalance is None or rebalance < 0 else rebalance,
            protocol_type=b.protocol_type, require_known_member_id=call.version >= 4)
    except Exception as e:
        return _join_answer(call, None, E.code_of(e), b.member_id, None)
    return after([fut], lambda o: _join_answer(call, *_error(o[0]), b.member_id, old_member))


def _static_member(ctx: Context, group_id: str, instance: str) -> str | None:
    try:
        d = ctx.store.describe_group(group_id)
    except Exception:
        return None
    for m in d.members if d is not None else ():
        if m.group_instance_id == instance:
            return m.member_id
    return None


def _join_answer(call: Call, r, code: int, member_id: str, old_member: str | None):
    if r is None:
        return call.respond(error_code=code, generation_id=-1, protocol_type=None,
                            protocol_name=None if call.version >= 7 else "", leader="",
                            member_id=member_id, members=())
    leader, members = r.leader_id, [
        dict(member_id=m.member_id, group_instance_id=m.group_instance_id, metadata=m.metadata)
        for m in r.members]
    if r.skip_assignment and call.version < 9:
        # A static leader rejoined a Stable group: before v9 it cannot be told "you lead,
        # but keep the assignment", so (as Kafka does) it is given the old leader's id and
        # acts as a follower; its SyncGroup gets the current assignment.
        leader, members = old_member or "", []
    name = r.protocol_name
    return call.respond(error_code=code, generation_id=r.generation_id,
                        protocol_type=r.protocol_type,
                        protocol_name=name if name is not None or call.version >= 7 else "",
                        leader=leader or "", skip_assignment=r.skip_assignment,
                        member_id=r.member_id or member_id, members=members)


def sync_group(ctx: Context, call: Call, now_ms: int):
    b = call.body
    assignments = {a.member_id: bytes(a.assignment) for a in b.assignments} or None
    try:
        fut = ctx.store.sync_group(
            b.group_id, member_id=b.member_id, generation_id=b.generation_id,
            group_instance_id=getattr(b, "group_instance_id", None),
            protocol_type=getattr(b, "protocol_type", None),
            protocol_name=getattr(b, "protocol_name", None), assignments=assignments)
    except Exception as e:
        return call.respond(error_code=E.code_of(e), assignment=b"")

    def finish(outcomes):
        r, code = _error(outcomes[0])
        if r is None:
            return call.respond(error_code=code, assignment=b"")
        return call.respond(error_code=code, protocol_type=r.protocol_type,
                            protocol_name=r.protocol_name, assignment=r.assignment or b"")
    return after([fut], finish)


class HeartbeatFields(NamedTuple):
    """A Heartbeat request as the native codec decodes it (a ``Call``'s body): Heartbeat is
    decoded and answered by the native core's codec only (native/src/wire_codec/)."""

    group_id: str
    generation_id: int
    member_id: str
    group_instance_id: str | None


def heartbeat_answer(call: Call, code: int) -> bytes:
    return _native.encode_heartbeat_response(call.header.correlation_id, call.version, code)


def heartbeat_future(ctx: Context, b: HeartbeatFields):
    """The store's future of one heartbeat (raises what it refuses at once)."""
    return ctx.store.heartbeat(b.group_id, member_id=b.member_id,
                               generation_id=b.generation_id,
                               group_instance_id=b.group_instance_id)


def heartbeat_code(ctx: Context, b: HeartbeatFields) -> int:
    """One heartbeat's error code, once its outcome is known (the native request loop's:
    ``connection.Connection.heartbeat``; this waits)."""
    try:
        response = heartbeat_future(ctx, b).result()
    except Exception as e:  # refused at once, or the future's error (as ``_error``)
        return E.code_of(e)
    return E.code_of(response.error)


def heartbeat(ctx: Context, call: Call, now_ms: int):
    try:
        fut = heartbeat_future(ctx, call.body)
    except Exception as e:
        return heartbeat_answer(call, E.code_of(e))
    return after([fut], lambda o: heartbeat_answer(call, _error(o[0])[1]))


def leave_group(ctx: Context, call: Call, now_ms: int):
    b = call.body
    if call.version >= 3:
        members = [MemberIdentity(m.member_id, m.group_instance_id) for m in b.members]
    else:
        members = [MemberIdentity(b.member_id, None)]
    try:
        fut = ctx.store.leave_group(b.group_id, members=members)
    except Exception as e:
        return call.respond(error_code=E.code_of(e), members=())

    def finish(outcomes):
        r, code = _error(outcomes[0])
        answers = [] if r is None else [
            dict(member_id=m.member_id, group_instance_id=m.group_instance_id,
                 error_code=E.code_of(m.error)) for m in r.members]
        if call.version < 3 and code == E.NONE and answers:
            code = answers[0]["error_code"]  # one member: its outcome is the request's
        return call.respond(error_code=code, members=answers)
    return after([fut], finish)
