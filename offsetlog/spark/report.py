"""Reports over one or many stores as Spark DataFrames (``offsetlog report --engine spark``).

Two tables:

``groups``, one row per (store, group):
    ``partitions`` (committed offsets it holds now), ``last_commit_timestamp`` (its latest
    commit record still in the log), ``commits`` and ``commits_per_minute`` (its commit records
    in the log, over the store's span: first to last commit timestamp of any group in the
    store, at least one minute), ``expiring_next_check`` (offsets the retention pass at
    ``now_ms + retention_check_interval_ms`` expires, by the coordinator's own KIP-211 rules,
    ``offsetlog.group.expiry``, with the group's state from its latest GROUP_METADATA record).

``log_partitions``, one row per (store, log partition):
    ``segments``, ``records``, ``dead_records`` (superseded by a later record of the same key:
    what compaction reclaims eventually), ``tombstones``, their shares of ``records``, and
    ``reclaimable_now`` (what a cleaning at ``now_ms`` would drop, by the cleaner's rules:
    records superseded within the closed segments, and tombstones there whose delete horizon
    has passed).

Shape: a group lives on one log partition and keys never cross log partitions, so one Spark
task per (store, log partition) reads its segments with the data source's reader
(``offsetlog.spark.segments``, recovery's policy) and computes every number of that partition
and of its groups in one pass; only the per-store span is combined on the driver. No shuffle.

Compaction and retention settings are not stored on disk: pass the ones the service uses.
Transactional offsets are counted as the log holds them (markers are not interpreted here).
"""

from __future__ import annotations

import time
from typing import NamedTuple

from offsetlog.config import StoreConfig
from offsetlog.naming import with_limits
from offsetlog.format import Attribute
from offsetlog.records import GROUP_METADATA, OFFSET_COMMIT

_DEFAULTS = StoreConfig()
DELETE_HORIZON = Attribute.DELETE_HORIZON
MINUTE_MS = 60_000

GROUP_SCHEMA = ("store STRING, log_partition INT, `group` STRING, partitions BIGINT, "
                "last_commit_timestamp BIGINT, commits BIGINT, commits_per_minute DOUBLE, "
                "expiring_next_check BIGINT")
PARTITION_SCHEMA = ("store STRING, log_partition INT, segments BIGINT, records BIGINT, "
                    "dead_records BIGINT, dead_share DOUBLE, tombstones BIGINT, "
                    "tombstone_share DOUBLE, reclaimable_now BIGINT")


class Report(NamedTuple):
    groups: object  # pyspark.sql.DataFrame, columns GROUP_SCHEMA
    log_partitions: object  # pyspark.sql.DataFrame, columns PARTITION_SCHEMA


class _Task(NamedTuple):
    store: str
    log_partition: int
    directory: str
    now_ms: int
    check_ms: int
    retention_ms: int
    salvage: bool


# Row indexes of offsetlog.spark.segments.RECORD_COLUMNS
_SEGMENT, _SEG_BASE, _ATTRS, _BATCH_TS, _LOG_OFFSET, _TYPE = 2, 3, 7, 6, 10, 12
_GROUP, _TOPIC, _PART, _OFFSET, _EPOCH, _META, _COMMIT_TS, _EXPIRE_TS = range(14, 22)
_TOMBSTONE, _VALUE = 22, 24


def partition_report(task: _Task) -> dict:
    """Every number of one log partition and its groups (one Spark task)."""
    import msgpack

    from offsetlog.group.expiry import RetentionView, expired_offsets
    from offsetlog.spark.segments import SegmentTask, segment_rows
    from recovery.swap import plan_swaps

    segments = plan_swaps(task.directory).segments
    active = segments[-1][0] if segments else None
    records = tombstones = keyed = closed_keyed = 0
    latest: dict = {}  # key -> row of its latest record
    latest_closed: dict = {}  # key -> (is tombstone past its horizon) of its latest closed record
    commits: dict[str, int] = {}
    last_commit: dict[str, int] = {}
    first_ts = last_ts = None
    for base, path, limit in with_limits(segments):
        closed = base != active
        for row in segment_rows(SegmentTask(task.store, task.log_partition, path, base, limit),
                                salvage=task.salvage):
            records += 1
            rtype, tomb = row[_TYPE], row[_TOMBSTONE]
            tombstones += tomb
            if rtype == OFFSET_COMMIT:
                key = (OFFSET_COMMIT, row[_GROUP], row[_TOPIC], row[_PART])
                if not tomb:
                    g, ts = row[_GROUP], row[_COMMIT_TS]
                    commits[g] = commits.get(g, 0) + 1
                    if ts is not None:
                        if ts > last_commit.get(g, ts - 1):
                            last_commit[g] = ts
                        first_ts = ts if first_ts is None else min(first_ts, ts)
                        last_ts = ts if last_ts is None else max(last_ts, ts)
            elif rtype == GROUP_METADATA:
                key = (GROUP_METADATA, row[_GROUP])
            else:
                continue  # never compacted away
            keyed += 1
            latest[key] = row
            if closed:
                closed_keyed += 1
                latest_closed[key] = tomb and bool(row[_ATTRS] & DELETE_HORIZON) and \
                    row[_BATCH_TS] <= task.now_ms
    # every keyed record but the latest of its key is dead
    reclaimable = closed_keyed - len(latest_closed) + sum(latest_closed.values())
    entries: dict[str, dict] = {}
    metadata: dict[str, dict | None] = {}
    for key, row in latest.items():
        if key[0] == OFFSET_COMMIT:
            group_entries = entries.setdefault(key[1], {})
            if not row[_TOMBSTONE]:
                group_entries[(key[2], key[3])] = (row[_OFFSET], row[_META], row[_EPOCH],
                                                   row[_COMMIT_TS], row[_EXPIRE_TS])
        else:
            blob = row[_VALUE]
            metadata[key[1]] = None if blob is None else msgpack.unpackb(blob, raw=False)
    groups = []
    for g in sorted(set(entries) | set(metadata)):
        held = entries.get(g, {})
        expiring = expired_offsets(RetentionView.of_value(metadata.get(g)), held,
                                   task.check_ms, task.retention_ms) if held else []
        groups.append((task.store, task.log_partition, g, len(held), last_commit.get(g),
                       commits.get(g, 0), len(expiring)))
    share = (lambda n: n / records) if records else (lambda n: 0.0)
    dead = keyed - len(latest)
    partition = (task.store, task.log_partition, len(segments), records, dead, share(dead),
                 tombstones, share(tombstones), reclaimable)
    return {"store": task.store, "first_ts": first_ts, "last_ts": last_ts, "groups": groups,
            "partition": partition}


def report(spark, path: str, *, now_ms: int | None = None,
           retention_ms: int = _DEFAULTS.retention_ms,
           retention_check_interval_ms: int = _DEFAULTS.retention_check_interval_ms,
           salvage: bool = False) -> Report:
    """The ``groups`` and ``log_partitions`` DataFrames for every store at or below ``path``.

    :param now_ms: the report's time (default: now)
    :param salvage: skip corrupt regions instead of failing (see docs/SPARK.md)
    """
    from offsetlog.spark.segments import find_stores, store_partitions

    now = int(time.time() * 1000) if now_ms is None else now_ms
    tasks = [_Task(store, p, d, now, now + retention_check_interval_ms, retention_ms, salvage)
             for store in find_stores(path) for p, d in store_partitions(store)]
    sc = spark.sparkContext
    results = sc.parallelize(tasks, max(1, len(tasks))).map(partition_report).cache()
    spans: dict[str, tuple[int, int]] = {}
    for store, first, last in results.map(lambda r: (r["store"], r["first_ts"],
                                                     r["last_ts"])).collect():
        if first is not None:
            lo, hi = spans.get(store, (first, last))
            spans[store] = (min(lo, first), max(hi, last))
    minutes = {s: max(hi - lo, MINUTE_MS) / MINUTE_MS for s, (lo, hi) in spans.items()}

    def group_row(g):
        store, lp, group, held, last, count, expiring = g
        return (store, lp, group, held, last, count, count / minutes.get(store, 1.0), expiring)

    groups = spark.createDataFrame(
        results.flatMap(lambda r: r["groups"]).map(group_row), GROUP_SCHEMA)
    partitions = spark.createDataFrame(results.map(lambda r: r["partition"]), PARTITION_SCHEMA)
    return Report(groups.orderBy("store", "group"),
                  partitions.orderBy("store", "log_partition"))
