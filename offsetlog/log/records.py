"""Record schemas: what each record type's key and value hold, by name and version.

In memory (and in a decoded batch) a record is a 5-tuple::

    (offset_delta, record_type, version, key, value)

``key`` and ``value`` are dicts of named fields (msgpack maps on disk), except in
``OFFSET_COMMIT`` version 1, the version written, where both are arrays of fields by
position (``commit_key`` and ``commit_entry`` read either version); ``value`` is ``None``
for a tombstone. A field left out takes its default, so fields can be added to a schema
without a version bump; a change old readers cannot ignore bumps ``version``, and a reader
refuses versions newer than it knows (``UnsupportedVersionError``), never guessing.
See docs/FORMAT.md, "Records".
"""

from __future__ import annotations

from typing import Any

from offsetlog.errors import BatchTooLargeError, UnsupportedVersionError
from offsetlog.log._native import KeyCache, plain_commit_fields
from offsetlog.log.format import HEADER_AFTER_LENGTH, MAX_BATCH_BYTES, Record, RecordType
from offsetlog.log.framing import encode_payload
from offsetlog.types import OffsetAndMetadata, TopicPartition
from offsetlog.validation import check_offsets

# A Record (offsetlog.log.format) is (offset_delta, record_type, version, key, value): a tuple
# when built, a list when decoded; msgpack arrays inside values decode as lists, so values
# built here should use lists too (the table compares equal either way only if they do).

OFFSET_COMMIT = int(RecordType.OFFSET_COMMIT)
GROUP_METADATA = int(RecordType.GROUP_METADATA)
TRANSACTION_MARKER = int(RecordType.TRANSACTION_MARKER)
TRANSACTION_STATE = int(RecordType.TRANSACTION_STATE)
TOPIC = int(RecordType.TOPIC)
CONSUMER_GROUP_METADATA = int(RecordType.CONSUMER_GROUP_METADATA)
CONSUMER_GROUP_MEMBER_METADATA = int(RecordType.CONSUMER_GROUP_MEMBER_METADATA)
CONSUMER_GROUP_TARGET_ASSIGNMENT_METADATA = int(RecordType.CONSUMER_GROUP_TARGET_ASSIGNMENT_METADATA)
CONSUMER_GROUP_TARGET_ASSIGNMENT_MEMBER = int(RecordType.CONSUMER_GROUP_TARGET_ASSIGNMENT_MEMBER)
CONSUMER_GROUP_CURRENT_MEMBER_ASSIGNMENT = int(
    RecordType.CONSUMER_GROUP_CURRENT_MEMBER_ASSIGNMENT)
#: a SASL/SCRAM credential of the wire server (docs/FORMAT.md, docs/SECURITY.md)
USER_SCRAM_CREDENTIAL = int(RecordType.USER_SCRAM_CREDENTIAL)
ACL = int(RecordType.ACL)
#: the consumer group protocol's record types, in the order that rebuilds a group
CONSUMER_GROUP_TYPES = (CONSUMER_GROUP_METADATA, CONSUMER_GROUP_MEMBER_METADATA,
                        CONSUMER_GROUP_TARGET_ASSIGNMENT_MEMBER,
                        CONSUMER_GROUP_TARGET_ASSIGNMENT_METADATA,
                        CONSUMER_GROUP_CURRENT_MEMBER_ASSIGNMENT)
#: of those, the ones keyed by (group, member); the others by group
CONSUMER_MEMBER_TYPES = frozenset({CONSUMER_GROUP_MEMBER_METADATA,
                                   CONSUMER_GROUP_TARGET_ASSIGNMENT_MEMBER,
                                   CONSUMER_GROUP_CURRENT_MEMBER_ASSIGNMENT})

#: Highest value version this code reads, per record type.
MAX_VERSION = {OFFSET_COMMIT: 1, GROUP_METADATA: 0, TRANSACTION_MARKER: 0, TRANSACTION_STATE: 0,
               TOPIC: 0, USER_SCRAM_CREDENTIAL: 0, ACL: 0,
               **{t: 0 for t in CONSUMER_GROUP_TYPES}}

#: The OFFSET_COMMIT version written: key ``[group, topic, partition]`` and value ``[offset,
#: commit_timestamp, metadata, leader_epoch, expire_timestamp]`` by position, trailing
#: defaults left out. Version 0 (maps of named fields) is still read. Positions instead of
#: names: a record takes about half the bytes, and decodes and applies 1.6x faster (replay
#: spends its time there; bench/RESULTS.md, "Issue 16").
OFFSET_COMMIT_VERSION = 1

#: TRANSACTION_MARKER results
COMMIT = "commit"
ABORT = "abort"

#: Field names and defaults, per record type (documentation and the dump tool read these).
KEY_FIELDS = {
    OFFSET_COMMIT: ("group", "topic", "partition"),
    GROUP_METADATA: ("group",),
    TRANSACTION_MARKER: ("producer_id",),
    TRANSACTION_STATE: ("transactional_id",),
    TOPIC: ("topic",),
    USER_SCRAM_CREDENTIAL: ("user", "mechanism"),
    ACL: ("resource_type", "name", "pattern_type", "principal", "host", "operation",
          "permission"),
    **{t: ("group", "member") if t in CONSUMER_MEMBER_TYPES else ("group",)
       for t in CONSUMER_GROUP_TYPES},
}
VALUE_DEFAULTS: dict[int, dict[str, Any]] = {
    OFFSET_COMMIT: {
        "offset": None,  # required
        "commit_timestamp": None,  # required, epoch ms
        "metadata": "",
        "leader_epoch": None,
        "expire_timestamp": None,  # epoch ms; only for commits that asked for an explicit expiry
    },
    GROUP_METADATA: {
        "protocol_type": "consumer",
        "generation": 0,
        "protocol": None,
        "leader": None,
        "current_state_timestamp": None,
        "members": [],
    },
    TRANSACTION_MARKER: {
        "producer_epoch": None,  # required
        "result": None,  # required: "commit" or "abort"
    },
    TRANSACTION_STATE: {
        "producer_id": None,  # required
        "producer_epoch": None,  # required
        "state": None,  # required: one of offsetlog.txn.state.STATES
        "partitions": [],  # log partitions the open transaction has written to, sorted
        "timeout_ms": None,  # required
        "start_timestamp": -1,  # epoch ms the open transaction first wrote; -1 when none
        "update_timestamp": None,  # required, epoch ms of this record
        "last_producer_epoch": -1,  # the epoch before a bump the producer asked for (KIP-360)
        "last_producer_id": -1,  # the producer id before the last rotation
    },
    TOPIC: {
        "partitions": None,  # required, >= 1
        "topic_id": None,  # required, 16 bytes (a UUID), never all zeros
        "created_timestamp": None,  # required, epoch ms
    },
    USER_SCRAM_CREDENTIAL: {
        "salt": None,  # required, bytes
        "iterations": None,  # required, >= 4096
        "stored_key": None,  # required, bytes: H(ClientKey) (RFC 5802)
        "server_key": None,  # required, bytes: HMAC(SaltedPassword, "Server Key")
    },
    ACL: {
        "created_timestamp": None,  # required, epoch ms
    },
    # the consumer group protocol's records (offsetlog.group.consumer.group builds them)
    CONSUMER_GROUP_METADATA: {
        "epoch": None,  # required: the group epoch
        "subscription_metadata": {},  # topic -> partition count, of the subscribed topics
    },
    CONSUMER_GROUP_MEMBER_METADATA: {
        "instance_id": None, "rack_id": None, "client_id": "", "client_host": "",
        "subscribed_topic_names": [], "server_assignor": None, "rebalance_timeout_ms": -1,
        "subscribed_topic_regex": None,  # RE2 syntax; written only when the member has one
        # a classic-protocol member: {"session_timeout_ms", "supported_protocols": [[name,
        # metadata], ...]}; written only for one
        "classic_member_metadata": None,
    },
    CONSUMER_GROUP_TARGET_ASSIGNMENT_METADATA: {
        "assignment_epoch": None,  # required
    },
    CONSUMER_GROUP_TARGET_ASSIGNMENT_MEMBER: {
        "partitions": [],  # [[topic, [partition, ...]], ...], topics by name, ascending
    },
    CONSUMER_GROUP_CURRENT_MEMBER_ASSIGNMENT: {
        "member_epoch": None, "previous_member_epoch": None,  # required
        "state": "stable",  # stable, unrevoked_partitions, unreleased_partitions
        "assigned": [], "pending_revocation": [],  # as "partitions" above
        # [[topic, [[partition, epoch], ...]], ...]: the epoch each partition of both was
        # assigned at (KIP-1251); written only when there is one
        "assignment_epochs": [],
    },
}

#: offsetlog.group.consumer's record kinds (Kafka's record names) -> record type
CONSUMER_GROUP_KINDS = {
    "ConsumerGroupMetadata": CONSUMER_GROUP_METADATA,
    "ConsumerGroupMemberMetadata": CONSUMER_GROUP_MEMBER_METADATA,
    "ConsumerGroupTargetAssignmentMetadata": CONSUMER_GROUP_TARGET_ASSIGNMENT_METADATA,
    "ConsumerGroupTargetAssignmentMember": CONSUMER_GROUP_TARGET_ASSIGNMENT_MEMBER,
    "ConsumerGroupCurrentMemberAssignment": CONSUMER_GROUP_CURRENT_MEMBER_ASSIGNMENT,
}


def offset_commit(delta: int, group: str, topic: str, partition: int, offset: int, *,
                  metadata: str = "", leader_epoch: int | None = None,
                  commit_timestamp: int, expire_timestamp: int | None = None) -> Record:
    value: list = [offset, commit_timestamp]
    # Trailing defaults are left out: most commits carry no metadata, epoch or expiry.
    if expire_timestamp is not None:
        value += (metadata, leader_epoch, expire_timestamp)
    elif leader_epoch is not None:
        value += (metadata, leader_epoch)
    elif metadata:
        value.append(metadata)
    return (delta, OFFSET_COMMIT, OFFSET_COMMIT_VERSION, [group, topic, partition], value)


def commit_key(version: int, key) -> tuple[str, str, int]:
    """``(group, topic, partition)`` of an OFFSET_COMMIT record's key, of either version."""
    if version == OFFSET_COMMIT_VERSION:
        group, topic, partition = key
        return group, topic, partition
    return key["group"], key["topic"], key["partition"]


def commit_entry(version: int, value) -> tuple:
    """``(offset, metadata, leader_epoch, commit_timestamp, expire_timestamp)`` of an
    OFFSET_COMMIT record's value (not a tombstone's), of either version. Elements of a
    version 1 value past the five known are ignored (a later writer may append fields)."""
    if version == OFFSET_COMMIT_VERSION:
        n = len(value)
        if n == 2:
            return (value[0], "", None, value[1], None)
        if n < 2:
            raise ValueError(f"an OFFSET_COMMIT value of {n} fields")
        return (value[0], value[2], value[3] if n > 3 else None, value[1],
                value[4] if n > 4 else None)
    return (value["offset"], value.get("metadata", ""), value.get("leader_epoch"),
            value["commit_timestamp"], value.get("expire_timestamp"))


#: The most bytes msgpack needs for a plain commit record (no metadata, epoch or expiry) beyond
#: its group and topic text: array, delta (uint32), type, version, the key array with a str32
#: header per text and the partition (uint32), the value array with the offset and the
#: timestamp (int64 each).
PLAIN_COMMIT_BOUND = 1 + 5 + 1 + 1 + (1 + 5 + 5 + 5) + (1 + 9 + 9)


def max_call_bytes(max_batch_bytes: int = MAX_BATCH_BYTES) -> int:
    """The most bytes (as ``offset_commit_fields`` bounds them) one commit call's records may
    take: it is written as (at most) one batch, whose ``length`` field (44 header bytes +
    payload) a reader refuses beyond ``max_batch_bytes``."""
    return max_batch_bytes - HEADER_AFTER_LENGTH


def call_too_large(nbytes: int, limit: int) -> BatchTooLargeError:
    return BatchTooLargeError(
        f"the commit call's records take up to {nbytes} bytes, over the {limit} one record "
        f"batch can hold (docs/FORMAT.md: a batch is at most {limit + HEADER_AFTER_LENGTH + 4} "
        "bytes); split it into smaller calls", size=nbytes, limit=limit)


#: the most one commit call may take; a larger call is refused before anything is written,
#: never written and then refused by the reader (docs/FORMAT.md, "Limits")
MAX_CALL_BYTES = max_call_bytes()

#: record keys a router's cache (``_native.KeyCache``, see ``offset_commit_fields``) holds
#: before it starts over
KEYS_CACHED = 8192


def offset_commit_fields(group_id: str, offsets, commit_timestamp: int, metadata_max: int,
                         keys: KeyCache | None = None, min_offset: int = 0,
                         expire_timestamp: int | None = None) -> tuple[tuple, int]:
    """One commit call, checked: its offsets as flat ``(key, value, timestamp)`` triples (see
    ``records_from_fields``), in the caller's order, after every check of
    ``validation.check_offsets`` (which raises for the whole call), and an upper bound of
    their encoded size as records (what ``max_group_commit_bytes`` counts).

    A triple is ``(record key, offset, commit timestamp)`` for a plain offset, or ``(record
    key, record value, None)`` for one with metadata or a leader epoch. Nothing here is a new
    container the cyclic collector tracks, which is why commit calls queue these and the
    leader builds the records once per round, when it frames it (bench/RESULTS.md).

    The usual call, a dict of ``TopicPartition -> int`` or ``OffsetAndMetadata`` (with
    metadata of at most ``metadata_max`` UTF-8 bytes, which the limit in UTF-16 code units
    surely holds), is checked in one native pass (``_native.plain_commit_fields``), its size
    bounded from above rather than counted; anything else goes through ``check_offsets``.
    Both give the records ``offset_commit`` builds (once ``records_from_fields`` has built
    them).

    :param min_offset: the lowest offset accepted (``validation.check_offsets``); the usual
        call's one pass takes offsets from 0, anything lower goes through ``check_offsets``
    :param expire_timestamp: epoch ms every offset of the call expires at, whatever the
        group's state (``commit_sync(retention_time_ms=...)``); such a call takes the
        ``check_offsets`` way
    :param keys: a cache of record keys (``_native.KeyCache``, holding ``KEYS_CACHED`` at
        most: a router's): the usual call takes its record keys ``[group, topic, partition]``
        from it, so the records of one key share one (read-only) list.
    """
    if offsets.__class__ is dict and expire_timestamp is None:
        usual = plain_commit_fields(group_id, offsets, commit_timestamp, keys,
                                    PLAIN_COMMIT_BOUND, metadata_max, TopicPartition,
                                    OffsetAndMetadata)
        if usual is not None:
            if usual[1] > MAX_CALL_BYTES:
                raise call_too_large(usual[1], MAX_CALL_BYTES)
            return usual
    records = [offset_commit(0, group_id, topic, partition, offset, metadata=metadata,
                             leader_epoch=epoch, commit_timestamp=commit_timestamp,
                             expire_timestamp=expire_timestamp)
               for topic, partition, offset, metadata, epoch
               in check_offsets(offsets, metadata_max=metadata_max, min_offset=min_offset)]
    if not records:
        return (), 0
    fields = []
    for _, _, _, key, value in records:
        if len(value) == 2:  # plain: the form the fast path gives
            fields += (key, value[0], commit_timestamp)
        else:
            fields += (key, value, None)
    # encoded with delta 0; in a run a delta takes up to 4 bytes more (uint32), and so may
    # the array's header
    n = len(encode_payload(records)) + 4 * len(records) + 4
    if n > MAX_CALL_BYTES:
        raise call_too_large(n, MAX_CALL_BYTES)
    return tuple(fields), n


def records_from_fields(fields, first: int = 0) -> list[Record]:
    """The records of flat ``(key, value, timestamp)`` triples (``offset_commit_fields``),
    numbered from ``first``."""
    v = OFFSET_COMMIT_VERSION
    if len(fields) == 3:  # one offset (a commit_sync of one): the loop below without the loop
        key, value, timestamp = fields
        return [(first, OFFSET_COMMIT, v, key,
                 value if timestamp is None else [value, timestamp])]
    it = iter(fields)
    return [(i, OFFSET_COMMIT, v, key, value if timestamp is None else [value, timestamp])
            for i, (key, value, timestamp) in enumerate(zip(it, it, it), first)]


def offset_tombstone(delta: int, group: str, topic: str, partition: int) -> Record:
    return (delta, OFFSET_COMMIT, OFFSET_COMMIT_VERSION, [group, topic, partition], None)


def group_metadata(delta: int, group: str, value: dict[str, Any] | None) -> Record:
    return (delta, GROUP_METADATA, 0, {"group": group}, value)


def transaction_marker(delta: int, producer_id: int, producer_epoch: int, result: str
                       ) -> Record:
    """The one record of a control batch: ``producer_id``'s open transaction in this log
    partition is committed or aborted."""
    return (delta, TRANSACTION_MARKER, 0, {"producer_id": producer_id},
            {"producer_epoch": producer_epoch, "result": result})


def transaction_state(delta: int, transactional_id: str, value: dict[str, Any] | None
                      ) -> Record:
    return (delta, TRANSACTION_STATE, 0, {"transactional_id": transactional_id}, value)


def topic(delta: int, name: str, value: dict[str, Any] | None) -> Record:
    """A topic of the wire server's registry (docs/FORMAT.md, ``TOPIC``); None deletes it."""
    return (delta, TOPIC, 0, {"topic": name}, value)


def user_scram_credential(delta: int, user: str, mechanism: str, value: dict[str, Any] | None
                          ) -> Record:
    """A SCRAM credential of ``user`` for ``mechanism`` (docs/FORMAT.md,
    ``USER_SCRAM_CREDENTIAL``); None deletes it."""
    return (delta, USER_SCRAM_CREDENTIAL, 0, {"user": user, "mechanism": mechanism}, value)


def acl(delta: int, binding: tuple, value: dict[str, Any] | None) -> Record:
    """An ACL binding (docs/FORMAT.md, ``ACL``): ``binding`` is its seven key fields in
    ``KEY_FIELDS`` order; None deletes it."""
    return (delta, ACL, 0, dict(zip(KEY_FIELDS[ACL], binding)), value)


def acl_key(key: dict) -> tuple:
    """The seven fields of an ACL record's key, in ``KEY_FIELDS`` order."""
    return tuple(key[f] for f in KEY_FIELDS[ACL])


def consumer_group_record(delta: int, record_type: int, key: tuple, value: dict | None
                          ) -> Record:
    """A consumer group protocol record: key ``(group,)`` or ``(group, member)``; None
    deletes it (docs/FORMAT.md, ``CONSUMER_GROUP_*``)."""
    return (delta, record_type, 0, dict(zip(KEY_FIELDS[record_type], key)), value)


def check_version(record_type: int, version: int) -> None:
    try:
        newest = MAX_VERSION[record_type]
    except KeyError:
        raise UnsupportedVersionError(f"unknown record type {record_type}") from None
    if version > newest:
        raise UnsupportedVersionError(
            f"record type {RecordType(record_type).name} version {version} is newer than this "
            f"offsetlog reads (up to {newest})")


def record_group(record: Record) -> str | None:
    """The consumer group a record belongs to, if it belongs to one."""
    key = record[3]
    if isinstance(key, dict):
        return key.get("group")
    if record[1] == OFFSET_COMMIT and record[2] == OFFSET_COMMIT_VERSION:
        return key[0]
    return None


def describe(record: Record) -> dict[str, Any]:
    """A plain, fully-defaulted view of a record, for dumps and reports."""
    delta, rtype, version, key, value = record
    try:
        name = RecordType(rtype).name
    except ValueError:
        name = f"UNKNOWN({rtype})"
    if rtype == OFFSET_COMMIT and version == OFFSET_COMMIT_VERSION:
        out: dict[str, Any] = {"type": name, "version": version,
                               "key": dict(zip(KEY_FIELDS[rtype], key))}
        if value is None:
            out["value"] = None
        else:  # in VALUE_DEFAULTS' order, as version 0's view below
            offset, metadata, epoch, timestamp, expire = commit_entry(version, value)
            out["value"] = {"offset": offset, "commit_timestamp": timestamp,
                            "metadata": metadata, "leader_epoch": epoch,
                            "expire_timestamp": expire}
        return out
    out = {"type": name, "version": version, "key": dict(key)}
    if value is None:
        out["value"] = None
    else:
        full = dict(VALUE_DEFAULTS.get(rtype, {}))
        full.update(value)
        out["value"] = full
    return out
