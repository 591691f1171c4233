"""The Spark commands: ``report`` and ``compact --engine spark``.

One SparkSession per command, started once (``offsetlog.spark.session.local_session``: web UI
off, a few shuffle partitions, loopback, quiet logs) and stopped at the end; a session already
running in this process (a notebook's, a test's) is used as it is and left running. On a
terminal, starting the session shows a spinner and every Spark job a progress bar of its tasks.
"""

from __future__ import annotations

import argparse
import contextlib
import os
import threading
from collections.abc import Iterator
from types import SimpleNamespace
from typing import Any

from offsetlog.cli.output import Output, ts
from offsetlog.errors import OffsetlogError

#: seconds between two looks at Spark's status tracker
POLL_S = 0.2


@contextlib.contextmanager
def spark_session(args: argparse.Namespace, out: Output, *, sql: bool = True) -> Iterator[Any]:
    """The command's SparkSession, or with ``sql=False`` only a SparkContext (RDD jobs need
    no Spark SQL, whose start costs seconds)."""
    from pyspark.sql import SparkSession

    from offsetlog.spark.session import local_context, local_session, stop
    running = SparkSession.getActiveSession()
    if running is not None:
        yield running
        return
    start = local_session if sql else local_context
    with out.progress(None, "starting Spark"):
        spark = start(args.master or "local[*]", app_name=f"offsetlog {args.command}")
    try:
        yield spark
    finally:
        stop(spark)


@contextlib.contextmanager
def job_progress(out: Output, spark: Any, label: str) -> Iterator[None]:
    """A bar of the tasks of the running Spark jobs (from the status tracker), on a terminal."""
    if not out.err_terminal:
        yield
        return
    from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, \
        TimeElapsedColumn

    tracker = getattr(spark, "sparkContext", spark).statusTracker()
    stop = threading.Event()
    bar = Progress(TextColumn("{task.description}"), BarColumn(), MofNCompleteColumn(),
                   TimeElapsedColumn(), console=out.err_console, transient=True)
    task = bar.add_task(label, total=None)

    def poll() -> None:
        while not stop.wait(POLL_S):
            total = done = 0
            try:
                for stage in tracker.getActiveStageIds():
                    info = tracker.getStageInfo(stage)
                    if info is not None:
                        total += info.numTasks
                        done += info.numCompletedTasks
            except Exception:  # noqa: BLE001 - the session is stopping: stop looking
                return
            if total:
                bar.update(task, total=total, completed=done)

    with bar:
        thread = threading.Thread(target=poll, name="offsetlog-spark-progress", daemon=True)
        thread.start()
        try:
            yield
        finally:
            stop.set()
            thread.join()


def _job_failed(e: BaseException) -> OffsetlogError:
    from offsetlog.compaction.spark import _root_cause
    return OffsetlogError(f"the Spark job failed: {_root_cause(e)}")


# -- compact --engine spark ---------------------------------------------------------------

def spark_compact(args: argparse.Namespace, out: Output) -> list:
    """The distributed job over one store or a directory of stores (compaction/spark.py)."""
    from offsetlog.compaction.spark import compact
    from offsetlog.spark.segments import find_stores

    find_stores(args.dir)  # refuses a directory without a store before Spark starts
    with spark_session(args, out) as spark, job_progress(out, spark, "compacting"):
        rows = compact(spark, args.dir)
    stores = {r["store"] for r in rows}
    results = []
    for r in rows:
        if r["cleaned"]:
            r = dict(r, partition=r["partition"] if len(stores) < 2
                     else f"{os.path.relpath(r['store'], args.dir)}:{r['partition']}")
            results.append(SimpleNamespace(**r))
    return results


# -- report -------------------------------------------------------------------------------

GROUP_FIELDS = ("store", "log_partition", "group", "partitions", "last_commit_timestamp",
                "commits", "commits_per_minute", "expiring_next_check")
PARTITION_FIELDS = ("store", "log_partition", "segments", "records", "dead_records",
                    "dead_share", "tombstones", "tombstone_share", "reclaimable_now")


def cmd_report(args: argparse.Namespace, out: Output) -> int:
    from pyspark.errors import PySparkException

    from offsetlog.spark.report import GROUP_SCHEMA, PARTITION_SCHEMA, collect
    from offsetlog.spark.segments import find_stores

    find_stores(args.dir)  # refuses a directory without a store before Spark starts
    with spark_session(args, out, sql=bool(args.out)) as spark:
        try:
            with job_progress(out, spark, "reading the logs"):
                rows = collect(spark, args.dir, retention_ms=args.retention_ms,
                               retention_check_interval_ms=args.retention_check_interval_ms,
                               salvage=args.salvage)
            if args.out:
                with job_progress(out, spark, "writing Parquet"):
                    for name, data, schema in (("groups", rows.groups, GROUP_SCHEMA),
                                               ("log_partitions", rows.log_partitions,
                                                PARTITION_SCHEMA)):
                        spark.createDataFrame(data, schema).coalesce(1).write.mode(
                            "overwrite").parquet(os.path.join(args.out, name))
        except PySparkException as e:
            raise _job_failed(e) from e
    groups = [dict(zip(GROUP_FIELDS, g)) for g in rows.groups]
    partitions = [dict(zip(PARTITION_FIELDS, p)) for p in rows.log_partitions]
    if out.json:
        out.emit_json({"groups": groups, "log_partitions": partitions})
        return 0
    many = len({r["store"] for r in partitions}) > 1

    def where(r: dict) -> list[str]:
        return [os.path.relpath(r["store"], args.dir)] if many else []

    columns = (["STORE"] if many else []) + ["GROUP", "LOG-PARTITION", "PARTITIONS",
                                             "LAST-COMMIT", "COMMITS", "COMMITS/MIN",
                                             "EXPIRING-NEXT-CHECK"]
    out.table(columns, [where(r) + [r["group"], str(r["log_partition"]), str(r["partitions"]),
                                    ts(r["last_commit_timestamp"]), str(r["commits"]),
                                    f"{r['commits_per_minute']:.2f}",
                                    str(r["expiring_next_check"])]
                        for r in groups[:args.limit]],
              title=f"groups in {args.dir}",
              right=("LOG-PARTITION", "PARTITIONS", "COMMITS", "COMMITS/MIN",
                     "EXPIRING-NEXT-CHECK"))
    if len(groups) > args.limit:
        out.line(f"... {len(groups) - args.limit} more groups (all of them in --out or --json)")
    out.line()
    columns = (["STORE"] if many else []) + ["LOG-PARTITION", "SEGMENTS", "RECORDS", "DEAD",
                                             "TOMBSTONES", "RECLAIMABLE-NOW"]
    out.table(columns, [where(r) + [str(r["log_partition"]), str(r["segments"]),
                                    str(r["records"]),
                                    f"{r['dead_records']} ({r['dead_share']:.1%})",
                                    f"{r['tombstones']} ({r['tombstone_share']:.1%})",
                                    str(r["reclaimable_now"])] for r in partitions],
              title=f"log partitions in {args.dir}", right=columns[1 if many else 0:])
    if args.out:
        out.line(f"written as Parquet: {os.path.join(args.out, 'groups')}, "
                 f"{os.path.join(args.out, 'log_partitions')}")
    return 0
