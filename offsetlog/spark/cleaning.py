"""What the log cleaner would drop, counted from the data source's rows of one log partition.

The rules are ``offsetlog.compaction.rules``, the ones the cleaner applies; this module only
reads them off rows instead of batches. What is *cleaned* is the caller's choice of segments
(the closed ones, cut before the first undecided transaction as the cleaner cuts them: see
``report.partition_report``).
"""

from __future__ import annotations

import msgpack

from offsetlog.compaction.rules import LatestScan, Transaction, horizon_passed, record_key
from offsetlog.log.format import Attribute
from offsetlog.log.records import COMMIT, OFFSET_COMMIT, TRANSACTION_MARKER
from offsetlog.spark.segments import RECORD_COLUMNS

_COLUMN = {name: i for i, (name, _) in enumerate(RECORD_COLUMNS)}
_SEGMENT, _BATCH_POS, _BATCH_BASE, _BATCH_TS, _ATTRS, _PID, _LOG_OFFSET, _TYPE = (
    _COLUMN[c] for c in ("segment", "batch_position", "batch_base_offset", "batch_timestamp",
                         "attributes", "producer_id", "log_offset", "record_type_id"))
_VERSION, _GROUP, _TOPIC, _PART, _TOMBSTONE, _RESULT, _KEY = (
    _COLUMN[c] for c in ("record_version", "group", "topic", "partition", "tombstone",
                         "transaction_result", "key_msgpack"))


def row_key(row) -> tuple | None:
    """``rules.record_key`` of a row: an offset's from its columns (the bulk of the rows, read
    without unpacking), any other record's from its key's msgpack bytes."""
    rtype = row[_TYPE]
    if rtype == OFFSET_COMMIT:
        return (OFFSET_COMMIT, row[_GROUP], row[_TOPIC], row[_PART])
    blob = row[_KEY]
    if blob is None:
        return None
    return record_key((0, rtype, row[_VERSION], msgpack.unpackb(blob, raw=False), None))


class CleaningCount:
    """Feed the rows of one log partition's range in log order (:meth:`feed`), then read
    :meth:`result`: (superseded, expired, first undecided offset or None).

    ``superseded`` counts records a later record of their key replaces, plus the records of
    aborted transactions; ``expired`` the tombstones and markers whose horizon passed at
    ``now_ms``. Their sum is what a cleaning of exactly this range at ``now_ms`` drops.
    """

    def __init__(self, now_ms: int, keep_from: int | None = None) -> None:
        self.now_ms, self.keep_from = now_ms, keep_from
        self.scan = LatestScan()
        self.keyed = 0  # keyed records that compete for their key (plain or committed)
        #: key -> its latest record is a plain tombstone past its horizon
        self.droppable: dict[tuple, bool] = {}
        #: decided transaction -> (its marker's records, the marker's horizon has passed)
        self.markers: dict[int, tuple[Transaction, int, bool]] = {}
        self._batch: list = []

    def feed(self, row) -> None:
        batch = self._batch
        if batch and (batch[0][_SEGMENT], batch[0][_BATCH_POS]) != (row[_SEGMENT],
                                                                     row[_BATCH_POS]):
            self._flush()  # the rows so far are a whole batch
        self._batch.append(row)

    def _horizon_passed(self, row) -> bool:
        return horizon_passed(row[_ATTRS], row[_BATCH_TS], row[_LOG_OFFSET], self.now_ms,
                              self.keep_from)

    def _flush(self) -> None:
        rows, self._batch = self._batch, []
        if not rows:
            return
        first = rows[0]
        attrs, scan = first[_ATTRS], self.scan
        keyed = [(k, row) for row in rows if (k := row_key(row)) is not None]
        writes = [(k, row[_LOG_OFFSET]) for k, row in keyed]
        if not attrs & Attribute.SEMANTIC:
            scan.plain(writes)
            self.keyed += len(writes)
            for k, row in keyed:
                self.droppable[k] = bool(row[_TOMBSTONE]) and self._horizon_passed(row)
        elif attrs & Attribute.CONTROL:
            committed = any(row[_TYPE] == TRANSACTION_MARKER and row[_RESULT] == COMMIT
                            for row in rows)
            txn, won = scan.control(first[_PID], first[_BATCH_BASE], committed)
            if committed:
                self.keyed += len(txn.writes)
            for k in won:
                self.droppable[k] = False
            self.markers[id(txn)] = (txn, len(rows), self._horizon_passed(first))
        else:
            scan.transactional(first[_PID], first[_BATCH_BASE], writes, len(rows))

    def result(self) -> tuple[int, int, int | None]:
        self._flush()
        scan = self.scan
        aborted = sum(t.records for t in scan.decided if not t.committed)
        superseded = self.keyed - len(scan.latest) + aborted
        expired = sum(self.droppable[k] for k in scan.latest)
        for txn, marker_records, passed in self.markers.values():
            if passed and not scan.survivors(txn):
                expired += marker_records
        return superseded, expired, scan.first_unstable
