"""The comparative benchmark runner behind ``offsetlog bench``.

Every case measures offsetlog and its baseline in the same run, on the same data directory,
and reports offsetlog / baseline against the target of the project's issue. Nothing here
asserts a time: unmet targets are reported, not failed, unless ``--check`` is given (then a
missed target makes the exit status 1).

    python -m offsetlog.bench.runner [--quick] [--only latency,threads,async,recovery,memory,assignors]
                           [--dir DIR] [--json PATH] [--plot] [--markdown PATH]

Cases (and what each compares):

``latency``    commit_sync p50, 1 thread, fsync=always  vs  os.write + os.fsync of the same bytes
``threads``    commit_sync commits/s, N threads, many groups (thread k: group-k, partition k % 8)
               vs  N threads write+fsync under a lock, vs N threads each writing its own file
               with one pwritev(RWF_DSYNC) per commit, and vs sqlite3 (WAL, synchronous=FULL,
               one upsert per transaction, connection per thread); one group as information
``async``      commit_async records/s, 1 thread, one group, 1 000 partitions  vs  issue 16's lean
               pipeline (msgpack pack + CRC + frame per record, dict, 1 000-record chunks to a
               writer thread that writes and fsyncs)
``recovery``   OffsetStore.open (snapshots off: a full replay) on a large log, records/s  vs
               issue 16's lean replay loop over the same records (msgpack arrays of 1 000
               (key, value) pairs, one CRC each), and (information) a bare loop over the
               engine's own format
``snapshot``   reopen with a snapshot at 99% of the log  vs  a full replay of it (seconds)
``memory``     OffsetTable RSS for N keys  vs  a plain dict with interned strings
``assignors``  offsetlog.bench.assignors.run_assignor_benchmark(), when that module exists
``transactions``  begin + commit_offsets(10 offsets) + commit per s, 1 and 8 threads  vs
               commit_sync of the same 10 offsets (bench/transactions.py)
``wire``       OffsetCommit over loopback to ``offsetlog serve``: commits/s from 32 connections
               vs 32 threads of embedded commit_sync, and p50 latency vs embedded
               (bench/wire.py)
``kafka``      the same OffsetCommit load against Apache Kafka and ``offsetlog serve``: Kafka's
               defaults vs fsync=interval, flush.messages=1 vs fsync=always (bench/kafka.py;
               needs Java 17+ and Maven; runs only when named in --only)
``rebalance``  10 confluent-kafka members: the last joining / one leaving -> every partition
               owned, consumer vs classic protocol, offsetlog vs Kafka (bench/rebalance.py;
               runs only when named in --only)
"""

from __future__ import annotations

import argparse
import datetime as _dt
import inspect
import os
import sys
import time
import traceback

from offsetlog.bench import baselines, cases
from offsetlog.bench.common import (
    DEFAULT_DATA_DIR,
    SOURCE_ROOT,
    case_dir,
    cpu_snapshot,
    measure_latency,
    median,
    percentile,
    pressure_stall_s,
    run_child,
    warm_page_cache,
)
from offsetlog.bench.report import (
    HIGHER,
    LOWER,
    Row,
    engine_version,
    machine_info,
    markdown_table,
    plot_threads,
    print_table,
    write_json,
)
from offsetlog.bench.threads_case import run_threads_case
from offsetlog.bench.workload import EPOCH_GROUP, GROUP, TOPIC, framed_commit, generate_log
from offsetlog.group import GroupConfig

CASES = ("latency", "threads", "async", "recovery", "snapshot", "memory", "assignors",
         "transactions", "wire", "kafka", "rebalance")
#: what runs without --only: all but those that start Apache Kafka (Java, Maven)
DEFAULT_CASES = tuple(c for c in CASES if c not in ("kafka", "rebalance"))

#: sizes of a full run (~10 minutes on 2 cores) and of --quick (~1-2 minutes)
FULL = {
    "latency_rounds": 10, "latency_per_round": 1000, "latency_warmup": 50,
    "threads": [1, 8, 32], "thread_duration_s": 2.0, "thread_warmup_s": 0.3,
    "thread_reps": 5,
    # (seven: a run is a quarter of a second, and three of them read 1.14-1.47x in one
    # session with the engine unchanged: bench/RESULTS.md, twenty-first session)
    "async_records": 200_000, "async_reps": 7,
    "recovery_records": 2_000_000, "recovery_groups": 10_000, "recovery_topics": 10,
    "recovery_partitions_per_topic": 10, "recovery_reps": 5,
    "snapshot_records": 5_000_000, "snapshot_reps": 5,
    "memory_groups": 1000, "memory_topics": 10, "memory_partitions": 100,
}
QUICK = {
    "latency_rounds": 4, "latency_per_round": 300, "latency_warmup": 30,
    "threads": [8, 32], "thread_duration_s": 1.5, "thread_warmup_s": 0.3, "thread_reps": 1,
    "async_records": 50_000, "async_reps": 1,
    "recovery_records": 300_000, "recovery_groups": 2000, "recovery_topics": 10,
    "recovery_partitions_per_topic": 10, "recovery_reps": 1,
    "snapshot_records": 500_000, "snapshot_reps": 1,
    "memory_groups": 200, "memory_topics": 10, "memory_partitions": 100,
}
#: the targets of issue 25, the native core (ratio offsetlog / baseline; the threads case's
#: are in bench/threads_case.py)
TARGETS = {
    "latency": 1.1,  # <= a bare pwritev(RWF_DSYNC) append of the same bytes
    "async": 1.2, "recovery": 2.0,  # >=
    "memory": 1.1,  # <=
}
#: the async case's keys: 10 topics x 100 partitions of one group
ASYNC_KEYS = [(f"{TOPIC}-{t}", p) for t in range(10) for p in range(100)]


class Runner:
    def __init__(self, data_dir: str, sizes: dict, console) -> None:
        self.data_dir = data_dir
        self.sizes = sizes
        self.console = console
        self.rows: list[Row] = []
        self.raw: dict = {}
        self.series: dict | None = None

    def log(self, msg: str) -> None:
        self.console.log(msg)

    # -- 1 ---------------------------------------------------------------------------------

    def latency(self) -> None:
        s = self.sizes
        data = framed_commit()
        with case_dir(self.data_dir, "latency") as d:
            bare_op, bare_close = baselines.bare_append_fsync(os.path.join(d, "bare.log"), data)
            dsync_op, dsync_close = baselines.bare_append_dsync(d, data)
            # (a group's first join at once: the member's, below)
            store = cases.open_store(os.path.join(d, "store"),
                                     group_config=GroupConfig(initial_rebalance_delay_ms=0))
            member_op, member_close = cases.member_commit_op(store)
            try:
                samples = measure_latency(
                    {"bare": bare_op, "dsync": dsync_op, "offsetlog": cases.commit_sync_op(store),
                     "epoch": cases.commit_sync_op(store, EPOCH_GROUP, leader_epoch=7),
                     "member": member_op},
                    rounds=s["latency_rounds"], per_round=s["latency_per_round"],
                    warmup=s["latency_warmup"])
                seg = store.stats()[store.partition_of(GROUP)]
                written = seg["bytes"] / max(1, seg["next_offset"])
            finally:
                member_close()
                store.close()
                bare_close()
                dsync_close()
        us = {k: [v / 1000 for v in vals] for k, vals in samples.items()}
        summary = {k: {f"p{q}": percentile(v, q) for q in (50, 90, 99, 99.9)}
                   for k, v in us.items()}
        self.raw["latency"] = {"bytes_per_write": len(data), "engine_bytes_per_commit": written,
                               "samples_per_side": len(us["bare"]), **summary}
        n = len(us["bare"])
        self.rows.append(Row("sync p50, one committer, fsync=always",
                             f"a bare pwritev(RWF_DSYNC) append, {len(data)} B",
                             summary["offsetlog"]["p50"], summary["dsync"]["p50"], "us", LOWER,
                             TARGETS["latency"],
                             note=f"{n} interleaved samples per side"))
        self.rows.append(Row("sync p50, one committer (info)",
                             f"os.write+os.fsync append, {len(data)} B",
                             summary["offsetlog"]["p50"], summary["bare"]["p50"], "us", LOWER))
        self.rows.append(Row("commit_sync p99, 1 thread (info)", "os.write+os.fsync append",
                             summary["offsetlog"]["p99"], summary["bare"]["p99"], "us", LOWER))
        self.rows.append(Row("sync p50, one committer, offsets with a leader epoch (info)",
                             f"a bare pwritev(RWF_DSYNC) append, {len(data)} B",
                             summary["epoch"]["p50"], summary["dsync"]["p50"], "us", LOWER,
                             note="OffsetAndMetadata(offset, '', 7): Kafka's clients' commit"))
        self.rows.append(Row("GroupMember.commit_sync p50, a consumer group's member (info)",
                             "the store's commit_sync, a simple consumer's",
                             summary["member"]["p50"], summary["offsetlog"]["p50"], "us", LOWER,
                             note="its generation and member id checked by the coordinator"))

    # -- 2 ---------------------------------------------------------------------------------

    def threads(self) -> None:
        rows, self.raw["threads"], self.series = run_threads_case(self.data_dir, self.sizes,
                                                                  self.log)
        self.rows.extend(rows)

    # -- transactions (information: no target) ------------------------------------------

    def transactions(self) -> None:
        from offsetlog.bench.transactions import run_case

        s = self.sizes
        window = {"duration_s": s["thread_duration_s"], "warmup_s": s["thread_warmup_s"]}
        for n in (1, 8):
            got: dict[str, list[float]] = {"plain": [], "txn": []}
            for r in range(s["thread_reps"]):
                for kind in ("plain", "txn"):
                    with case_dir(self.data_dir, f"txn-{kind}-{n}") as d:
                        got[kind].append(run_case(os.path.join(d, "store"), kind, n, **window))
            self.raw.setdefault("transactions", {})[n] = got
            self.rows.append(Row(f"transactions of 10 offsets, {n} thread(s) (info)",
                                 "commit_sync of the same 10 offsets", median(got["txn"]),
                                 median(got["plain"]), "commits/s", HIGHER,
                                 note=f"median of {len(got['txn'])}"))

    # -- 3 ---------------------------------------------------------------------------------

    def async_(self) -> None:
        s = self.sizes
        n = s["async_records"]
        bare, store, entry = [], [], []
        for r in range(s["async_reps"]):
            sides = ("bare", "store", "entry")
            for side in (sides if r % 2 == 0 else sides[::-1]):
                with case_dir(self.data_dir, f"async-{side}") as d:
                    if side == "bare":
                        v, table = baselines.lean_pipeline(os.path.join(d, "lean.log"), n,
                                                           ASYNC_KEYS)
                        del table
                        bare.append(v)
                    else:
                        (store if side == "store" else entry).append(cases.commit_async_stream(
                            os.path.join(d, "store"), n, ASYNC_KEYS,
                            api_frame=side == "store"))
            self.log(f"async rep {r}: offsetlog {store[-1]:,.0f}/s, lean {bare[-1]:,.0f}/s, "
                     f"the native entry alone {entry[-1]:,.0f}/s")
        self.raw["async"] = {"records": n, "offsetlog_records_per_s": store,
                             "lean_records_per_s": bare, "native_entry_records_per_s": entry}
        self.rows.append(Row("async, one group, 1,000 partitions, 1 offset/call",
                             "lean pipeline: pack+CRC+frame per record, dict, 1,000-record "
                             "chunks to a write+fsync thread", median(store), median(bare),
                             "records/s", HIGHER, TARGETS["async"],
                             note=f"{n:,} records, median of {len(store)}, interleaved; paired "
                                  f"runs {min(a / b for a, b in zip(store, bare)):.2f}-"
                                  f"{max(a / b for a, b in zip(store, bare)):.2f}× (median "
                                  f"{median(a / b for a, b in zip(store, bare)):.2f}×)"))
        self.rows.append(Row("async, the same calls to the store's native entry (for "
                             "information)", "the same lean pipeline", median(entry),
                             median(bare), "records/s", HIGHER,
                             note="CommitRouter.commit_async called directly: the router's "
                                  "entry without the store's (which binds commit_async "
                                  "natively, so the two rows agree but for noise)"))

    # -- 4 ---------------------------------------------------------------------------------

    def recovery(self) -> None:
        s = self.sizes
        n = s["recovery_records"]
        with case_dir(self.data_dir, "recovery") as d:
            t0 = time.perf_counter()
            store_dir, lean = os.path.join(d, "store"), os.path.join(d, "lean.bin")
            shape = generate_log(store_dir, n, groups=s["recovery_groups"],
                                 topics=s["recovery_topics"],
                                 partitions_per_topic=s["recovery_partitions_per_topic"],
                                 lean_path=lean)
            self.log(f"recovery: generated {shape['records']:,} records in "
                     f"{shape['batches']:,} batches ({shape['bytes'] / 2**20:,.0f} MiB) in "
                     f"{time.perf_counter() - t0:.1f}s")
            warm_page_cache(d)  # every side reads from the page cache
            runs: dict[str, list[dict]] = {"lean": [], "store": [], "bare": []}
            for r in range(s["recovery_reps"]):
                # the bare loop over the engine's format is information only: three runs
                sides = ("lean", "store", "bare") if r < 3 else ("lean", "store")
                for side in (sides if r % 2 == 0 else sides[::-1]):
                    res = run_child("offsetlog.bench.recovery_child", side,
                                    lean if side == "lean" else store_dir)
                    if res["records"] != shape["records"]:
                        raise RuntimeError(f"recovery {side}: {res['records']} records, "
                                           f"expected {shape['records']}")
                    runs[side].append(res)
                self.log(f"recovery rep {r}: offsetlog {runs['store'][-1]['records_per_s']:,.0f}"
                         f"/s, lean {runs['lean'][-1]['records_per_s']:,.0f}/s")
        if len({r["keys"] for v in runs.values() for r in v}) != 1:
            raise RuntimeError("recovery: the sides disagree on the number of keys")
        self.raw["recovery"] = {"log": shape, "runs": runs}
        med = {k: median(r["records_per_s"] for r in v) for k, v in runs.items()}
        pairs = [a["records_per_s"] / b["records_per_s"]
                 for a, b in zip(runs["store"], runs["lean"])]
        self.rows.append(Row(f"full replay on open (snapshots off), {n:,} records",
                             "lean loop: 1,000-pair msgpack arrays, one CRC each, into a dict",
                             med["store"], med["lean"], "records/s", HIGHER, TARGETS["recovery"],
                             note=f"{shape['batches']:,} batches, {runs['store'][0]['keys']:,} "
                                  f"keys, warm page cache, fresh process per run, median of "
                                  f"{len(runs['store'])}, interleaved; paired runs "
                                  f"{min(pairs):.2f}-{max(pairs):.2f}× (median "
                                  f"{median(pairs):.2f}×)"))
        self.rows.append(Row(f"full replay on open, {n:,} records (info)",
                             "bare read+CRC+decode loop over the engine's format",
                             med["store"], med["bare"], "records/s", HIGHER))

    # -- 4b --------------------------------------------------------------------------------

    def snapshot(self) -> None:
        from offsetlog.bench import snapshot_reopen

        s = self.sizes
        n = s["snapshot_records"]
        with case_dir(self.data_dir, "snapshot") as d:
            res = snapshot_reopen.run(os.path.join(d, "store"), n, s["snapshot_reps"],
                                      log=self.log)
        self.raw["snapshot"] = res
        self.rows.append(Row(f"reopen with a snapshot at 99%, {n:,} records",
                             "full replay of the same log", res["median_s"]["snapshot"],
                             res["median_s"]["full"], "s", LOWER, snapshot_reopen.TARGET,
                             note=f"{res['keys']:,} keys, fresh process per run, median of "
                                  f"{len(res['runs']['full'])}"))

    # -- 5 ---------------------------------------------------------------------------------

    def memory(self) -> None:
        s = self.sizes
        args = [str(s["memory_groups"]), str(s["memory_topics"]), str(s["memory_partitions"])]
        res = {side: run_child("offsetlog.bench.memory_child", side, *args) for side in ("dict", "table")}
        keys = res["table"]["keys"]
        self.raw["memory"] = res
        self.rows.append(Row(f"table RSS, {keys:,} keys", "dict of tuples, interned strings",
                             res["table"]["rss_delta"], res["dict"]["rss_delta"], "bytes", LOWER,
                             TARGETS["memory"], note="RSS delta over the build, fresh process "
                                                     "per side"))

    # -- assignors (another engineer's module) ---------------------------------------------

    def assignors(self, quick: bool) -> None:
        try:
            from offsetlog.bench import assignors as mod
        except ImportError:
            self.log("assignors: bench/assignors.py is not there; skipped")
            return
        fn = getattr(mod, "run_assignor_benchmark", None)
        if fn is None:
            self.log("assignors: offsetlog.bench.assignors has no run_assignor_benchmark(); skipped")
            return
        params = inspect.signature(fn).parameters
        result = fn(quick=quick) if "quick" in params else fn()
        self.raw["assignors"] = result
        self.rows.extend(_as_rows(result))


def _as_rows(result) -> list[Row]:
    """Rows from whatever ``run_assignor_benchmark`` returns: Rows, dicts with Row fields, a
    ``{assignor name: seconds}`` dict (information rows), or anything else (shown as text)."""
    if isinstance(result, (list, tuple)):
        return [_as_row(item) for item in result]
    if (isinstance(result, dict) and result and "case" not in result
            and all(isinstance(v, (int, float)) for v in result.values())):
        return [Row(f"assignor {name}: one reassignment (info)", "-", float(v), None, "s")
                for name, v in result.items()]
    return [_as_row(result)]


def _as_row(item) -> Row:
    if isinstance(item, Row):
        return item
    if isinstance(item, dict):
        fields = {k: item[k] for k in ("case", "baseline", "offsetlog", "baseline_value", "unit",
                                       "better", "target", "note") if k in item}
        if "case" in fields:
            fields.setdefault("baseline", "-")
            fields.setdefault("offsetlog", None)
            fields.setdefault("baseline_value", None)
            fields.setdefault("unit", "")
            return Row(**fields)
        return Row("assignors", "-", None, None, "", note=repr(item)[:300])
    return Row("assignors", "-", None, None, "", note=repr(item)[:300])


def build_parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(prog="offsetlog bench", description=(
        "Comparative benchmarks: offsetlog against its baselines, same run, same disk."))
    p.add_argument("--dir", default=DEFAULT_DATA_DIR,
                   help="data directory (default ./%(default)s); each case works in its own "
                        "sub-directory, wiped before and removed after")
    p.add_argument("--quick", action="store_true", help="small sizes: a smoke run of 1-2 minutes")
    p.add_argument("--only", default=None,
                   help=f"comma-separated cases to run, of: {', '.join(CASES)}")
    p.add_argument("--json", default=None, metavar="PATH",
                   help="where to write the results (default DIR/results.json)")
    p.add_argument("--plot", nargs="?", const="", default=None, metavar="PATH",
                   help="write a PNG of commits/s against threads to PATH "
                        "(default DIR/throughput.png)")
    p.add_argument("--markdown", default=None, metavar="PATH",
                   help="also write the table as Markdown to PATH")
    p.add_argument("--check", action="store_true",
                   help="exit 1 when a case misses its stated target (for CI); without it, "
                        "missed targets are reported and the exit status is 0")
    return p


def main(argv: list[str] | None = None) -> int:
    from rich.console import Console

    argv = list(sys.argv[1:] if argv is None else argv)
    if argv[:1] == ["--"]:  # `offsetlog bench -- --quick`: argparse.REMAINDER keeps the "--"
        argv = argv[1:]
    args = build_parser().parse_args(argv)
    console = Console()
    if not console.is_terminal:  # a pipe or a file: do not squeeze the table into 80 columns
        console = Console(width=170)
    only = DEFAULT_CASES if args.only is None else tuple(x.strip() for x in args.only.split(",")
                                                          if x.strip())
    unknown = [x for x in only if x not in CASES]
    if unknown:
        console.print(f"offsetlog bench: unknown case(s) {', '.join(unknown)}; "
                      f"choose from {', '.join(CASES)}")
        return 2
    os.makedirs(args.dir, exist_ok=True)
    lock_fd = _lock_data_dir(args.dir)
    if lock_fd is None:
        console.print(f"offsetlog bench: another benchmark is using {args.dir}; wait for it, "
                      "or pass another --dir (two runs at once would also disturb each other)")
        return 2
    try:
        return _run(args, console, only)
    finally:
        os.close(lock_fd)


def _lock_data_dir(path: str) -> int | None:
    """An exclusive lock on the data directory (its case sub-directories have fixed names)."""
    import fcntl

    fd = os.open(os.path.join(path, ".bench.lock"), os.O_RDWR | os.O_CREAT, 0o644)
    try:
        fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except OSError:
        os.close(fd)
        return None
    return fd


def _run(args, console, only) -> int:
    sizes = QUICK if args.quick else FULL
    runner = Runner(args.dir, sizes, console)
    started = _dt.datetime.now().astimezone()
    load_start = os.getloadavg()
    if load_start[0] > 0.5:
        console.print(f"[yellow]warning: load average {load_start[0]:.2f} at start: other work "
                      f"on this machine will disturb the figures[/yellow]")
    t0 = time.perf_counter()
    cpu0, psi0 = cpu_snapshot(), pressure_stall_s()
    failed: dict[str, str] = {}
    for name in only:
        console.log(f"[bold]{name}[/bold] ...")
        c0 = time.perf_counter()
        try:
            if name == "assignors":
                runner.assignors(args.quick)
            elif name == "wire":
                from offsetlog.bench.wire import run_wire_benchmark
                runner.rows.extend(run_wire_benchmark(runner.data_dir, quick=args.quick))
            elif name == "kafka":
                from offsetlog.bench.kafka import run_kafka_benchmark
                runner.rows.extend(run_kafka_benchmark(runner.data_dir, quick=args.quick))
            elif name == "rebalance":
                from offsetlog.bench.rebalance import run_rebalance_benchmark
                runner.rows.extend(run_rebalance_benchmark(runner.data_dir, quick=args.quick))
            else:
                getattr(runner, "async_" if name == "async" else name)()
        except Exception as e:  # noqa: BLE001 - one broken case must not hide the others
            failed[name] = f"{e!r}"
            console.print(f"[red]{name} failed[/red]: {e!r}")
            traceback.print_exc()
        console.log(f"{name} took {time.perf_counter() - c0:.1f}s")
    total = time.perf_counter() - t0
    cpu1, psi1 = cpu_snapshot(), pressure_stall_s()
    # CPU that other processes used meanwhile: a disturbed run says so in its results
    others = max(0.0, (cpu1[0] - cpu0[0]) - (cpu1[1] - cpu0[1]))
    if others > 0.1 * total:
        console.print(f"[yellow]warning: other processes used {others:.0f} CPU-seconds during "
                      f"this {total:.0f}s run[/yellow]")
    version = engine_version(SOURCE_ROOT)
    title = (f"offsetlog bench ({'quick' if args.quick else 'full'}) "
             f"{started:%Y-%m-%d %H:%M %Z}, engine {version['commit']}"
             f"{' (modified)' if version['engine_modified'] else ''}, {os.cpu_count()} cores, "
             f"{total:.0f}s")
    print_table(runner.rows, console, title)
    payload = {"date": started.isoformat(), "mode": "quick" if args.quick else "full",
               "seconds": total, "engine": version, "machine": machine_info(args.dir),
               "sizes": sizes,
               "loadavg_start": load_start, "loadavg_end": os.getloadavg(),
               "cpu_seconds_other_processes": others,
               "pressure_stall_s": {k: psi1[k] - psi0[k] for k in psi0 if k in psi1},
               "rows": [r.as_dict() for r in runner.rows], "series": runner.series,
               "raw": runner.raw, "failed": failed}
    json_path = args.json or os.path.join(args.dir, "results.json")
    write_json(json_path, payload)
    console.print(f"results: {json_path}")
    if args.markdown:
        os.makedirs(os.path.dirname(os.path.abspath(args.markdown)), exist_ok=True)
        with open(args.markdown, "w") as f:
            f.write(f"{title}; other processes used {others:.0f} CPU-seconds meanwhile.\n\n")
            f.write(markdown_table(runner.rows))
        console.print(f"markdown: {args.markdown}")
    if args.plot is not None:
        if runner.series is None:
            console.print("--plot: the threads case did not run; nothing to plot")
        else:
            png = args.plot or os.path.join(args.dir, "throughput.png")
            plot_threads(runner.series, png, f"commit_sync throughput, fsync per commit "
                                             f"({os.cpu_count()} cores)")
            console.print(f"plot: {png}")
    missed = [r for r in runner.rows if r.met is False]
    if args.check and missed:
        for r in missed:
            print(f"offsetlog bench: target missed: {r.case} vs {r.baseline}: ratio "
                  f"{r.ratio:.3f}, target {'>=' if r.better == HIGHER else '<='} {r.target}",
                  file=sys.stderr)
        return 1
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
