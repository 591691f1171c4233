"""The checks Kafka's broker makes of a whole request before it handles it: the group,
transactional id or cluster permission without which the request is refused outright
(``check``). Checks of the topics, groups or ids inside a request, each answered in its
place, are the handlers' (``authz.allowed_names`` and friends); docs/SECURITY.md lists both.

Without an authorizer nothing here refuses anything.
"""

from __future__ import annotations

from offsetlog.server import apis_keys as K
from offsetlog.server import authz
from offsetlog.server import errors as E
from offsetlog.server.authz import CLUSTER, GROUP, READ, TRANSACTIONAL_ID, WRITE
from offsetlog.server.context import Call, Context
from offsetlog.server.groups import heartbeat_answer
from offsetlog.server.offset_fetch import refused_fetch
from offsetlog.server.offsets import refused_commit
from offsetlog.server.txn import txn_commit_answer

GROUP_DENIED = E.GROUP_AUTHORIZATION_FAILED
TXN_DENIED = E.TRANSACTIONAL_ID_AUTHORIZATION_FAILED


def check(ctx: Context, call: Call):
    """The response refusing ``call``, or None when it may be handled."""
    if ctx.acl is None:
        return None
    gate = _GATES.get(call.api_key)
    return None if gate is None else gate(ctx, call)


def _group(ctx: Context, call: Call, operation: int = READ) -> bool:
    return authz.allowed(ctx, call, operation, GROUP, call.body.group_id)


def _txn(ctx: Context, call: Call) -> bool:
    return authz.allowed(ctx, call, WRITE, TRANSACTIONAL_ID, call.body.transactional_id)


def _offset_commit(ctx: Context, call: Call):
    if not _group(ctx, call):
        return refused_commit(call, GROUP_DENIED)
    return None


def _offset_fetch(ctx: Context, call: Call):
    if call.version >= 8 or _group(ctx, call, authz.DESCRIBE):
        return None  # v8+: per group (offset_fetch.offset_fetch)
    return refused_fetch(call, GROUP_DENIED)


def _join_group(ctx: Context, call: Call):
    if _group(ctx, call):
        return None
    return call.respond(error_code=GROUP_DENIED, generation_id=-1, protocol_type=None,
                        protocol_name=None if call.version >= 7 else "", leader="",
                        member_id=call.body.member_id, members=())


def _sync_group(ctx: Context, call: Call):
    if _group(ctx, call):
        return None
    return call.respond(error_code=GROUP_DENIED, assignment=b"")


def _heartbeat(ctx: Context, call: Call):
    return None if _group(ctx, call) else heartbeat_answer(call, GROUP_DENIED)


def _leave_group(ctx: Context, call: Call):
    return None if _group(ctx, call) else call.respond(error_code=GROUP_DENIED, members=())


def _init_producer_id(ctx: Context, call: Call):
    tid = call.body.transactional_id
    if tid is not None:
        if _txn(ctx, call):
            return None
        code = TXN_DENIED
    elif authz.allowed(ctx, call, authz.IDEMPOTENT_WRITE, CLUSTER) \
            or authz.allowed_by_type(ctx, call, WRITE, authz.TOPIC):
        return None
    else:
        code = E.CLUSTER_AUTHORIZATION_FAILED
    return call.respond(error_code=code, producer_id=-1, producer_epoch=-1)


def _add_offsets_to_txn(ctx: Context, call: Call):
    if not _txn(ctx, call):
        return call.respond(error_code=TXN_DENIED)
    if not _group(ctx, call):
        return call.respond(error_code=GROUP_DENIED)
    return None


def _end_txn(ctx: Context, call: Call):
    return None if _txn(ctx, call) else call.respond(error_code=TXN_DENIED)


def _txn_offset_commit(ctx: Context, call: Call):
    if not _txn(ctx, call):
        code = TXN_DENIED
    elif not _group(ctx, call):
        code = GROUP_DENIED
    else:
        return None
    return txn_commit_answer(call, {}, code)


def _offset_delete(ctx: Context, call: Call):
    if _group(ctx, call, authz.DELETE):
        return None
    return call.respond(error_code=GROUP_DENIED, topics=())


def _consumer_group_heartbeat(ctx: Context, call: Call):
    if not _group(ctx, call):
        code, message = GROUP_DENIED, None
    else:
        # Kafka: a member may only subscribe to topics it may describe
        names = call.body.subscribed_topic_names or ()
        hidden = set(names) - authz.allowed_names(ctx, call, authz.DESCRIBE, authz.TOPIC, names)
        if not hidden:
            return None
        code, message = E.TOPIC_AUTHORIZATION_FAILED, None
    return call.respond(error_code=code, error_message=message, member_id=None,
                        member_epoch=0, heartbeat_interval=0, assignment=None)


def _describe_user_scram_credentials(ctx: Context, call: Call):
    if authz.allowed(ctx, call, authz.DESCRIBE, CLUSTER):
        return None
    # Kafka answers one result, of no user, besides the request's error
    return call.respond(error_code=E.CLUSTER_AUTHORIZATION_FAILED, error_message=None,
                        results=[dict(user="", error_code=E.CLUSTER_AUTHORIZATION_FAILED,
                                      error_message=None, credential_infos=())])


def _alter_user_scram_credentials(ctx: Context, call: Call):
    if authz.allowed(ctx, call, authz.ALTER, CLUSTER):
        return None
    b = call.body
    users = dict.fromkeys(c.name for c in [*b.deletions, *b.upsertions])
    return call.respond(results=[dict(user=u, error_code=E.CLUSTER_AUTHORIZATION_FAILED,
                                      error_message="Cluster authorization failed.")
                                 for u in users])


def _describe_client_quotas(ctx: Context, call: Call):
    if authz.allowed(ctx, call, authz.DESCRIBE_CONFIGS, CLUSTER):
        return None
    return call.respond(error_code=E.CLUSTER_AUTHORIZATION_FAILED, error_message=None,
                        entries=None)


_GATES = {
    K.OFFSET_COMMIT: _offset_commit,
    K.OFFSET_FETCH: _offset_fetch,
    K.JOIN_GROUP: _join_group,
    K.SYNC_GROUP: _sync_group,
    K.HEARTBEAT: _heartbeat,
    K.LEAVE_GROUP: _leave_group,
    K.INIT_PRODUCER_ID: _init_producer_id,
    K.ADD_OFFSETS_TO_TXN: _add_offsets_to_txn,
    K.END_TXN: _end_txn,
    K.TXN_OFFSET_COMMIT: _txn_offset_commit,
    K.OFFSET_DELETE: _offset_delete,
    K.CONSUMER_GROUP_HEARTBEAT: _consumer_group_heartbeat,
    K.DESCRIBE_CLIENT_QUOTAS: _describe_client_quotas,
    K.DESCRIBE_USER_SCRAM_CREDENTIALS: _describe_user_scram_credentials,
    K.ALTER_USER_SCRAM_CREDENTIALS: _alter_user_scram_credentials,
}
