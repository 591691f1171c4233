"""OffsetCommit, OffsetDelete and TxnOffsetCommit's partition checks (OffsetFetch is
``offset_fetch``'s).

Kafka answers these per partition, where offsetlog's embedded API is all or nothing: a
partition Kafka would refuse (unknown topic or partition, metadata too long, a negative
offset) gets its own error code here, and the rest is committed as one atomic call. Errors of
the group (fencing) apply to every partition of the call, as Kafka gives them.
"""

from __future__ import annotations

from datetime import timedelta
from typing import NamedTuple

from offsetlog.errors import IllegalGenerationError, OffsetlogError
from offsetlog.group.errors import GroupSubscribedToTopicError
from offsetlog.log import _native
from offsetlog.server import authz, consumer_groups
from offsetlog.server import errors as E
from offsetlog.server.codec import encoded
from offsetlog.server.context import Call, Context
from offsetlog.server.work import run_blocking
from offsetlog.types import OffsetAndMetadata, TopicPartition
from offsetlog.validation import check_group_id, utf16_length

#: The hot messages with arrays (OffsetCommit, TxnOffsetCommit, OffsetFetch) are decoded and
#: answered by the native core's codec (the `kafka-protocol` crate: native/src/wire_codec/)
#: on every connection, unless this host cannot reserve what a hostile frame's claimed
#: arrays may ask of it (native/src/huge_alloc.rs): then by kio
NATIVE_ARRAY_CODECS = _native.wire_decode_safe()


class OffsetCommitFields(NamedTuple):
    """An OffsetCommit request as the native codec decodes it (a ``Call``'s body)."""

    group_id: str
    generation_id_or_member_epoch: int
    member_id: str
    group_instance_id: str | None
    #: ``topic_fields``' shape
    topics: list
    #: versions 2-4: the commit's own retention (``commit_retention``); -1 for none
    retention_time_ms: int = -1


def commit_answer(call: Call, topics, answer: list | None) -> bytes:
    """The OffsetCommit response frame to a natively decoded ``call`` (``topics``:
    ``topic_fields``' shape): ``answer``'s topics, or every partition committed (None)."""
    if answer is None:
        answer = [(name, [(p[0], E.NONE) for p in parts]) for name, parts in topics]
    return _native.encode_offset_commit_response(call.header.correlation_id, call.version,
                                                 answer)


def topic_fields(topics) -> list[tuple[str, list[tuple]]]:
    """A request's kio topics as the fields the checks take: ``(name, [(partition, offset,
    leader epoch or -1, metadata or None)])``, as the native decoder gives them
    (``wire_codec``)."""
    return [(t.name, [(int(p.partition_index), int(p.committed_offset),
                       int(getattr(p, "committed_leader_epoch", -1)), p.committed_metadata)
                      for p in t.partitions]) for t in topics]


def checked_offsets(ctx: Context, topics, call: Call | None = None) -> tuple[dict, dict]:
    """``(offsets to commit, per-partition error codes)`` of a commit request's topics
    (``topic_fields``); with ``call``, a topic the caller may not Read is
    TOPIC_AUTHORIZATION_FAILED (Kafka's check, before the topic's existence)."""
    good: dict = {}
    bad: dict = {}
    limit = ctx.store.config.metadata_max_bytes
    readable = None
    if call is not None and ctx.acl is not None:
        readable = authz.allowed_names(ctx, call, authz.READ, authz.TOPIC,
                                       (name for name, _ in topics))
    has_partition = ctx.topics.has_partition
    for name, partitions in topics:
        for partition, offset, epoch, metadata in partitions:
            tp = TopicPartition(name, partition)
            metadata = metadata or ""
            if readable is not None and name not in readable:
                bad[tp] = E.TOPIC_AUTHORIZATION_FAILED
            elif not has_partition(name, partition):
                bad[tp] = E.UNKNOWN_TOPIC_OR_PARTITION
            elif metadata and utf16_length(metadata) > limit:
                bad[tp] = E.OFFSET_METADATA_TOO_LARGE
            else:
                # Any int64 offset, negative ones too: Kafka's coordinator stores what a
                # client commits (clients check their own; kafkajs's resetOffsets commits -2
                # and -1 as markers), and the store is opened to take them (main.run). A
                # plain offset goes as an int: no object to build, and the store's one-pass
                # check (~0.5 us less a commit)
                good[tp] = (OffsetAndMetadata(offset, metadata, None if epoch < 0 else epoch)
                            if metadata or epoch >= 0 else offset)
    return good, bad


#: codes Kafka's OffsetCommit (and TxnOffsetCommit, OffsetDelete) answers before asking the
#: coordinator: its response builder holds these partitions first
UP_FRONT = frozenset({E.TOPIC_AUTHORIZATION_FAILED, E.UNKNOWN_TOPIC_OR_PARTITION})


def answer_order(topics, codes: dict, default: int) -> list[tuple[str, list[tuple]]]:
    """The response's topics, ``(name, [(partition, code)])``, of a request's
    ``topic_fields`` (of which only each partition's index is read): each requested partition with its code (``default`` when the
    partition has none of its own). In Kafka's order: its response builder takes the
    partitions refused up front (``UP_FRONT``: not authorized, unknown) first, in request
    order, then merges in what the coordinator answered, so a topic with such a partition
    comes before the others, and in it those partitions before the rest (checked against
    Kafka 4.4: tests/kafka/test_diff_offsets.py); otherwise request order."""
    out = []
    for name, partitions in topics:
        parts = [(p[0], codes.get(TopicPartition(name, p[0]), default)) for p in partitions]
        early = [codes.get(TopicPartition(name, p)) in UP_FRONT for p, _ in parts]
        if any(early):
            parts = ([p for p, e in zip(parts, early) if e]
                     + [p for p, e in zip(parts, early) if not e])
        out.append((not any(early), (name, parts)))
    return [topic for _, topic in sorted(out, key=lambda x: x[0])]  # stable: request order


def partition_answers(topics, codes: dict, default: int) -> list[dict]:
    """``answer_order`` of a request's kio topics (of any request whose partitions have a
    ``partition_index``), as the kio response's values."""
    indexes = [(t.name, [(int(p.partition_index),) for p in t.partitions]) for t in topics]
    return [dict(name=name, partitions=[dict(partition_index=p, error_code=code)
                                        for p, code in parts])
            for name, parts in answer_order(indexes, codes, default)]


def known_groups(store) -> set[str]:
    """The store's groups: classic groups, groups with offsets, and consumer-protocol
    (KIP-848) groups, which may have neither of those."""
    return ({g for g, _, _ in store.list_groups()}
            | {g for g, _ in store.consumer_groups.group_ids()})


def group_error(ctx: Context, group_id: str) -> int:
    try:
        check_group_id(group_id)
    except OffsetlogError as e:
        return E.code_of(e)
    return E.NONE


def commit_retention(retention_time_ms: int) -> dict:
    """The store's keyword for OffsetCommit v2-4's ``retention_time_ms``: none for -1 (the
    broker's retention), else the offsets' own expiry. Kafka stores commit time + the value
    whatever its sign; a negative one is an expiry already past, the store's 0."""
    if retention_time_ms == -1:
        return {}
    return {"retention_time_ms": max(retention_time_ms, 0)}


def commit_fields(ctx: Context, version: int, group_id: str, generation: int, member_id: str,
                  instance: str | None, topics, call: Call | None = None,
                  retention_time_ms: int = -1) -> list | None:
    """An OffsetCommit of its fields (``topic_fields``), checked and committed (this waits
    for the commit to be durable): None when every partition was committed, else
    ``answer_order``'s topics with their codes. Both ways a request comes here: decoded by
    kio (``offset_commit``, with its ``call`` for the authorizer) and by the native request
    loop of plaintext connections (``connection.Connection.offset_commit``)."""
    code = group_error(ctx, group_id)
    if code:
        return answer_order(topics, {}, code)
    good, bad = checked_offsets(ctx, topics, call)
    if not good:
        return answer_order(topics, bad, E.NONE)
    code = consumer_groups.offset_check(ctx, group_id, member_id, generation, version=version,
                                        partitions=good)
    if code:  # (the partitions refused up front keep their own codes, as in Kafka)
        return answer_order(topics, bad, code)
    if code is not None:  # a consumer-protocol member: the store checks its epoch again,
        instance = None   # under the partition lock, in the same step as the write
    store = ctx.store
    try:
        # Fencing is checked under the partition lock, so no generation change slips in
        # between the check and the write.
        store.commit_sync(group_id, good, generation_id=generation, member_id=member_id,
                          group_instance_id=instance, **commit_retention(retention_time_ms))
    except Exception as error:
        return answer_order(topics, bad, commit_error_code(ctx, version, group_id, error))
    return answer_order(topics, bad, E.NONE) if bad else None


def commit_error_code(ctx: Context, version: int, group_id: str, error: Exception) -> int:
    """The code an OffsetCommit of ``version`` answers when the store's commit raised
    ``error`` (``commit_fields``, and the native request loop's plain commits)."""
    code = E.code_of(error)
    if (isinstance(error, IllegalGenerationError) and version >= 9
            and ctx.store.describe_group(group_id) is None):
        # Kafka 3.x+: a generation for a group it does not know is GROUP_ID_NOT_FOUND
        # from v9 on, ILLEGAL_GENERATION before (the store's fencing gives the latter).
        # Asked after the fencing, not before the commit: a check first could see the
        # group that the commit then finds deleted, or the other way round.
        code = E.GROUP_ID_NOT_FOUND
    return code


def offset_commit(ctx: Context, call: Call, now_ms: int):
    b = call.body
    native = b.__class__ is OffsetCommitFields
    topics = b.topics if native else topic_fields(b.topics)

    retention = b.retention_time_ms if native else _kio_retention(b)

    def commit():
        return commit_fields(ctx, call.version, b.group_id, int(b.generation_id_or_member_epoch),
                             b.member_id, getattr(b, "group_instance_id", None), topics, call,
                             retention)

    def finish(outcome):
        answer = outcome.get()
        if native:
            return commit_answer(call, topics, answer)
        if answer is None:
            return _all_committed(call, topics)
        return call.respond(topics=[dict(name=name, partitions=[
            dict(partition_index=p, error_code=code) for p, code in parts])
            for name, parts in answer])
    return run_blocking(commit, finish)


def _kio_retention(body) -> int:
    """A kio-decoded request's ``retention_time_ms`` (versions 2-4; kio reads it as a
    ``timedelta``), or -1."""
    retention = getattr(body, "retention_time", None)
    return -1 if retention is None else retention // timedelta(milliseconds=1)


def refused_commit(call: Call, code: int):
    """The answer refusing an OffsetCommit outright: ``code`` on every partition."""
    if call.body.__class__ is OffsetCommitFields:
        return commit_answer(call, call.body.topics, answer_order(call.body.topics, {}, code))
    return call.respond(topics=partition_answers(call.body.topics, {}, code))


#: (version, the request's topics and partitions) -> its answer when every partition was
#: committed, encoded (the kio path's): a consumer commits the same partitions again and again, and building
#: and encoding the answer with kio cost more than the rest of the handler
_committed_answers: dict = {}
ANSWERS_KEPT = 1024


def _all_committed(call: Call, topics):
    key = (call.version, tuple((name, tuple(p[0] for p in parts)) for name, parts in topics))
    answer = _committed_answers.get(key)
    if answer is None:
        answer = encoded(call.respond(topics=[dict(name=name, partitions=[
            dict(partition_index=p[0], error_code=E.NONE) for p in parts])
            for name, parts in topics]))
        if len(_committed_answers) >= ANSWERS_KEPT:
            _committed_answers.clear()
        _committed_answers[key] = answer
    return answer


# -- OffsetDelete ------------------------------------------------------------------------

def offset_delete(ctx: Context, call: Call, now_ms: int):
    b = call.body
    code = group_error(ctx, b.group_id)
    if code:
        return call.respond(error_code=code, topics=())
    codes: dict = {}
    wanted = []
    readable = authz.allowed_names(ctx, call, authz.READ, authz.TOPIC, (t.name for t in b.topics))
    for t in b.topics:
        for p in t.partitions:
            tp = TopicPartition(t.name, int(p.partition_index))
            if t.name not in readable:
                codes[tp] = E.TOPIC_AUTHORIZATION_FAILED
            elif ctx.topics.has_partition(tp.topic, tp.partition):
                wanted.append(tp)
            else:
                codes[tp] = E.UNKNOWN_TOPIC_OR_PARTITION
    store = ctx.store

    def delete() -> int:
        if b.group_id not in known_groups(store):
            return E.GROUP_ID_NOT_FOUND
        todo = list(wanted)
        while True:  # Kafka deletes what it may and answers the rest per partition
            try:
                store.delete_offsets(b.group_id, todo)
                return E.NONE
            except GroupSubscribedToTopicError as e:
                busy = set(e.partitions)
                for tp in busy:
                    codes[tp] = E.GROUP_SUBSCRIBED_TO_TOPIC
                todo = [tp for tp in todo if tp not in busy]
                if not todo:
                    return E.NONE

    def finish(outcome):
        if outcome.error is not None:
            return call.respond(error_code=E.code_of(outcome.error), topics=())
        if outcome.value:
            return call.respond(error_code=outcome.value, topics=())
        return call.respond(error_code=E.NONE, topics=partition_answers(b.topics, codes, 0))
    return run_blocking(delete, finish)
