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
    admin,
    configs,
    consumer_groups,
    data,
    groups,
    offsets,
    txn,
    txn_admin,
    users,
)
from offsetlog.server import errors as E
from offsetlog.server.context import Call, Context

PRODUCE, FETCH, LIST_OFFSETS, METADATA = 0, 1, 2, 3
OFFSET_COMMIT, OFFSET_FETCH, FIND_COORDINATOR = 8, 9, 10
JOIN_GROUP, HEARTBEAT, LEAVE_GROUP, SYNC_GROUP = 11, 12, 13, 14
DESCRIBE_GROUPS, LIST_GROUPS, API_VERSIONS, CREATE_TOPICS = 15, 16, 18, 19
INIT_PRODUCER_ID, ADD_OFFSETS_TO_TXN, END_TXN, TXN_OFFSET_COMMIT = 22, 25, 26, 28
DESCRIBE_CONFIGS, DELETE_GROUPS, OFFSET_DELETE = 32, 42, 47
DESCRIBE_PRODUCERS, DESCRIBE_TRANSACTIONS, LIST_TRANSACTIONS = 61, 65, 66
CONSUMER_GROUP_HEARTBEAT, CONSUMER_GROUP_DESCRIBE = 68, 69
SASL_HANDSHAKE, SASL_AUTHENTICATE = 17, 36
DESCRIBE_USER_SCRAM_CREDENTIALS, ALTER_USER_SCRAM_CREDENTIALS = 50, 51


def api_versions(ctx: Context, call: Call, now_ms: int):
    return call.respond(error_code=E.NONE, api_keys=version_list())


#: api key -> (lowest version, highest version, handler(ctx, call, now_ms))
APIS = {
    PRODUCE: (3, 9, data.produce),
    FETCH: (4, 13, data.fetch),
    LIST_OFFSETS: (1, 8, data.list_offsets),
    METADATA: (0, 12, data.metadata),
    OFFSET_COMMIT: (2, 9, offsets.offset_commit),
    OFFSET_FETCH: (1, 9, offsets.offset_fetch),
    FIND_COORDINATOR: (0, 5, groups.find_coordinator),
    JOIN_GROUP: (0, 9, groups.join_group),
    HEARTBEAT: (0, 4, groups.heartbeat),
    LEAVE_GROUP: (0, 5, groups.leave_group),
    SYNC_GROUP: (0, 5, groups.sync_group),
    DESCRIBE_GROUPS: (0, 6, admin.describe_groups),
    # before authentication, a SASL listener's connection answers these itself (sasl.py)
    SASL_HANDSHAKE: (1, 1, users.sasl_after_authentication),
    SASL_AUTHENTICATE: (0, 2, users.sasl_after_authentication),
    LIST_GROUPS: (0, 5, admin.list_groups),
    API_VERSIONS: (0, 4, api_versions),
    CREATE_TOPICS: (2, 7, admin.create_topics),
    INIT_PRODUCER_ID: (0, 5, txn.init_producer_id),
    ADD_OFFSETS_TO_TXN: (0, 3, txn.add_offsets_to_txn),
    END_TXN: (0, 4, txn.end_txn),
    TXN_OFFSET_COMMIT: (0, 4, txn.txn_offset_commit),
    DESCRIBE_CONFIGS: (1, 4, configs.describe_configs),
    DELETE_GROUPS: (0, 2, admin.delete_groups),
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
    return APIS[call.api_key][2](ctx, call, now_ms)
