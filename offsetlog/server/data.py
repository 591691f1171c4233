"""Metadata, ListOffsets, Fetch and Produce: enough of a broker for consumers to run.

The server is a group coordinator and offset store, not a message broker. Metadata lists the
registered topics with this node leading every partition (creating unknown topics when
``auto.create.topics.enable`` is on and the client allows it); every partition is empty:
ListOffsets answers offset 0 for earliest and latest, Fetch answers no records after
``max_wait_ms`` (never OFFSET_OUT_OF_RANGE: its high watermark is the fetch offset, so a
consumer is caught up wherever its committed offset points), and Produce is refused per
partition with INVALID_REQUEST.
"""

from __future__ import annotations

import uuid

from offsetlog.server import authz
from offsetlog.server import errors as E
from offsetlog.server.context import CLUSTER_ID, NODE_ID, Call, Context
from offsetlog.server.work import run_blocking

#: the most a Fetch waits, whatever the client asks: nothing ever arrives
MAX_FETCH_WAIT_MS = 1_000
EARLIEST, LATEST = -2, -1
#: KIP-405's earliest offset still on the broker's local disk (v8+): here, all of the log
EARLIEST_LOCAL = -4


def metadata(ctx: Context, call: Call, now_ms: int):
    b = call.body
    registry = ctx.topics
    if b.topics is None or (call.version == 0 and not b.topics):
        names = list(registry.topics)  # all topics
    else:
        # by id (v10+; KIP-848 clients look up the topics of their assignment so): a topic
        # with a non-zero id and no name, null (librdkafka) or "" (the Java client)
        by_id = [t for t in b.topics if not t.name
                 and getattr(t, "topic_id", None) is not None and t.topic_id.int != 0]
        taken = {id(t) for t in by_id}
        names = [t.name for t in b.topics if t.name is not None and id(t) not in taken]
        names += [registry.by_id.get(t.topic_id.bytes, t.topic_id) for t in by_id]
    allow = getattr(b, "allow_auto_topic_creation", True) and ctx.config.auto_create_topics
    unknown_ids = [n for n in names if isinstance(n, uuid.UUID)]
    names = [n for n in names if not isinstance(n, uuid.UUID)]
    every = b.topics is None or (call.version == 0 and not b.topics)
    # Describe on each topic: all topics lists only those; named ones the caller may not
    # describe are TOPIC_AUTHORIZATION_FAILED (after the others), existing or not
    shown = authz.allowed_names(ctx, call, authz.DESCRIBE, authz.TOPIC, names)
    hidden = [] if every else [n for n in dict.fromkeys(names) if n not in shown]
    names = [n for n in names if n in shown]
    missing = [n for n in names if registry.partitions(n) is None]
    if allow and missing and not authz.allowed(ctx, call, authz.CREATE, authz.CLUSTER):
        creatable = authz.allowed_names(ctx, call, authz.CREATE, authz.TOPIC, missing)
        hidden_create = [n for n in missing if n not in creatable]
        names = [n for n in names if n not in hidden_create]
        missing = [n for n in missing if n in creatable]
    else:
        hidden_create = []
    topic_asked = bool(getattr(b, "include_topic_authorized_operations", False))
    cluster_ops = authz.NOT_ASKED
    if getattr(b, "include_cluster_authorized_operations", False):  # v8-v10
        cluster_ops = (authz.operations(ctx, call, True, authz.CLUSTER)
                       if authz.allowed(ctx, call, authz.DESCRIBE, authz.CLUSTER) else 0)

    def topic_ops(name):
        return authz.operations(ctx, call, topic_asked, authz.TOPIC, name)

    def answer(created_errors: dict) -> object:
        topics = []
        for name in names:
            count = registry.partitions(name)
            if count is None:
                topics.append(dict(error_code=created_errors.get(
                    name, E.UNKNOWN_TOPIC_OR_PARTITION), name=name, topic_id=uuid.UUID(int=0),
                    # the operations asked for, of an unknown topic too (as Kafka answers)
                    is_internal=False, partitions=(),
                    topic_authorized_operations=topic_ops(name)))
                continue
            topics.append(dict(
                error_code=E.NONE, name=name, topic_id=registry.topic_id(name),
                is_internal=False, topic_authorized_operations=topic_ops(name),
                partitions=[dict(error_code=E.NONE, partition_index=i, leader_id=NODE_ID,
                                 leader_epoch=0, replica_nodes=(NODE_ID,),
                                 isr_nodes=(NODE_ID,), offline_replicas=())
                            for i in range(count)]))
        topics.extend(dict(error_code=E.UNKNOWN_TOPIC_ID, name=None, topic_id=tid,
                           is_internal=False, partitions=(),
                           topic_authorized_operations=authz.operations(
                               ctx, call, topic_asked, authz.TOPIC, ""))
                      for tid in unknown_ids)
        topics.extend(dict(error_code=E.TOPIC_AUTHORIZATION_FAILED, name=name,
                           topic_id=uuid.UUID(int=0), is_internal=False, partitions=(),
                           topic_authorized_operations=authz.NOT_ASKED)
                      for name in hidden_create + hidden)
        host, port = ctx.address(call.listener)  # the listener the client came in on
        return call.respond(
            brokers=[dict(node_id=NODE_ID, host=host, port=port,
                          rack=ctx.config.broker_rack)],
            cluster_id=CLUSTER_ID, controller_id=NODE_ID, topics=topics,
            cluster_authorized_operations=cluster_ops, error_code=E.NONE)

    if not (missing and allow):
        return answer({})

    def create() -> dict:
        errors = {}
        for name in missing:
            try:
                registry.create(name, ctx.config.num_partitions, exist_ok=True)
            except Exception as e:
                errors[name] = E.code_of(e)
        return errors

    return run_blocking(create, lambda o: answer(o.get()))


def list_offsets(ctx: Context, call: Call, now_ms: int):
    topics = []
    shown = authz.allowed_names(ctx, call, authz.DESCRIBE, authz.TOPIC,
                                (t.name for t in call.body.topics))
    for t in call.body.topics:
        parts = []
        for p in t.partitions:
            if t.name not in shown:
                parts.append(dict(partition_index=p.partition_index,
                                  error_code=E.TOPIC_AUTHORIZATION_FAILED, timestamp=-1,
                                  offset=-1, leader_epoch=-1, old_style_offsets=()))
                continue
            known = ctx.topics.has_partition(t.name, int(p.partition_index))
            ts = int(p.timestamp)
            # no record has a timestamp: only the log's ends are known, both 0
            offset = 0 if known and ts in (EARLIEST, LATEST, EARLIEST_LOCAL) else -1
            # Kafka names the leader epoch of the offset it found, and -1 with none found
            parts.append(dict(partition_index=p.partition_index,
                              error_code=E.NONE if known else E.UNKNOWN_TOPIC_OR_PARTITION,
                              timestamp=-1, offset=offset, leader_epoch=0 if offset == 0 else -1,
                              old_style_offsets=()))
        topics.append(dict(name=t.name, partitions=parts))
    return call.respond(topics=topics)


def fetch(ctx: Context, call: Call, now_ms: int):
    from offsetlog.server.work import Reply

    b = call.body
    by_id = call.version >= 13
    registry = ctx.topics
    responses = []
    readable = authz.allowed_names(ctx, call, authz.READ, authz.TOPIC, (
        registry.by_id.get(t.topic_id.bytes) or "" if by_id else t.topic for t in b.topics))
    for t in b.topics:
        name = registry.by_id.get(t.topic_id.bytes) if by_id else t.topic
        parts = []
        for p in t.partitions:
            known = name is not None and registry.has_partition(name, int(p.partition))
            if name is not None and name not in readable:
                parts.append(dict(partition_index=p.partition,
                                  error_code=E.TOPIC_AUTHORIZATION_FAILED, high_watermark=-1,
                                  last_stable_offset=-1, log_start_offset=-1,
                                  aborted_transactions=(), preferred_read_replica=-1,
                                  records=b""))
                continue
            elif known:
                code = E.NONE
            else:
                code = E.UNKNOWN_TOPIC_ID if by_id else E.UNKNOWN_TOPIC_OR_PARTITION
            hw = max(0, int(p.fetch_offset)) if known else -1
            parts.append(dict(partition_index=p.partition, error_code=code, high_watermark=hw,
                              last_stable_offset=hw, log_start_offset=0 if known else -1,
                              aborted_transactions=None, preferred_read_replica=-1,
                              # librdkafka refuses a null record set ("invalid
                              # MessageSetSize -1"): an empty one
                              records=b""))
        responses.append(dict(topic="" if by_id else t.topic, topic_id=getattr(t, "topic_id", None),
                              partitions=parts))
    wait = max(0, min(int(b.max_wait.total_seconds() * 1000), MAX_FETCH_WAIT_MS))
    response = call.respond(error_code=E.NONE, session_id=0, responses=responses)
    return Reply(lambda outcomes: response, delay_ms=wait)


#: a record batch's attributes (int16) sit at this byte; bit 4 marks it transactional
_ATTRIBUTES_AT, _TRANSACTIONAL = 21, 0x10


def _transactional(body) -> bool:
    """Whether a Produce request holds transactional batches (its partitions' first)."""
    for t in body.topic_data:
        for p in t.partition_data:
            records = p.records
            if records and len(records) > _ATTRIBUTES_AT + 1:
                if int.from_bytes(records[_ATTRIBUTES_AT:_ATTRIBUTES_AT + 2], "big") \
                        & _TRANSACTIONAL:
                    return True
    return False


def produce(ctx: Context, call: Call, now_ms: int):
    b = call.body
    tid = getattr(b, "transactional_id", None)
    # Kafka checks the transactional id only of a request holding transactional batches
    if _transactional(b) and (tid is None or not authz.allowed(
            ctx, call, authz.WRITE, authz.TRANSACTIONAL_ID, tid)):
        writable: set = set()
        denied = E.TRANSACTIONAL_ID_AUTHORIZATION_FAILED
    else:
        writable = authz.allowed_names(ctx, call, authz.WRITE, authz.TOPIC,
                                       (t.name for t in b.topic_data))
        denied = E.TOPIC_AUTHORIZATION_FAILED
    refused = "offsetlog serve stores consumer offsets and group state, not messages: " \
              "Produce is not supported"
    responses = [dict(name=t.name, partition_responses=[
        dict(index=p.index, base_offset=-1, log_start_offset=-1, record_errors=(),
             **(dict(error_code=E.INVALID_REQUEST, error_message=refused)
                if t.name in writable else dict(error_code=denied, error_message=None)))
        for p in t.partition_data]) for t in b.topic_data]
    return call.respond(responses=responses)
