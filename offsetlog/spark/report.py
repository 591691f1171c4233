"""Reports over one or many stores as Spark DataFrames (``offsetlog report --engine spark``).

Two tables:

``groups``, one row per (store, group):
    ``partitions`` (committed offsets it holds now), ``last_commit_timestamp`` (its latest
    commit record still in the log), ``commits`` and ``commits_per_minute`` (its commit records
    in the log, over the store's span: first to last commit timestamp of any group in the
    store, at least one minute), ``expiring_next_check`` (offsets the retention pass at
    ``now_ms + retention_check_interval_ms`` expires, by the coordinator's own KIP-211 rules,
    ``offsetlog.group.expiry``, with the group's state from its latest GROUP_METADATA record,
    or, for a KIP-848 consumer group, its members' subscriptions from its CONSUMER_GROUP_*
    records, rebuilt as a reopened store rebuilds them).

``log_partitions``, one row per (store, log partition):
    ``segments``, ``records``, ``dead_records`` (superseded by a later record of the same key,
    or written by an aborted transaction: what compaction reclaims eventually), ``tombstones``,
    their shares of ``records``, and ``reclaimable_now`` (what a cleaning at ``now_ms`` would
    drop). Both follow the cleaner (``offsetlog.compaction.cleaner``) rule for rule, through
    ``offsetlog.compaction.rules``: its keys (offsets, group metadata, and TRANSACTION_STATE
    records by transactional id), committed transactional records competing by log offset with
    plain ones, aborted ones dropped, undecided ones not yet counted; tombstones in plain
    batches and markers whose transaction left no record dropped at their delete horizon,
    except at or above the partition's snapshot offset; a cleaning stopping before the first
    transaction still undecided in the closed segments.

Shape: a group lives on one log partition and keys never cross log partitions, so one Spark
task per (store, log partition) reads its segments with the data source's reader
(``offsetlog.spark.segments``, recovery's policy) and computes every number of that partition
and of its groups in one pass (a second pass over the closed segments only when a transaction
is undecided there, as the cleaner scans again); only the per-store span is combined on the
driver. No shuffle.

Compaction and retention settings are not stored on disk: pass the ones the service uses.
The ``groups`` table counts transactional offsets as the log holds them (markers are not
interpreted there).
"""

from __future__ import annotations

import time
from typing import NamedTuple

from offsetlog.log.naming import snapshot_dir, with_limits
from offsetlog.log.records import CONSUMER_GROUP_TYPES, GROUP_METADATA, OFFSET_COMMIT
from offsetlog.spark.segments import RECORD_COLUMNS
from offsetlog.store.config import StoreConfig

_DEFAULTS = StoreConfig()
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
    #: the offset of the partition's snapshot: the cleaner keeps tombstones and markers from
    #: there on (docs/DESIGN.md, "Snapshots"); None without one
    keep_from: int | None = None


_COLUMN = {name: i for i, (name, _) in enumerate(RECORD_COLUMNS)}
#: the record types whose latest record the groups table reads
_GROUP_TYPES = frozenset({OFFSET_COMMIT, GROUP_METADATA, *CONSUMER_GROUP_TYPES})
_TYPE, _GROUP, _OFFSET, _EPOCH, _META, _COMMIT_TS, _EXPIRE_TS, _TOMBSTONE, _VALUE = (
    _COLUMN[c] for c in ("record_type_id", "group", "offset", "leader_epoch", "metadata",
                         "commit_timestamp", "expire_timestamp", "tombstone", "value_msgpack"))


def partition_report(task: _Task) -> dict:
    """Every number of one log partition and its groups (one Spark task)."""

    from offsetlog.recovery.swap import plan_swaps
    from offsetlog.spark.cleaning import CleaningCount, row_key
    from offsetlog.spark.segments import SegmentTask, segment_rows

    def rows(base, path, limit):
        return segment_rows(SegmentTask(task.store, task.log_partition, path, base, limit),
                            salvage=task.salvage)

    segments = plan_swaps(task.directory).segments
    active = segments[-1][0] if segments else None
    records = tombstones = 0
    latest: dict = {}  # key -> row of its latest record (offsets and groups: _GROUP_TYPES)
    whole = CleaningCount(task.now_ms)  # the whole log: what compaction reclaims eventually
    closed = CleaningCount(task.now_ms, task.keep_from)  # what a cleaning now reclaims
    commits: dict[str, int] = {}
    last_commit: dict[str, int] = {}
    first_ts = last_ts = None
    for base, path, limit in with_limits(segments):
        in_closed = base != active
        for row in rows(base, path, limit):
            records += 1
            whole.feed(row)
            if in_closed:
                closed.feed(row)
            rtype, tomb = row[_TYPE], row[_TOMBSTONE]
            tombstones += tomb
            if rtype == OFFSET_COMMIT:
                if not tomb:
                    g, ts = row[_GROUP], row[_COMMIT_TS]
                    commits[g] = commits.get(g, 0) + 1
                    if ts is not None:
                        if ts > last_commit.get(g, ts - 1):
                            last_commit[g] = ts
                        first_ts = ts if first_ts is None else min(first_ts, ts)
                        last_ts = ts if last_ts is None else max(last_ts, ts)
            if rtype in _GROUP_TYPES:
                latest[row_key(row)] = row
    dead = whole.result()[0]
    superseded, expired, undecided = closed.result()
    cleaned = [(b, p, lim) for b, p, lim in with_limits(segments) if b != active]
    while undecided is not None:
        # As the cleaner: clean only the segments wholly before the first undecided
        # transaction, and count again (a marker beyond the new end undecides more).
        cleaned = [(b, p, lim) for b, p, lim in cleaned if lim <= undecided]
        closed = CleaningCount(task.now_ms, task.keep_from)
        for base, path, limit in cleaned:
            for row in rows(base, path, limit):
                closed.feed(row)
        superseded, expired, undecided = closed.result()
    reclaimable = superseded + expired
    groups = [(task.store, task.log_partition, g, held, last_commit.get(g), commits.get(g, 0),
               expiring) for g, held, expiring in _groups(latest, task)]
    share = (lambda n: n / records) if records else (lambda n: 0.0)
    partition = (task.store, task.log_partition, len(segments), records, dead, share(dead),
                 tombstones, share(tombstones), reclaimable)
    return {"store": task.store, "first_ts": first_ts, "last_ts": last_ts, "groups": groups,
            "partition": partition}


def _groups(latest: dict, task: _Task) -> list[tuple[str, int, int]]:
    """(group, offsets held, offsets expiring at the next check) of every group of the log
    partition, from ``latest``: the row of each offset's, group metadata's and consumer-group
    record's latest record. A group is judged as the coordinator holds it: a KIP-848 consumer
    group by its members' subscriptions (``RetentionView.of_consumer_group``), else by its
    classic GROUP_METADATA (``RetentionView.of_value``; standalone without one)."""
    import msgpack

    from offsetlog.group.consumer.group import rebuild_groups
    from offsetlog.group.expiry import RetentionView, expired_offsets

    def value(row):
        blob = row[_VALUE]
        return None if blob is None else msgpack.unpackb(blob, raw=False)

    entries: dict[str, dict] = {}
    metadata: dict[str, dict | None] = {}
    state: dict[tuple, dict] = {}  # the consumer groups' records, as the table keeps them
    for key, row in latest.items():
        if key[0] == OFFSET_COMMIT:
            group_entries = entries.setdefault(key[1], {})
            if not row[_TOMBSTONE]:
                group_entries[(key[2], key[3])] = (row[_OFFSET], row[_META], row[_EPOCH],
                                                   row[_COMMIT_TS], row[_EXPIRE_TS])
        elif key[0] == GROUP_METADATA:
            metadata[key[1]] = value(row)
        elif not row[_TOMBSTONE]:
            state[key] = value(row)
    consumer = rebuild_groups(state)
    out = []
    for g in sorted(set(entries) | set(metadata) | set(consumer)):
        held = entries.get(g, {})
        view = (RetentionView.of_consumer_group(consumer[g].subscribed_topics())
                if g in consumer else RetentionView.of_value(metadata.get(g)))
        expiring = expired_offsets(view, held, task.check_ms, task.retention_ms) if held else []
        out.append((g, len(held), len(expiring)))
    return out


def _plan(path: str, now: int, retention_ms: int, retention_check_interval_ms: int,
          salvage: bool) -> list[_Task]:
    from offsetlog.recovery.snapshot import tombstone_floors
    from offsetlog.spark.segments import find_stores, store_partitions

    tasks = []
    for store in find_stores(path):
        floors = tombstone_floors(snapshot_dir(store))  # read-only, as `offsetlog verify`
        tasks += [_Task(store, p, d, now, now + retention_check_interval_ms, retention_ms,
                        salvage, floors.get(p)) for p, d in store_partitions(store)]
    return tasks


class ReportRows(NamedTuple):
    groups: list  # tuples in GROUP_SCHEMA's column order, sorted by store and group
    log_partitions: list  # tuples in PARTITION_SCHEMA's order, sorted by store and partition


def collect(spark, path: str, *, now_ms: int | None = None,
            retention_ms: int = _DEFAULTS.retention_ms,
            retention_check_interval_ms: int = _DEFAULTS.retention_check_interval_ms,
            salvage: bool = False) -> ReportRows:
    """The rows of :func:`report` in one Spark job (one task per log partition), combined on
    the driver. ``spark`` is a SparkSession or only a SparkContext.

    What ``offsetlog report`` prints, in one job where :func:`report` runs several and needs
    Spark SQL. The rows are per group and per partition, so they fit the driver even for a
    fleet; :func:`report` keeps them distributed instead.
    """
    now = int(time.time() * 1000) if now_ms is None else now_ms
    tasks = _plan(path, now, retention_ms, retention_check_interval_ms, salvage)
    sc = getattr(spark, "sparkContext", spark)  # a SparkSession or a SparkContext
    results = sc.parallelize(tasks, max(1, len(tasks))).map(partition_report).collect()
    spans: dict[str, tuple[int, int]] = {}
    for r in results:
        first, last = r["first_ts"], r["last_ts"]
        if first is not None:
            lo, hi = spans.get(r["store"], (first, last))
            spans[r["store"]] = (min(lo, first), max(hi, last))
    minutes = {s: max(hi - lo, MINUTE_MS) / MINUTE_MS for s, (lo, hi) in spans.items()}
    groups = [(store, lp, group, held, last, count, count / minutes.get(store, 1.0), expiring)
              for r in results
              for store, lp, group, held, last, count, expiring in r["groups"]]
    groups.sort(key=lambda g: (g[0], g[2]))
    partitions = sorted((r["partition"] for r in results), key=lambda p: (p[0], p[1]))
    return ReportRows(groups, partitions)


def report(spark, path: str, *, now_ms: int | None = None,
           retention_ms: int = _DEFAULTS.retention_ms,
           retention_check_interval_ms: int = _DEFAULTS.retention_check_interval_ms,
           salvage: bool = False) -> Report:
    """The ``groups`` and ``log_partitions`` DataFrames for every store at or below ``path``.

    :param now_ms: the report's time (default: now)
    :param salvage: skip corrupt regions instead of failing (see docs/SPARK.md)
    """
    now = int(time.time() * 1000) if now_ms is None else now_ms
    tasks = _plan(path, now, retention_ms, retention_check_interval_ms, salvage)
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
