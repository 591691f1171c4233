"""What the log cleaner would drop, counted from the data source's rows of one log partition.

The rules are ``compaction.cleaner``'s (docs/DESIGN.md, Kafka's LogCleaner), applied to
counts instead of bytes:

* keys are the cleaner's (``compaction.cleaner._key``): OFFSET_COMMIT by (group, topic,
  partition), GROUP_METADATA by group, TRANSACTION_STATE by transactional id; markers and
  unknown types have none and are never dropped as superseded;
* a keyed record is superseded when a later record of its key (by log offset) is in a plain
  batch or in a committed transaction; records of transactions still undecided do not count
  yet;
* every record of an aborted transaction is dropped;
* the latest record of a key, if a tombstone in a plain batch whose delete horizon has passed,
  is dropped (a transactional tombstone is kept like any surviving transactional record);
* a marker is dropped once no record of its transaction survives and its horizon has passed;
* nothing at or above a ``keep_from`` offset (the lowest snapshot offset) loses a tombstone or
  marker to its horizon.

A transaction is a producer id's batches up to its next control batch, as in the cleaner.
What is *cleaned* is the caller's choice of segments (the closed ones, cut before the first
undecided transaction as the cleaner cuts them: see ``report.partition_report``).
"""

from __future__ import annotations

from offsetlog.format import Attribute
from offsetlog.records import (COMMIT, GROUP_METADATA, OFFSET_COMMIT, TOPIC, TRANSACTION_MARKER,
                               TRANSACTION_STATE)
from offsetlog.spark.segments import RECORD_COLUMNS

_COLUMN = {name: i for i, (name, _) in enumerate(RECORD_COLUMNS)}
_SEGMENT, _BATCH_POS, _BATCH_BASE, _BATCH_TS, _ATTRS, _PID, _LOG_OFFSET, _TYPE = (
    _COLUMN[c] for c in ("segment", "batch_position", "batch_base_offset", "batch_timestamp",
                         "attributes", "producer_id", "log_offset", "record_type_id"))
_GROUP, _TOPIC, _PART, _TOMBSTONE, _RESULT, _TXN_ID = (
    _COLUMN[c] for c in ("group", "topic", "partition", "tombstone", "transaction_result",
                         "transactional_id"))


def row_key(row) -> tuple | None:
    """The cleaner's compaction key (``compaction.cleaner._key``) of a row, or None."""
    rtype = row[_TYPE]
    if rtype == OFFSET_COMMIT:
        return (OFFSET_COMMIT, row[_GROUP], row[_TOPIC], row[_PART])
    if rtype == GROUP_METADATA:
        return (GROUP_METADATA, row[_GROUP])
    if rtype == TRANSACTION_STATE:
        return (TRANSACTION_STATE, row[_TXN_ID])
    if rtype == TOPIC:
        return (TOPIC, row[_TOPIC])
    return None


class _Txn:
    __slots__ = ("first", "records", "writes", "committed", "marker_records",
                 "marker_expired")

    def __init__(self, first: int) -> None:
        self.first = first  # log offset of its first batch
        self.records = 0  # records in its transactional batches
        self.writes: list[tuple[tuple, int]] = []  # (key, log offset) of its keyed records
        self.committed: bool | None = None  # None: undecided
        self.marker_records = 0
        self.marker_expired = False  # its marker's horizon has passed (and it may go)


class CleaningCount:
    """Feed the rows of one log partition's range in log order (:meth:`feed`), then read
    :meth:`result`: (superseded, expired, first undecided offset or None).

    ``superseded`` counts records a later record of their key replaces, plus the records of
    aborted transactions; ``expired`` the tombstones and markers whose horizon passed at
    ``now_ms``. Their sum is what a cleaning of exactly this range at ``now_ms`` drops.
    """

    def __init__(self, now_ms: int, keep_from: int | None = None) -> None:
        self.now_ms, self.keep_from = now_ms, keep_from
        self.keyed = 0  # keyed records that compete for their key (plain or committed)
        self.aborted = 0
        #: key -> (log offset, droppable: a plain tombstone past its horizon) of its latest
        self.latest: dict[tuple, tuple[int, bool]] = {}
        self.open: dict[int, _Txn] = {}  # producer id -> its transaction not yet decided
        self.decided: list[_Txn] = []
        self._batch: list = []

    def feed(self, row) -> None:
        batch = self._batch
        if batch and (batch[0][_SEGMENT], batch[0][_BATCH_POS]) != (row[_SEGMENT],
                                                                     row[_BATCH_POS]):
            self._flush()  # the rows so far are a whole batch
        self._batch.append(row)

    def _horizon_passed(self, row) -> bool:
        return bool(row[_ATTRS] & Attribute.DELETE_HORIZON) and self.now_ms >= row[_BATCH_TS] \
            and (self.keep_from is None or row[_LOG_OFFSET] < self.keep_from)

    def _flush(self) -> None:
        rows, self._batch = self._batch, []
        if not rows:
            return
        first = rows[0]
        attrs = first[_ATTRS]
        if not attrs & Attribute.SEMANTIC:
            latest = self.latest
            for row in rows:
                key = row_key(row)
                if key is not None:
                    self.keyed += 1
                    latest[key] = (row[_LOG_OFFSET], row[_TOMBSTONE] and self._horizon_passed(row))
            return
        pid = first[_PID]
        txn = self.open.get(pid)
        if txn is None:
            txn = self.open[pid] = _Txn(first[_BATCH_BASE])
        if not attrs & Attribute.CONTROL:
            txn.records += len(rows)
            txn.writes += [(k, row[_LOG_OFFSET]) for row in rows
                           if (k := row_key(row)) is not None]
            return
        del self.open[pid]
        self.decided.append(txn)
        txn.committed = any(row[_TYPE] == TRANSACTION_MARKER and row[_RESULT] == COMMIT
                            for row in rows)
        txn.marker_records = len(rows)
        txn.marker_expired = self._horizon_passed(first)
        if not txn.committed:
            self.aborted += txn.records
            txn.writes = []
            return
        latest = self.latest
        for key, offset in txn.writes:
            self.keyed += 1
            if latest.get(key, (-1,))[0] < offset:  # a later plain record of the key wins
                latest[key] = (offset, False)

    def result(self) -> tuple[int, int, int | None]:
        self._flush()
        latest = self.latest
        superseded = self.keyed - len(latest) + self.aborted
        expired = sum(droppable for _, droppable in latest.values())
        for txn in self.decided:
            if txn.marker_expired and not any(latest[k][0] == offset for k, offset in txn.writes):
                expired += txn.marker_records
        first_undecided = min((t.first for t in self.open.values()), default=None)
        return superseded, expired, first_undecided
