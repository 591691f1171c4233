"""Stores and segments as rows: the part of the Spark data source that needs no Spark.

The driver plans (:func:`find_stores`, :func:`plan_segments`: one :class:`SegmentTask` per
segment file, so reads parallelise by segment); each worker turns one task into rows
(:func:`segment_rows`, :func:`segment_problems`). Both only read: no lock, no repair, like
``offsetlog.recovery.tools.inspect``.

The policy is recovery's (``offsetlog.recovery.replay.recover_partition``, docs/FORMAT.md "Reading and
recovery"): a torn tail at the end of a partition's last segment ends it quietly; a torn tail
in a closed segment, corruption anywhere, or a batch that reaches past the next segment's base
raises ``CorruptLogError`` with file and position, unless ``salvage`` asks to skip corrupt
regions (they are then listed by the ``problems`` view and logged as warnings).
"""

from __future__ import annotations

import logging
import os
from dataclasses import dataclass
from typing import Iterator

import msgpack

from offsetlog.errors import CorruptLogError, StoreConfigError
from offsetlog.log import naming
from offsetlog.log.format import HEADER_SIZE, META_FILE, RecordType
from offsetlog.log.framing import BatchReader, decode_payload
from offsetlog.log.records import (
    OFFSET_COMMIT,
    TOPIC,
    TRANSACTION_MARKER,
    TRANSACTION_STATE,
    commit_entry,
    commit_key,
)
from offsetlog.log.segment import read_file
from offsetlog.recovery.replay import UNDECODABLE, check_limit
from offsetlog.recovery.swap import plan_swaps
from offsetlog.recovery.tools.inspect import stored_partitions

log = logging.getLogger("offsetlog.spark")

#: One row per record. Column names are a contract (docs/SPARK.md); add, never rename.
RECORD_COLUMNS = (
    ("store", "STRING"),  # absolute path of the store directory
    ("log_partition", "INT"),  # n of __consumer_offsets-<n>
    ("segment", "STRING"),  # the segment's file name
    ("segment_base", "BIGINT"),  # its base offset (from the name)
    ("batch_position", "BIGINT"),  # byte position of the record's batch in the segment
    ("batch_base_offset", "BIGINT"),
    ("batch_timestamp", "BIGINT"),  # append time; the delete horizon when attributes bit 2 is set
    ("attributes", "INT"),  # bit 0 transactional, bit 1 control, bit 2 delete horizon
    ("producer_id", "BIGINT"),  # -1 unless transactional
    ("producer_epoch", "INT"),  # -1 unless transactional
    ("log_offset", "BIGINT"),
    ("record_type", "STRING"),  # OFFSET_COMMIT, GROUP_METADATA, TRANSACTION_MARKER,
    # TRANSACTION_STATE, TOPIC, UNKNOWN
    ("record_type_id", "INT"),
    ("record_version", "INT"),
    ("group", "STRING"),
    ("topic", "STRING"),  # OFFSET_COMMIT and TOPIC only
    ("partition", "INT"),  # OFFSET_COMMIT only
    ("offset", "BIGINT"),  # OFFSET_COMMIT values only
    ("leader_epoch", "INT"),
    ("metadata", "STRING"),
    ("commit_timestamp", "BIGINT"),
    ("expire_timestamp", "BIGINT"),
    ("tombstone", "BOOLEAN"),  # the value is nil: the key is deleted
    ("transaction_result", "STRING"),  # TRANSACTION_MARKER: "commit" or "abort"
    ("value_msgpack", "BINARY"),  # the value's msgpack bytes, for records other than offsets
    ("transactional_id", "STRING"),  # TRANSACTION_STATE only: its key (the cleaner's key too)
    # the key's msgpack bytes, for records other than offsets (as value_msgpack): what the
    # cleaner keys the CONSUMER_GROUP_*, USER_SCRAM_CREDENTIAL and ACL records by
    ("key_msgpack", "BINARY"),
)

PROBLEM_COLUMNS = (
    ("store", "STRING"),
    ("log_partition", "INT"),
    ("segment", "STRING"),
    ("position", "BIGINT"),  # byte position where the dropped range starts
    ("bytes", "BIGINT"),  # bytes dropped
    ("reason", "STRING"),  # FORMAT.md's stable reason strings
    ("kind", "STRING"),  # "torn tail" (ignored, as recovery ignores it) or "corrupt"
)


def ddl(columns) -> str:
    return ", ".join(f"`{name}` {kind}" for name, kind in columns)


@dataclass(frozen=True)
class SegmentTask:
    """One segment file to read, with what recovery would know about its place in the log."""

    store: str
    log_partition: int
    path: str
    base: int
    #: the next segment's base offset (no batch may reach it); None for the last segment
    limit: int | None

    @property
    def last(self) -> bool:
        return self.limit is None


def find_stores(path: str) -> list[str]:
    """The store at ``path``, or every store below it (a directory holding ``meta.json``;
    the search does not descend into a store).

    :raises StoreConfigError: ``path`` holds no store
    """
    path = os.path.abspath(path)
    if os.path.isfile(os.path.join(path, META_FILE)):
        return [path]
    if not os.path.isdir(path):
        raise StoreConfigError(f"{path}: no such directory")
    stores = []
    for root, dirs, files in os.walk(path):
        if META_FILE in files:
            stores.append(root)
            dirs[:] = []
        else:
            dirs.sort()
    if not stores:
        raise StoreConfigError(f"{path} holds no offsetlog store (no meta.json below it)")
    return sorted(stores)


def store_partitions(store: str) -> list[tuple[int, str]]:
    """(log partition, directory) of a store, checked against its meta.json as open() does."""
    count = stored_partitions(store)
    found = naming.list_partition_dirs(store)
    extra = [p for p, _ in found if p >= count]
    if extra:
        raise StoreConfigError(f"{store} has log partitions {extra} beyond its partition "
                               f"count {count}")
    return found


def plan_segments(path: str) -> list[SegmentTask]:
    """One task per segment file of every store at or below ``path``, in log order.

    An interrupted cleaner swap is read as recovery will finish it (``plan_swaps``).
    """
    tasks = []
    for store in find_stores(path):
        for p, directory in store_partitions(store):
            segments = plan_swaps(directory).segments
            tasks += [SegmentTask(store, p, seg, base, limit)
                      for base, seg, limit in naming.with_limits(segments)]
    return tasks


def _read(task: SegmentTask, salvage: bool):
    data = read_file(task.path)
    # as recovery reads: only the last segment may end in preallocated (zero) space
    return data, BatchReader(data, salvage=salvage, min_offset=task.base, zero_tail=task.last)


def _stop_problem(task: SegmentTask, reader: BatchReader, size: int, salvage: bool):
    """(position, bytes, reason, kind) of what ended the segment, raising where recovery
    would; None if the segment ended cleanly."""
    stop = reader.stop
    if stop is None:
        return None
    if stop.torn and task.last:
        return stop.position, size - stop.position, stop.reason, "torn tail"
    reason = stop.reason if not stop.torn else f"{stop.reason} in a closed segment"
    if not salvage:
        raise CorruptLogError(task.path, stop.position, reason)
    return stop.position, size - stop.position, reason, "corrupt"


def segment_rows(task: SegmentTask, *, salvage: bool = False) -> Iterator[tuple]:
    """The rows (``RECORD_COLUMNS`` order) of every readable record of one segment.

    :raises CorruptLogError: corruption (unless ``salvage``), or a batch reaching past the
        next segment's base offset
    """
    data, reader = _read(task, salvage)
    store, lp, name, sbase = task.store, task.log_partition, os.path.basename(task.path), task.base
    packb = msgpack.packb  # a value's bytes for the value_msgpack column
    for pos, stop, h in reader.raw():
        base, last_delta, ts = h.base_offset, h.last_offset_delta, h.timestamp
        attrs, pid, pepoch = h.attributes, h.producer_id, h.producer_epoch
        check_limit(task.path, pos, base + last_delta, task.limit)
        try:
            records = decode_payload(data[pos + HEADER_SIZE:stop])
            rows = [_row(store, lp, name, sbase, pos, base, ts, attrs, pid, pepoch, r, packb)
                    for r in records]
        except UNDECODABLE as e:  # as recovery: corruption, or under salvage a skipped batch
            if not salvage:
                raise CorruptLogError(task.path, pos, f"undecodable payload ({e})") from None
            log.warning("salvage: skipped %s @ %d: %d bytes (undecodable payload)", task.path,
                        pos, stop - pos)
            continue
        yield from rows
    for p in reader.problems:
        log.warning("salvage: skipped %s @ %d: %d bytes (%s)", task.path, p.position,
                    p.dropped or 0, p.reason)
    problem = _stop_problem(task, reader, len(data), salvage)
    if problem is not None and problem[3] == "corrupt":
        log.warning("salvage: skipped the rest of %s from byte %d (%s)", task.path, problem[0],
                    problem[2])


def _row(store, lp, name, sbase, pos, base, ts, attrs, pid, pepoch, record, packb) -> tuple:
    delta, rtype, version, key, value = record
    try:
        type_name = RecordType(rtype).name
    except ValueError:
        type_name = "UNKNOWN"
    topic = partition = offset = leader_epoch = metadata = commit_ts = expire_ts = None
    result = blob = txn_id = key_blob = None
    if rtype == OFFSET_COMMIT:
        group, topic, partition = commit_key(version, key)
        if value is not None:
            offset, metadata, leader_epoch, commit_ts, expire_ts = commit_entry(version, value)
    else:
        key_blob = packb(key, use_bin_type=True)
        key = key if isinstance(key, dict) else {}
        group = key.get("group")
    if rtype == TRANSACTION_STATE:
        txn_id = key.get("transactional_id")
    elif rtype == TOPIC:
        topic = key.get("topic")
    if rtype != OFFSET_COMMIT and value is not None:
        blob = packb(value, use_bin_type=True)
        if rtype == TRANSACTION_MARKER and isinstance(value, dict):
            result = value.get("result")
    return (store, lp, name, sbase, pos, base, ts, attrs, pid, pepoch, base + delta, type_name,
            rtype, version, group, topic, partition, offset, leader_epoch, metadata, commit_ts,
            expire_ts, value is None, result, blob, txn_id, key_blob)


def segment_problems(task: SegmentTask) -> Iterator[tuple]:
    """Rows (``PROBLEM_COLUMNS`` order) for every region a salvage read of one segment drops,
    and for a torn tail at the end of the partition (which every read ignores)."""
    data, reader = _read(task, True)
    name = os.path.basename(task.path)
    for pos, stop, _ in reader.raw():
        try:
            decode_payload(data[pos + HEADER_SIZE:stop])
        except UNDECODABLE:
            yield (task.store, task.log_partition, name, pos, stop - pos,
                   "undecodable payload", "corrupt")
    for p in reader.problems:
        yield (task.store, task.log_partition, name, p.position, p.dropped or 0, p.reason,
               "corrupt")
    problem = _stop_problem(task, reader, len(data), True)
    if problem is not None:
        yield (task.store, task.log_partition, name) + problem
