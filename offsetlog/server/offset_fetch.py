"""OffsetFetch: each group's committed offsets, as Kafka answers them.

A request is decoded by the native core's codec (native/src/wire_codec/) into
``OffsetFetchFields``, its groups in one shape for every version (before v8, the request's
one group), and answered through it; on a host where the native allocator cannot reserve what
a hostile frame may claim (``offsets.NATIVE_ARRAY_CODECS``), kio decodes and encodes it
instead and ``fetch_groups`` puts its body in the same shape.
"""

from __future__ import annotations

from itertools import groupby
from operator import attrgetter
from typing import NamedTuple

from offsetlog.errors import UnstableOffsetCommitError
from offsetlog.log import _native
from offsetlog.server import authz, consumer_groups
from offsetlog.server import errors as E
from offsetlog.server.context import Call, Context
from offsetlog.server.offsets import group_error
from offsetlog.types import TopicPartition


class OffsetFetchFields(NamedTuple):
    """An OffsetFetch request as the native codec decodes it (a ``Call``'s body)."""

    require_stable: bool
    #: ``(group id, member id or None, member epoch, [(topic, [partition])] or None: every
    #: partition)``; before v8 the request's one group
    groups: list

    @property
    def group_id(self) -> str:
        """(before v8: the request's group, as kio's body names it)"""
        return self.groups[0][0]


def fetch_groups(call: Call) -> list:
    """The request's groups in ``OffsetFetchFields.groups``' shape, whoever decoded it."""
    b = call.body
    if b.__class__ is OffsetFetchFields:
        return b.groups

    def topics(ts):
        return None if ts is None else [(t.name, list(t.partition_indexes)) for t in ts]
    if call.version >= 8:
        return [(g.group_id, getattr(g, "member_id", None), int(getattr(g, "member_epoch", -1)),
                 topics(g.topics)) for g in b.groups]
    return [(b.group_id, None, -1, topics(b.topics))]


def fetch_answer(call: Call, groups: list):
    """The response to ``call`` of ``groups``: ``(group id, [(topic, [(partition, offset,
    leader epoch, metadata, code)])], group code)`` (before v8: one group, whose code has
    already been put on its partitions before v2)."""
    if call.body.__class__ is OffsetFetchFields:
        return _native.encode_offset_fetch_response(call.header.correlation_id, call.version,
                                                    groups)

    def topics(ts):
        return [dict(name=n, partitions=[dict(
            partition_index=p, committed_offset=o, committed_leader_epoch=e, metadata=m,
            error_code=c) for p, o, e, m, c in parts]) for n, parts in ts]
    if call.version >= 8:
        return call.respond(groups=[dict(group_id=g, topics=topics(ts), error_code=code)
                                    for g, ts, code in groups])
    _, ts, code = groups[0]
    return call.respond(topics=topics(ts), error_code=code)


def refused_fetch(call: Call, code: int):
    """The answer refusing a pre-v8 OffsetFetch outright with ``code`` (Kafka's: the asked
    partitions carry it before v2, which has no group-level code)."""
    group_id, _, _, topics = fetch_groups(call)[0]
    parts = []
    if call.version < 2 and topics is not None:
        parts = [(n, [(p, -1, -1, "", code) for p in ps]) for n, ps in topics]
    return fetch_answer(call, [(group_id, parts, code)])


def _fetch_group(ctx: Context, group_id: str, topics, require_stable: bool,
                 member: tuple | None = None, call: Call | None = None) -> tuple[list, int]:
    """(topics of the answer, group error code) for one group; with ``call`` and an
    authorizer, the caller's permissions (Describe on the group and on each topic) apply."""
    describable = None
    if call is not None and ctx.acl is not None:
        if not authz.allowed(ctx, call, authz.DESCRIBE, authz.GROUP, group_id):
            return [], E.GROUP_AUTHORIZATION_FAILED
        describable = authz.allowed_names(ctx, call, authz.DESCRIBE, authz.TOPIC,
                                          {name for name, _ in topics or ()})
    code = group_error(ctx, group_id)
    if code:
        return [], code
    if member is not None:
        code = consumer_groups.offset_check(ctx, group_id, member[0], member[1], fetch=True)
        if code:
            return [], code
    if describable is not None and topics is not None:
        denied = [t for t in topics if t[0] not in describable]
        topics = [t for t in topics if t[0] in describable]
    else:
        denied = []
    # (a partition no commit can name, a negative one or one of the topic "", has no offset:
    # answered -1 with the others, as Kafka answers it, not refused by the store's checks)
    stored = None if topics is None else [
        TopicPartition(name, int(p)) for name, parts in topics for p in parts
        if name and p >= 0]
    unstable: set = set()
    if require_stable:
        try:
            ctx.store.fetch(group_id, stored, require_stable=True)
        except UnstableOffsetCommitError as e:
            unstable = set(e.partitions)
    committed = ctx.store.fetch(group_id, stored)
    if topics is None and call is not None and ctx.acl is not None:
        # every partition: only those of topics the caller may describe, as Kafka filters
        shown = authz.allowed_names(ctx, call, authz.DESCRIBE, authz.TOPIC,
                                    {tp.topic for tp in set(committed) | unstable})
        committed = {tp: om for tp, om in committed.items() if tp.topic in shown}
        unstable = {tp for tp in unstable if tp.topic in shown}
    if topics is None:  # every partition with an offset, one answer topic each topic
        every = sorted(set(committed) | unstable)
        topics = [(name, [tp.partition for tp in tps])
                  for name, tps in groupby(every, key=attrgetter("topic"))]

    def answer(tp: TopicPartition) -> tuple:
        # KIP-447: UNSTABLE_OFFSET_COMMIT per partition, the group's code stays 0
        # (librdkafka's read_committed consumer retries on the partition error)
        om = committed.get(tp)
        hidden = om is None or tp in unstable
        return (tp.partition, -1 if hidden else om.offset,
                -1 if om is None or om.leader_epoch is None else om.leader_epoch,
                "" if hidden else om.metadata,
                E.UNSTABLE_OFFSET_COMMIT if tp in unstable else E.NONE)
    # each topic of the request answered as it was asked, in its order (one named twice:
    # twice; one named with no partition: with none), as Kafka answers
    answered = [(name, [answer(TopicPartition(name, int(p))) for p in parts])
                for name, parts in topics]
    answered += [(name, [(p, -1, -1, "", E.TOPIC_AUTHORIZATION_FAILED) for p in parts])
                 for name, parts in denied]  # after the others, as Kafka answers them
    return answered, E.NONE


def offset_fetch(ctx: Context, call: Call, now_ms: int):
    stable = bool(getattr(call.body, "require_stable", False))
    answers = []
    for group_id, member_id, epoch, topics in fetch_groups(call):
        member = (member_id, epoch) if call.version >= 9 else None  # KIP-848's fields
        topics, code = _fetch_group(ctx, group_id, topics, stable, member, call)
        answers.append((group_id, topics, code))
    if call.version < 2 and answers[0][2]:  # no group-level code before v2: on each partition
        group_id, topics, code = answers[0]
        answers = [(group_id, [(n, [(*p[:4], code) for p in parts]) for n, parts in topics],
                    code)]
    return fetch_answer(call, answers)
