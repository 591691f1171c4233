"""The ``offsetlog`` command: bench, dump, describe, verify, compact, recover, crashtest,
snapshot, report.

The read-only commands (dump, describe, verify) never take the store's lock and never repair
anything, so they are safe to point at a store a service has open.
"""

from __future__ import annotations

import argparse
import contextlib
import datetime as dt
import json
import os
import sys

from rich.console import Console
from rich.progress import BarColumn, DownloadColumn, Progress, TimeRemainingColumn
from rich.table import Table

from offsetlog.errors import OffsetlogError
from offsetlog.log.records import describe as describe_record
from offsetlog.partitioner import partition_for
from offsetlog.recovery.tools import inspect

DEFAULT_BENCH_DIR = os.path.join("data", "bench")


def _progress(console: Console, total: int, label: str, *, count: str | None = None):
    """A progress bar (shown on a terminal only) and ``advance(n)`` for it; ``count`` is the
    column between the bar and the time left (bytes when None)."""
    progress = Progress("[progress.description]{task.description}", BarColumn(),
                        DownloadColumn() if count is None else count, TimeRemainingColumn(),
                        console=console, transient=True, disable=not console.is_terminal)
    task = progress.add_task(label, total=total)
    return progress, (lambda n: progress.advance(task, n))


def _ts(ms: int | None) -> str:
    if ms is None:
        return "-"
    return dt.datetime.fromtimestamp(ms / 1000, dt.timezone.utc).strftime("%Y-%m-%dT%H:%M:%S.%fZ")[:-4] + "Z"


def cmd_verify(args, console: Console) -> int:
    total = inspect.total_segment_bytes(args.dir)
    progress, advance = _progress(console, total, "verifying")
    with progress:
        # replayed as open replays: "ok" means open would load every record
        report, _ = inspect.scan(args.dir, salvage=True, replay=True, progress=advance)
    table = Table(title=f"verify {args.dir}")
    for col in ("PARTITION", "SEGMENTS", "BATCHES", "RECORDS", "BYTES", "NEXT-OFFSET", "STATUS"):
        table.add_column(col, justify="right" if col != "STATUS" else "left")
    corrupt = 0
    for p, r in sorted(report.partitions.items()):
        status = "ok"
        if r.skipped:
            corrupt += len(r.skipped)
            status = f"[red]CORRUPT ({len(r.skipped)} regions)[/red]"
        elif r.truncated:
            status = "[yellow]torn tail (truncated on next open)[/yellow]"
        table.add_row(str(p), str(len(r.segments)), str(r.batches), str(r.records),
                      str(r.bytes_read), str(r.next_offset), status)
    console.print(table)
    for t in report.truncations:
        console.print(f"torn tail: {t}")
    for s in report.skipped:
        console.print(f"[red]corruption:[/red] {s}")
    console.print(f"{report.records} records in {report.batches} batches, "
                  f"{report.bytes_read} bytes: " + ("[red]CORRUPT[/red]" if corrupt else "ok"))
    _verify_snapshots(args.dir, {p: r.next_offset for p, r in report.partitions.items()},
                      console)
    return 1 if corrupt else 0


def _verify_snapshots(path: str, log_ends: dict[int, int], console: Console) -> None:
    """The snapshot part of verify: a bad snapshot is a warning, not a failure (it is a cache:
    open discards it and replays the log)."""
    with console.status("checking snapshots"):
        checks = inspect.check_snapshots(path, log_ends)
    if not checks:
        console.print("snapshots: none stored")
        return
    table = Table(title=f"snapshots {path}")
    for col in ("PARTITION", "OFFSET", "KEYS", "BYTES", "CREATED", "STATUS"):
        table.add_column(col, justify="left" if col in ("CREATED", "STATUS") else "right")
    for c in checks:
        status = "ok" if c.problem is None else (
            f"[yellow]WARNING: {c.problem} (discarded on next open)[/yellow]")
        table.add_row(str(c.partition) if c.partition >= 0 else "-",
                      "-" if c.offset is None else str(c.offset),
                      "-" if c.keys is None else str(c.keys), str(c.bytes), _ts(c.created_ms),
                      status)
    console.print(table)
    bad = sum(c.problem is not None for c in checks)
    if bad:
        console.print(f"[yellow]snapshots: {bad} of {len(checks)} would be discarded[/yellow] "
                      "(a warning: snapshots are a cache, the log is replayed instead)")
    else:
        console.print(f"snapshots: {len(checks)} ok")


def cmd_dump(args, console: Console) -> int:
    out = sys.stdout
    skipped: list = []
    records = inspect.iter_records(args.dir, partition=args.partition, skipped=skipped)
    for p, seg, batch, offset, record in records:
        d = describe_record(record)
        if args.json:
            out.write(json.dumps({"partition": p, "segment": os.path.basename(seg),
                                  "offset": offset, "batch_offset": batch.base_offset,
                                  "batch_position": batch.position,
                                  "timestamp": batch.timestamp, **d}, default=repr) + "\n")
            continue
        key = ",".join(f"{k}={v}" for k, v in d["key"].items())
        if d["value"] is None:
            payload = "<DELETE>"
        else:
            payload = ",".join(f"{k}={v}" for k, v in d["value"].items())
        out.write(f"partition: {p} offset: {offset} position: {batch.position} "
                  f"timestamp: {batch.timestamp} type: {d['type']} v{d['version']} "
                  f"key: {key} payload: {payload}\n")
    # What could not be read is said, never left out silently; corruption fails the command
    # as it fails verify (a torn tail alone does not: the next open truncates it).
    corrupt = 0
    for r in skipped:
        corrupt += not r.reason.endswith("(torn tail)")
        print(f"offsetlog: not dumped: {r}", file=sys.stderr)
    return 1 if corrupt else 0


def cmd_describe(args, console: Console) -> int:
    partitions = inspect.stored_partitions(args.dir)
    report, tables = inspect.scan(args.dir, salvage=False, tables=True)
    rows = []
    for p, t in tables.items():
        if args.group is not None and p != partition_for(args.group, partitions):
            continue
        for (group, topic, partition), e in t.items():
            if args.group is None or group == args.group:
                rows.append((group, topic, partition, e))
    rows.sort(key=lambda r: r[:3])
    table = Table(title=f"{args.dir}" + (f" group {args.group}" if args.group else ""))
    for col in ("GROUP", "TOPIC", "PARTITION", "CURRENT-OFFSET", "LEADER-EPOCH", "METADATA",
                "COMMITTED-AT"):
        table.add_column(col, justify="right" if col in ("PARTITION", "CURRENT-OFFSET") else "left")
    for group, topic, partition, e in rows:
        table.add_row(group, topic, str(partition), str(e[0]),
                      "-" if e[2] is None else str(e[2]), e[1] or "-", _ts(e[3]))
    console.print(table)
    if args.group is not None and not rows:
        console.print(f"group {args.group!r} has no committed offsets")
        return 1
    return 0


@contextlib.contextmanager
def _spark_session(args):
    """A session for one command, stopped after it; a session already running in this
    process (a notebook's, a test's) is used as it is and left running."""
    from pyspark.sql import SparkSession

    from offsetlog.spark.session import local_session, stop
    running = SparkSession.getActiveSession()
    if running is not None:
        yield running
        return
    spark = local_session(args.master or "local[*]", app_name=f"offsetlog {args.command}")
    try:
        yield spark
    finally:
        stop(spark)


def _spark_compact(args, console: Console) -> list:
    """The distributed job over one store or a directory of stores (compaction/spark.py)."""
    from types import SimpleNamespace

    from offsetlog.compaction.spark import compact as spark_compact
    with _spark_session(args) as spark:
        rows = spark_compact(spark, args.dir)
    stores = {r["store"] for r in rows}
    results = []
    for r in rows:
        if r["cleaned"]:
            r = dict(r, partition=r["partition"] if len(stores) < 2
                     else f"{os.path.relpath(r['store'], args.dir)}:{r['partition']}")
            results.append(SimpleNamespace(**r))
    return results


def cmd_compact(args, console: Console) -> int:
    if args.engine == "spark":
        results = _spark_compact(args, console)
    else:
        from offsetlog.store import OffsetStore  # takes the store's lock: refuses an open store
        with OffsetStore.open(args.dir, cleaner_backoff_ms=0,
                              retention_check_interval_ms=0) as store:
            results = store.compact()
    table = Table(title=f"compact {args.dir}")
    for col in ("PARTITION", "SEGMENTS", "BYTES", "RECORDS", "TOMBSTONES-DROPPED", "SECONDS"):
        table.add_column(col, justify="right")
    for r in results:
        table.add_row(str(r.partition), f"{r.segments_before} -> {r.segments_after}",
                      f"{r.bytes_before} -> {r.bytes_after}",
                      f"{r.records_before} -> {r.records_after}", str(r.tombstones_dropped),
                      f"{r.duration_s:.3f}")
    console.print(table)
    before = sum(r.bytes_before for r in results)
    after = sum(r.bytes_after for r in results)
    if not results:
        console.print("nothing to clean: no partition has a closed segment")
    else:
        console.print(f"closed segments: {before} -> {after} bytes "
                      f"({after / before if before else 1:.1%} kept)")
    return 0


def cmd_recover(args, console: Console) -> int:
    """Recover a closed store now (takes its lock). Without --salvage this is exactly what
    ``OffsetStore.open`` does; with it, corrupt regions are cut out of their segments."""
    from offsetlog.recovery.tools import salvage  # noqa: PLC0415 - only this command needs it
    report = salvage.recover_store(args.dir, salvage=args.salvage)
    table = Table(title=f"recover {args.dir}" + (" --salvage" if args.salvage else ""))
    for col in ("FILE", "POSITION", "BYTES", "REASON", "OFFSETS-LOST", "ACTION"):
        table.add_column(col, justify="right" if col in ("POSITION", "BYTES") else "left")
    for r in report.regions:
        lost = "-" if r.offsets_lost is None else f"{r.offsets_lost[0]}..{r.offsets_lost[1]}"
        table.add_row(os.path.relpath(r.path, args.dir), str(r.position), str(r.bytes_dropped),
                      r.reason, lost, r.action)
    if report.regions:
        console.print(table)
    for path in report.rewritten:
        console.print(f"rewrote {os.path.relpath(path, args.dir)} without its corrupt regions")
    if report.snapshots_removed:
        console.print(f"removed {report.snapshots_removed}: snapshots of a salvaged log are stale")
    console.print(f"{report.records} records in {report.batches} batches kept; "
                  f"{report.bytes_dropped} bytes dropped in {len(report.regions)} regions "
                  f"({len(report.rewritten)} segments rewritten)")
    return 0


def _option_value(text: str):
    try:
        return json.loads(text)
    except ValueError:
        return text  # a bare string: fsync=always


def cmd_crashtest(args, console: Console) -> int:
    import logging  # noqa: PLC0415

    from offsetlog.recovery.crashtest.harness import config_from_options  # noqa: PLC0415
    options = {}
    for item in args.option:
        key, sep, value = item.partition("=")
        if not sep:
            console.print(f"offsetlog: --option wants key=value, not {item!r}")
            return 2
        options[key.replace("-", "_")] = _option_value(value)
    try:
        config = config_from_options(
            cycles=args.cycles, threads=args.threads, groups=args.groups,
            partitions=args.partitions, async_fraction=args.async_fraction,
            tear_tail=args.tear_tail, power_loss=args.power_loss, compaction=args.compaction,
            step_kills=not args.no_step_kills, snapshots=args.snapshots,
            segment_bytes=args.segment_bytes, store_options=options, seed=args.seed)
    except (TypeError, ValueError) as e:
        console.print(f"offsetlog: {e}")
        return 2
    # Recovery logs every torn tail it repairs; here that is the expected outcome. The level
    # is put back afterwards: the command may run inside a caller's process (tests do).
    engine_log = logging.getLogger("offsetlog")
    level_before = engine_log.level
    engine_log.setLevel(logging.ERROR)
    try:
        return _run_crashtest(args, console, config)
    finally:
        engine_log.setLevel(level_before)


def _run_crashtest(args, console: Console, config) -> int:
    from offsetlog.recovery.crashtest.harness import run_crashtest  # noqa: PLC0415
    progress, advance = _progress(console, config.cycles, "crash cycles",
                                  count="{task.completed}/{task.total}")
    try:
        with progress:
            result = run_crashtest(args.dir, config, workload=args.workload,
                                   progress=lambda k, r: advance(1))
    except ValueError as e:  # a directory that is not empty, a malformed workload name
        console.print(f"offsetlog: {e}")
        return 2
    table = Table(title=f"crashtest {args.dir} (seed {result.seed})")
    table.add_column("WHAT")
    table.add_column("COUNT", justify="right")
    rows = [("cycles", result.cycles), ("seconds", f"{result.duration_s:.1f}"),
            ("commits acknowledged", result.acknowledged),
            ("calls applied (built-in workload)", result.applied),
            ("killed during start-up/recovery", result.killed_during_startup)]
    rows += [(f"killed at swap step {s}", n) for s, n in sorted(result.killed_at_step.items())]
    rows += [("tails torn by the harness", result.tails_torn), ("bytes cut", result.bytes_cut),
             ("torn tails repaired by recovery", result.torn_tails_repaired),
             ("violations", len(result.violations))]
    for what, n in rows:
        table.add_row(what, str(n))
    console.print(table)
    for v in result.violations:
        console.print(f"[red]VIOLATION[/red] {v}", markup=True, highlight=False)
    console.print(f"{result.cycles} cycles, {result.acknowledged} commits acknowledged, "
                  f"{len(result.violations)} violations"
                  + ("" if result.ok else f" (replay with --seed {result.seed})"))
    return 0 if result.ok else 1


def cmd_snapshot(args, console: Console) -> int:
    from offsetlog.errors import SnapshotError
    from offsetlog.store import OffsetStore  # takes the store's lock: refuses an open store
    with console.status("opening the store (replaying what the snapshots do not cover)"):
        store = OffsetStore.open(args.dir, cleaner_backoff_ms=0, retention_check_interval_ms=0,
                                 snapshot_interval_records=0, snapshot_interval_ms=0,
                                 snapshot_on_close=False)
    rows, failed = [], 0
    with store:
        progress, advance = _progress(console, store.partitions, "snapshotting",
                                      count="{task.completed}/{task.total}")
        with progress:
            for p in range(store.partitions):
                try:
                    for r in store.snapshot([p]):
                        rows.append((p, str(r.offset), str(r.keys) if r.taken else "-",
                                     str(r.bytes) if r.taken else "-",
                                     f"{r.duration_s:.3f}" if r.taken else "-",
                                     "written" if r.taken else "up to date"))
                except SnapshotError as e:
                    failed += 1
                    rows.append((p, "-", "-", "-", "-", f"[red]FAILED: {e.failures.get(p, e)}[/red]"))
                advance(1)
    table = Table(title=f"snapshot {args.dir}")
    for col in ("PARTITION", "OFFSET", "KEYS", "BYTES", "SECONDS", "STATUS"):
        table.add_column(col, justify="left" if col == "STATUS" else "right")
    for p, *cells in rows:
        table.add_row(str(p), *cells)
    console.print(table)
    console.print(f"{len(rows) - failed} partitions snapshotted or up to date, {failed} failed"
                  if rows else "nothing to snapshot: every log partition is empty")
    return 1 if failed else 0


def cmd_report(args, console: Console) -> int:
    from pyspark.errors import PySparkException

    from offsetlog.spark.report import report
    with _spark_session(args) as spark:
        try:
            rep = report(spark, args.dir, retention_ms=args.retention_ms,
                         retention_check_interval_ms=args.retention_check_interval_ms,
                         salvage=args.salvage)
            groups = rep.groups.collect()
            partitions = rep.log_partitions.collect()
            if args.out:
                rep.groups.write.mode("overwrite").parquet(os.path.join(args.out, "groups"))
                rep.log_partitions.write.mode("overwrite").parquet(
                    os.path.join(args.out, "log_partitions"))
        except PySparkException as e:
            from offsetlog.compaction.spark import _root_cause
            console.print(f"offsetlog: the Spark job failed: {_root_cause(e)}", markup=False)
            return 1
    many = len({r["store"] for r in partitions}) > 1

    def where(r) -> list[str]:
        return [os.path.relpath(r["store"], args.dir)] if many else []

    table = Table(title=f"groups in {args.dir}")
    for col in (["STORE"] if many else []) + ["GROUP", "LOG-PARTITION", "PARTITIONS",
                                              "LAST-COMMIT", "COMMITS", "COMMITS/MIN",
                                              "EXPIRING-NEXT-CHECK"]:
        table.add_column(col, justify="left" if col in ("STORE", "GROUP", "LAST-COMMIT")
                         else "right")
    for r in groups[:args.limit]:
        table.add_row(*where(r), r["group"], str(r["log_partition"]), str(r["partitions"]),
                      _ts(r["last_commit_timestamp"]), str(r["commits"]),
                      f"{r['commits_per_minute']:.2f}", str(r["expiring_next_check"]))
    console.print(table)
    if len(groups) > args.limit:
        console.print(f"... {len(groups) - args.limit} more groups (all of them in --out)")
    table = Table(title=f"log partitions in {args.dir}")
    for col in (["STORE"] if many else []) + ["LOG-PARTITION", "SEGMENTS", "RECORDS", "DEAD",
                                              "TOMBSTONES", "RECLAIMABLE-NOW"]:
        table.add_column(col, justify="left" if col == "STORE" else "right")
    for r in partitions:
        table.add_row(*where(r), str(r["log_partition"]), str(r["segments"]),
                      str(r["records"]), f"{r['dead_records']} ({r['dead_share']:.1%})",
                      f"{r['tombstones']} ({r['tombstone_share']:.1%})",
                      str(r["reclaimable_now"]))
    console.print(table)
    if args.out:
        console.print(f"written as Parquet: {os.path.join(args.out, 'groups')}, "
                      f"{os.path.join(args.out, 'log_partitions')}")
    return 0


def cmd_bench(args, console: Console) -> int:
    from offsetlog.bench.runner import main as bench_main  # noqa: PLC0415 - heavy, and rarely run
    return bench_main(args.bench_args)


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="offsetlog", description=__doc__.split("\n")[0])
    sub = parser.add_subparsers(dest="command", required=True)
    p = sub.add_parser("bench", help="run the comparative benchmarks and print the table",
                       add_help=False)
    p.add_argument("bench_args", nargs=argparse.REMAINDER,
                   help="options for the runner (see offsetlog bench --help)")
    p.set_defaults(func=cmd_bench)
    p = sub.add_parser("dump", help="print every record (like kafka-dump-log --offsets-decoder)")
    p.add_argument("dir")
    p.add_argument("--partition", type=int, help="only this log partition")
    p.add_argument("--json", action="store_true", help="one JSON object per line")
    p.set_defaults(func=cmd_dump)
    p = sub.add_parser("describe", help="committed offsets per group "
                                        "(like kafka-consumer-groups --describe)")
    p.add_argument("dir")
    p.add_argument("--group", help="only this group")
    p.set_defaults(func=cmd_describe)
    p = sub.add_parser("compact", help="clean every log partition's closed segments now "
                                       "(takes the store's lock)")
    p.add_argument("dir", help="a store, or with --engine spark a directory of stores")
    p.add_argument("--engine", choices=("local", "spark"), default="local",
                   help="spark: one Spark task per log partition (docs/SPARK.md)")
    p.add_argument("--master", help="Spark master URL (default local[*])")
    p.set_defaults(func=cmd_compact)
    p = sub.add_parser("recover", help="recover a closed store now: finish swaps, truncate a "
                                       "torn tail; --salvage cuts out corrupt regions")
    p.add_argument("dir")
    p.add_argument("--salvage", action="store_true",
                   help="rewrite segments without their corrupt regions (offsets kept), "
                        "reporting every dropped byte range")
    p.set_defaults(func=cmd_recover)
    p = sub.add_parser("crashtest", help="SIGKILL a committing child again and again and check "
                                         "every invariant after each reopen (docs/CRASHTEST.md)")
    p.add_argument("dir", help="a new or empty directory to work in")
    p.add_argument("--cycles", type=int, default=20)
    p.add_argument("--threads", type=int)
    p.add_argument("--groups", type=int)
    p.add_argument("--partitions", type=int, help="log partitions of the store it creates")
    p.add_argument("--async-fraction", type=float, help="share of commit_async calls")
    p.add_argument("--seed", type=int, help="replay a run")
    p.add_argument("--tear-tail", type=float, nargs="?", const=0.5,
                   help="chance per cycle of tearing an active segment at an unsynced byte "
                        "(0.5 if no value)")
    p.add_argument("--power-loss", action="store_true",
                   help="drop a random part of every unsynced tail after each kill")
    p.add_argument("--compaction", action="store_true",
                   help="compact in a loop beside the commits; kill at every swap step")
    p.add_argument("--no-step-kills", action="store_true",
                   help="with --compaction, only random kills")
    p.add_argument("--snapshots", action="store_true",
                   help="also call store.snapshot() in that loop, if the store has it")
    p.add_argument("--segment-bytes", type=int)
    p.add_argument("--workload", help="your own workload, 'module:function' (see docs)")
    p.add_argument("--option", action="append", default=[], metavar="KEY=VALUE",
                   help="an OffsetStore.open option, e.g. fsync=always (JSON values)")
    p.set_defaults(func=cmd_crashtest)
    p = sub.add_parser("snapshot", help="snapshot every log partition's table now "
                                        "(takes the store's lock)")
    p.add_argument("dir")
    p.set_defaults(func=cmd_snapshot)
    p = sub.add_parser("report", help="per group and per log partition statistics of one "
                                      "store or a directory of stores, with Spark")
    p.add_argument("dir")
    p.add_argument("--engine", choices=("spark",), default="spark")
    p.add_argument("--master", help="Spark master URL (default local[*])")
    p.add_argument("--out", help="also write both tables as Parquet under this directory")
    p.add_argument("--retention-ms", type=int, default=7 * 24 * 3600 * 1000,
                   help="the stores' retention_ms (default 7 days)")
    p.add_argument("--retention-check-interval-ms", type=int, default=600_000,
                   help="the stores' retention check interval (default 10 minutes)")
    p.add_argument("--salvage", action="store_true", help="skip corrupt regions")
    p.add_argument("--limit", type=int, default=100, help="groups to print (default 100)")
    p.set_defaults(func=cmd_report)
    p = sub.add_parser("verify", help="check every CRC of the log and the snapshots; "
                                      "exit 1 on log corruption")
    p.add_argument("dir")
    p.set_defaults(func=cmd_verify)
    from offsetlog.server.main import add_parser as add_serve_parser
    add_serve_parser(sub)  # `offsetlog serve`: run by main() below, with its own life cycle
    return parser


def _console() -> Console:
    console = Console()
    if not console.is_terminal:
        # A pipe or a file (`offsetlog describe DIR | grep ...`): print whole columns, never
        # a table squeezed into 80 with its headers and timestamps cut to "…".
        console = Console(width=240)
    return console


def main(argv: list[str] | None = None) -> int:
    argv = sys.argv[1:] if argv is None else list(argv)
    if argv[:1] == ["bench"]:
        # Everything after "bench" belongs to the runner (argparse's REMAINDER drops a first
        # argument that looks like an option, so hand it over directly).
        ns = argparse.Namespace(bench_args=argv[1:])
        return cmd_bench(ns, Console())
    if argv[:1] == ["serve"]:  # offsetlog/server/main.py: a server, not a console command
        from offsetlog.server.main import main as serve
        return serve(argv[1:])
    args = build_parser().parse_args(argv)
    console = _console()
    if args.command not in ("bench", "crashtest") and not os.path.isdir(args.dir):
        console.print(f"offsetlog: {args.dir}: no such directory")
        return 2
    try:
        return args.func(args, console)
    except OffsetlogError as e:
        console.print(f"offsetlog: {e}", markup=False)
        return 1
    except BrokenPipeError:  # `offsetlog dump DIR | head`
        sys.stderr.close()
        return 0


if __name__ == "__main__":
    sys.exit(main())
