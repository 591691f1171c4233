"""Reports over one or many stores as Spark DataFrames (``offsetlog report --engine spark``).

Two tables:

``groups``, one row per (store, group):
    ``partitions`` (committed offsets it holds now), ``last_commit_timestamp`` (the latest commit
    record of the group still in the log), ``commits`` and ``commits_per_minute`` (its commit
    records in the log over the store's span: first to last commit timestamp of any group,
    at least one minute), ``expiring_next_check`` (offsets the retention pass at
    ``now_ms + retention_check_interval_ms`` expires, by the coordinator's own KIP-211 rules in
    ``offsetlog.group.expiry``).

``log_partitions``, one row per (store, log partition):
    ``records``, ``segments``, ``dead_records`` (superseded by a later record of the same key:
    what compaction reclaims eventually), ``tombstones``, their shares of ``records``, and
    ``reclaimable_now`` (what a cleaning at ``now_ms`` would drop: records superseded within
    the closed segments, and tombstones whose delete horizon has passed, the cleaner's rules).

Compaction and retention settings are not stored on disk; pass the ones the service uses.
"""

from __future__ import annotations

import math
import time
from typing import NamedTuple

from offsetlog.config import StoreConfig
from offsetlog.records import GROUP_METADATA, OFFSET_COMMIT

_DEFAULTS = StoreConfig()
DELETE_HORIZON = 0x04  # offsetlog.format.Attribute.DELETE_HORIZON
MINUTE_MS = 60_000

GROUP_COLUMNS = ("store", "log_partition", "group", "partitions", "last_commit_timestamp",
                 "commits", "commits_per_minute", "expiring_next_check")
PARTITION_COLUMNS = ("store", "log_partition", "segments", "records", "dead_records",
                     "dead_share", "tombstones", "tombstone_share", "reclaimable_now")


class Report(NamedTuple):
    groups: object  # pyspark.sql.DataFrame
    log_partitions: object


def _expiring_fn(check_ms: int, retention_ms: int):
    """applyInPandas function: one group's live offsets + its metadata -> expiring count."""

    def count(pdf):
        import msgpack
        import pandas as pd

        from offsetlog.group.expiry import RetentionView, expired_offsets

        def val(x):
            return None if x is None or (isinstance(x, float) and math.isnan(x)) else int(x)

        first = pdf.iloc[0]
        blob = first["metadata_value"]
        view = RetentionView.of_value(None if blob is None or (isinstance(blob, float))
                                      else msgpack.unpackb(blob, raw=False))
        entries = {}
        for row in pdf.itertuples(index=False):
            if row.topic is None or (isinstance(row.topic, float)):
                continue  # the group has metadata but no offsets
            entries[(row.topic, int(row.partition))] = (
                int(row.offset), row.metadata, val(row.leader_epoch),
                int(row.commit_timestamp), val(row.expire_timestamp))
        n = len(expired_offsets(view, entries, check_ms, retention_ms)) if entries else 0
        return pd.DataFrame({"store": [first["store"]], "group": [first["group"]],
                             "expiring_next_check": [n]})
    return count


def report(spark, path: str, *, now_ms: int | None = None,
           retention_ms: int = _DEFAULTS.retention_ms,
           retention_check_interval_ms: int = _DEFAULTS.retention_check_interval_ms,
           salvage: bool = False, records=None) -> Report:
    """The ``groups`` and ``log_partitions`` DataFrames for every store at or below ``path``.

    :param records: an already loaded ``offsetlog`` DataFrame to report on instead of ``path``
    """
    from pyspark.sql import Window
    from pyspark.sql import functions as F

    from offsetlog.spark.source import register

    now = int(time.time() * 1000) if now_ms is None else now_ms
    if records is None:
        register(spark)
        records = (spark.read.format("offsetlog").option("salvage", str(salvage).lower())
                   .load(path))
    key = ["store", "log_partition", "record_type_id", "group", "topic", "partition"]
    keyed = F.col("record_type_id").isin(OFFSET_COMMIT, GROUP_METADATA)
    by_key = Window.partitionBy(*key)
    by_log = Window.partitionBy("store", "log_partition")
    r = (records
         .withColumn("active_base", F.max("segment_base").over(by_log))
         .withColumn("closed", F.col("segment_base") < F.col("active_base"))
         .withColumn("latest", F.max("log_offset").over(by_key))
         .withColumn("latest_closed", F.max(F.when(F.col("closed"), F.col("log_offset")))
                     .over(by_key))
         .cache())
    dead = keyed & (F.col("log_offset") < F.col("latest"))
    horizon_passed = (((F.col("attributes").bitwiseAND(DELETE_HORIZON)) != 0)
                      & (F.col("batch_timestamp") <= F.lit(now)))
    reclaimable = (keyed & F.col("closed")
                   & ((F.col("log_offset") < F.col("latest_closed"))
                      | (F.col("tombstone") & horizon_passed)))
    log_partitions = (r.groupBy("store", "log_partition").agg(
        F.countDistinct("segment").alias("segments"),
        F.count(F.lit(1)).alias("records"),
        F.sum(dead.cast("long")).alias("dead_records"),
        F.sum(F.col("tombstone").cast("long")).alias("tombstones"),
        F.sum(reclaimable.cast("long")).alias("reclaimable_now"))
        .withColumn("dead_share", F.col("dead_records") / F.col("records"))
        .withColumn("tombstone_share", F.col("tombstones") / F.col("records"))
        .select(*PARTITION_COLUMNS).orderBy("store", "log_partition"))

    commits = r.where((F.col("record_type_id") == OFFSET_COMMIT) & ~F.col("tombstone"))
    span = commits.groupBy("store").agg(
        F.greatest(F.max("commit_timestamp") - F.min("commit_timestamp"),
                   F.lit(MINUTE_MS)).alias("span_ms"))
    live = commits.where(F.col("log_offset") == F.col("latest")).select(
        "store", "group", "topic", "partition", "offset", "metadata", "leader_epoch",
        "commit_timestamp", "expire_timestamp")
    metadata = (r.where((F.col("record_type_id") == GROUP_METADATA)
                        & (F.col("log_offset") == F.col("latest")))
                .select("store", "group", F.col("value_msgpack").alias("metadata_value")))
    groups = (r.where(F.col("group").isNotNull() & keyed)
              .select("store", "log_partition", "group").distinct())
    expiring = (groups.select("store", "group")
                .join(live, ["store", "group"], "left")
                .join(metadata, ["store", "group"], "left")
                .groupBy("store", "group")
                .applyInPandas(_expiring_fn(now + retention_check_interval_ms, retention_ms),
                               "store string, `group` string, expiring_next_check long"))
    per_group = commits.groupBy("store", "group").agg(
        F.count(F.lit(1)).alias("commits"),
        F.max("commit_timestamp").alias("last_commit_timestamp"))
    held = live.groupBy("store", "group").agg(F.count(F.lit(1)).alias("partitions"))
    out = (groups.join(per_group, ["store", "group"], "left")
           .join(held, ["store", "group"], "left")
           .join(expiring, ["store", "group"], "left")
           .join(span, ["store"], "left")
           .fillna(0, subset=["commits", "partitions", "expiring_next_check"])
           .withColumn("commits_per_minute",
                       F.col("commits") / (F.coalesce(F.col("span_ms"), F.lit(MINUTE_MS))
                                           / MINUTE_MS))
           .select(*GROUP_COLUMNS).orderBy("store", "group"))
    return Report(out, log_partitions)
