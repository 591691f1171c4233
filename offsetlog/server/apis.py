"""The APIs this server answers, their versions, and the dispatch from a decoded request to
its handler. Each range covers what kafka-python 3, confluent-kafka 2 (librdkafka),
aiokafka and kafkajs send, within what kio has schemas for; see docs/PROTOCOL.md.

KIP-848's consumer group protocol is offered: ConsumerGroupHeartbeat and
ConsumerGroupDescribe v0-v1 (``consumer_groups``). Topic ids in OffsetCommit and OffsetFetch
v10 and KIP-890 (transactions v2: AddOffsetsToTxn v4, EndTxn v5, TxnOffsetCommit v5) are not:
clients fall back to the earlier versions.
"""

from __future__ import annotations

from offsetlog.server import (
    acl_apis,
    admin,
    configs,
    consumer_groups,
    data,
    gate,
    groups,
    offset_fetch,
    offsets,
    quotas,
    txn,
    txn_admin,
    users,
)
from offsetlog.server import errors as E
from offsetlog.server.apis_keys import (
    ADD_OFFSETS_TO_TXN,
    ALTER_USER_SCRAM_CREDENTIALS,
    API_VERSIONS,
    CONSUMER_GROUP_DESCRIBE,
    CONSUMER_GROUP_HEARTBEAT,
    CREATE_ACLS,
    CREATE_TOPICS,
    DELETE_ACLS,
    DELETE_GROUPS,
    DESCRIBE_ACLS,
    DESCRIBE_CLIENT_QUOTAS,
    DESCRIBE_CONFIGS,
    DESCRIBE_GROUPS,
    DESCRIBE_PRODUCERS,
    DESCRIBE_TRANSACTIONS,
    DESCRIBE_USER_SCRAM_CREDENTIALS,
    END_TXN,
    FETCH,
    FIND_COORDINATOR,
    HEARTBEAT,
    INIT_PRODUCER_ID,
    JOIN_GROUP,
    LEAVE_GROUP,
    LIST_GROUPS,
    LIST_OFFSETS,
    LIST_TRANSACTIONS,
    METADATA,
    OFFSET_COMMIT,
    OFFSET_DELETE,
    OFFSET_FETCH,
    PRODUCE,
    SASL_AUTHENTICATE,
    SASL_HANDSHAKE,
    SYNC_GROUP,
    TXN_OFFSET_COMMIT,
)
from offsetlog.server.context import Call, Context


def api_versions(ctx: Context, call: Call, now_ms: int):
    return call.respond(error_code=E.NONE, api_keys=version_list())


#: api key -> (lowest version, highest version, handler(ctx, call, now_ms))
APIS = {
    PRODUCE: (3, 9, data.produce),
    FETCH: (4, 13, data.fetch),
    LIST_OFFSETS: (1, 8, data.list_offsets),
    METADATA: (0, 12, data.metadata),
    OFFSET_COMMIT: (2, 9, offsets.offset_commit),
    OFFSET_FETCH: (1, 9, offset_fetch.offset_fetch),
    FIND_COORDINATOR: (0, 5, groups.find_coordinator),
    JOIN_GROUP: (0, 9, groups.join_group),
    HEARTBEAT: (0, 4, groups.heartbeat),
    LEAVE_GROUP: (0, 5, groups.leave_group),
    SYNC_GROUP: (0, 5, groups.sync_group),
    DESCRIBE_GROUPS: (0, 6, admin.describe_groups),
    # before authentication, a SASL listener's connection answers these itself (sasl.py)
    SASL_HANDSHAKE: (0, 1, users.sasl_after_authentication),
    SASL_AUTHENTICATE: (0, 2, users.sasl_after_authentication),
    LIST_GROUPS: (0, 5, admin.list_groups),
    API_VERSIONS: (0, 4, api_versions),
    CREATE_TOPICS: (2, 7, admin.create_topics),
    INIT_PRODUCER_ID: (0, 5, txn.init_producer_id),
    ADD_OFFSETS_TO_TXN: (0, 3, txn.add_offsets_to_txn),
    END_TXN: (0, 4, txn.end_txn),
    TXN_OFFSET_COMMIT: (0, 4, txn.txn_offset_commit),
    DESCRIBE_ACLS: (1, 3, acl_apis.describe_acls),
    CREATE_ACLS: (1, 3, acl_apis.create_acls),
    DELETE_ACLS: (1, 3, acl_apis.delete_acls),
    DESCRIBE_CONFIGS: (1, 4, configs.describe_configs),
    DELETE_GROUPS: (0, 2, admin.delete_groups),
    DESCRIBE_CLIENT_QUOTAS: (0, 1, quotas.describe_client_quotas),
    DESCRIBE_USER_SCRAM_CREDENTIALS: (0, 0, users.describe_user_scram_credentials),
    ALTER_USER_SCRAM_CREDENTIALS: (0, 0, users.alter_user_scram_credentials),
    OFFSET_DELETE: (0, 0, offsets.offset_delete),
    DESCRIBE_PRODUCERS: (0, 0, txn_admin.describe_producers),
    DESCRIBE_TRANSACTIONS: (0, 0, txn_admin.describe_transactions),
    LIST_TRANSACTIONS: (0, 2, txn_admin.list_transactions),
    CONSUMER_GROUP_HEARTBEAT: (0, 1, consumer_groups.consumer_group_heartbeat),
    CONSUMER_GROUP_DESCRIBE: (0, 1, consumer_groups.consumer_group_describe),
}


def version_list() -> list[dict]:
    return [dict(api_key=k, min_version=lo, max_version=hi)
            for k, (lo, hi, _) in sorted(APIS.items())]


def supported(api_key: int, version: int) -> bool:
    entry = APIS.get(api_key)
    return entry is not None and entry[0] <= version <= entry[1]


def handle(ctx: Context, call: Call, now_ms: int):
    """The response to ``call`` (a kio response), a ``work.Reply`` whose outcome makes it,
    or None when Kafka sends none (Produce with acks=0)."""
    if call.api_key == PRODUCE and call.body.acks == 0:
        return None
    if ctx.acl is not None:  # the whole request's permission (docs/SECURITY.md)
        refused = gate.check(ctx, call)
        if refused is not None:
            return refused
    return APIS[call.api_key][2](ctx, call, now_ms)
