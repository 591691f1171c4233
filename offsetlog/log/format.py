"""On-disk constants. The byte-by-byte description lives in docs/FORMAT.md; keep the two in step.

A segment file is a sequence of record batches. Each batch is a fixed header followed by a
msgpack payload (an array of records); see ``offsetlog.log.framing`` for the code that reads and
writes them and ``offsetlog.log.records`` for the record schemas.
"""

from __future__ import annotations

from enum import IntEnum
from typing import NamedTuple

import offsetlog.log._native as _native

#: Batch header, little-endian, 48 bytes:
#: length u32 | header_crc u32 | crc u32 | magic u8 | attributes u8 | base_offset i64 |
#: last_offset_delta u32 | record_count u32 | timestamp i64 | producer_id i64 |
#: producer_epoch i16
#: ``length`` counts the bytes after the length field (header rest + payload);
#: ``header_crc`` is zlib's CRC-32 of bytes 0-3 (length) then 12-47 (every field after the
#: checksums), so a reader can trust a batch's extent before it has all of its payload;
#: ``crc`` is the CRC-32 of the payload. The native core (``native/src/batch.rs``) reads and
#: writes it; the sizes below are the native core's own constants.
HEADER_SIZE: int = _native.HEADER_SIZE  # 48


class BatchHeader(NamedTuple):
    """The header's fields, in order (docs/FORMAT.md, "Record batch"), as the native reader
    gives them."""

    length: int  # bytes after this field: the rest of the header and the payload
    header_crc: int
    crc: int  # of the payload
    magic: int
    attributes: int  # ``Attribute`` bits
    base_offset: int
    last_offset_delta: int
    record_count: int
    timestamp: int
    producer_id: int
    producer_epoch: int


LENGTH_SIZE: int = _native.LENGTH_SIZE
HEADER_CRC_AT = 4
PAYLOAD_CRC_AT = 8
#: first byte after the two checksums: the header CRC covers [0, 4) and [CRC_START, 48)
CRC_START: int = _native.CRC_START
#: Bytes counted by ``length`` that are header, not payload.
HEADER_AFTER_LENGTH: int = _native.HEADER_AFTER_LENGTH  # 44

#: Identifies batch format 1. A reader refuses any other value: a future incompatible framing
#: gets a new magic, so old readers fail loudly instead of misreading it.
MAGIC: int = _native.MAGIC  # 0xA1

#: Refuse to believe a length beyond this: a batch is one commit call, never near 1 GiB.
MAX_BATCH_BYTES: int = _native.MAX_BATCH_BYTES  # 2**30


class Attribute:
    """Bits of the batch ``attributes`` byte. Unknown bits make a batch unreadable."""

    TRANSACTIONAL = 0x01  # records belong to producer_id/producer_epoch's open transaction
    assert TRANSACTIONAL == _native.TRANSACTIONAL  # the bit the native framing sets
    CONTROL = 0x02  # the batch holds one transaction marker, not data
    #: written by the cleaner: ``timestamp`` holds the delete horizon, the time from which a
    #: cleaning may drop this batch's tombstones (first cleaned + delete_retention_ms, KIP-534)
    DELETE_HORIZON = 0x04
    KNOWN = TRANSACTIONAL | CONTROL | DELETE_HORIZON
    assert KNOWN == _native.KNOWN_ATTRIBUTES  # the bits the native reader accepts
    #: bits that change what the records mean: the table applies such batches off its hot path
    SEMANTIC = TRANSACTIONAL | CONTROL


#: A record is a msgpack array ``(offset_delta, record_type, version, key, value)``, built by
#: ``offsetlog.log.records``: a tuple when written, a list when read back.
Record = tuple

NO_PRODUCER_ID = -1
NO_PRODUCER_EPOCH = -1


class RecordType(IntEnum):
    """What a record's key names. 0 is reserved so a zeroed region never decodes as a record."""

    RESERVED = 0
    OFFSET_COMMIT = 1  # key (group, topic, partition) -> committed offset
    GROUP_METADATA = 2  # key (group,) -> generation, protocol, leader, members
    TRANSACTION_MARKER = 3  # key (producer_id,) -> commit or abort, in a control batch
    TRANSACTION_STATE = 4  # key (transactional_id,) -> producer id, epoch, state, partitions
    TOPIC = 5  # key (topic,) -> partition count, topic id: the wire server's topic registry
    # the consumer group protocol (KIP-848), modelled on Kafka's records of the same names
    CONSUMER_GROUP_METADATA = 6  # key (group,) -> group epoch, subscription metadata
    CONSUMER_GROUP_MEMBER_METADATA = 7  # key (group, member) -> subscription, settings
    CONSUMER_GROUP_TARGET_ASSIGNMENT_METADATA = 8  # key (group,) -> assignment epoch
    CONSUMER_GROUP_TARGET_ASSIGNMENT_MEMBER = 9  # key (group, member) -> target partitions
    CONSUMER_GROUP_CURRENT_MEMBER_ASSIGNMENT = 10  # key (group, member) -> epochs, partitions
    USER_SCRAM_CREDENTIAL = 11  # key (user, mechanism) -> salt, iterations, stored/server keys
    ACL = 12  # key (resource type, name, pattern type, principal, host, operation, permission)


# Directory and file naming: see offsetlog.log.naming.
PARTITION_DIR_PREFIX = "__consumer_offsets-"
SEGMENT_SUFFIX = ".log"
CLEANED_SUFFIX = ".cleaned"  # a cleaner's output being written; discarded by recovery
SWAP_SUFFIX = ".swap"  # a cleaner's finished output; recovery completes the swap
SEGMENT_NAME_DIGITS = 20
META_FILE = "meta.json"
SNAPSHOT_DIR = "snapshots"  # the LMDB environment of table snapshots (recovery/snapshot.py)
LOCK_FILE = "LOCK"
STORE_FORMAT_VERSION = 1
#: meta.json's format while the store's WRITE-AHEAD file may hold entries: an engine that
#: reads only STORE_FORMAT_VERSION refuses the store rather than open it without them
WRITE_AHEAD_FORMAT_VERSION = 2
