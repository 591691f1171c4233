"""Spark compaction against the local cleaner, by hand (not part of `offsetlog bench`).

    python -m offsetlog.bench.spark_compaction --sizes 1000000,5000000,20000000 [--dir DIR]

For each size it writes one store of that many OFFSET_COMMIT records straight through the
framing layer (1000 groups x 50 topic-partitions = 50,000 keys, so 20 to 400 updates per key,
10 records per batch: one commit of 10 partitions), then compacts copies of it four ways, each
running the same per-partition unit of work, ``offsetlog.compaction.spark.compact_partition`` (recovery's
check of the partition, then ``clean_partition`` over its closed segments):

* ``local``: one process, partition after partition (what ``offsetlog compact`` does after open);
* ``pool2``: a 2-process ``multiprocessing`` pool over the log partitions;
* ``spark1`` / ``spark2``: ``offsetlog.compaction.spark.compact`` on ``local[1]`` / ``local[2]``, session
  start timed separately and excluded.

Copies are hard-link trees (``cp -al``): the cleaner only ever writes new files and unlinks old
ones, so the generated segments are never changed. Every mode's output is checked to be
byte-identical to the single-process result. Prints a table and writes JSON (``--json``).
"""

from __future__ import annotations

import argparse
import json
import multiprocessing
import os
import shutil
import subprocess
import sys
import time

from offsetlog.compaction.spark import PartitionTask, compact, compact_partition
from offsetlog.log import naming
from offsetlog.log.framing import encode_payload, frame_payload
from offsetlog.partitioner import partition_for

PARTITIONS = 50
GROUPS = 1000
TOPIC_PARTITIONS = 50  # per group: topics "events-0".."events-4" x partitions 0..9
PER_BATCH = 10
SEGMENT_BYTES = 16 * 1024 * 1024
START_MS = 1_700_000_000_000
DELETE_RETENTION_MS = 24 * 3600 * 1000


def generate(path: str, records: int, *, seed: int = 1) -> dict:
    """A store of ``records`` commit records; returns what was written."""
    import random
    rng = random.Random(seed)
    shutil.rmtree(path, ignore_errors=True)
    os.makedirs(path)
    with open(naming.meta_path(path), "w") as f:
        json.dump({"format": "offsetlog", "version": 1, "partitions": PARTITIONS}, f)
    groups = [f"consumer-group-{i:04d}" for i in range(GROUPS)]
    by_partition: dict[int, list[str]] = {}
    for g in groups:
        by_partition.setdefault(partition_for(g, PARTITIONS), []).append(g)
    tps = [(f"events-{t}", p) for t in range(5) for p in range(10)]
    state = {}  # per log partition: [fd, segment size, next offset]
    for lp in by_partition:
        d = naming.partition_dir(path, lp)
        os.makedirs(d)
        state[lp] = [os.open(naming.segment_path(d, 0), os.O_WRONLY | os.O_CREAT, 0o644), 0, 0]
    lps = sorted(by_partition)
    written = 0
    ts = START_MS
    while written < records:
        g = rng.choice(groups)
        lp = partition_for(g, PARTITIONS)
        n = min(PER_BATCH, records - written)
        ts += 1
        chosen = rng.sample(tps, n)
        batch = [(i, 1, 0, {"group": g, "topic": t, "partition": p},
                  {"offset": rng.randrange(1 << 40), "commit_timestamp": ts})
                 for i, (t, p) in enumerate(chosen)]
        st = state[lp]
        data = frame_payload(st[2], encode_payload(batch), record_count=n, last_offset_delta=n - 1,
                             timestamp=ts)
        if st[1] and st[1] + len(data) > SEGMENT_BYTES:
            os.close(st[0])
            st[0] = os.open(naming.segment_path(naming.partition_dir(path, lp), st[2]),
                            os.O_WRONLY | os.O_CREAT, 0o644)
            st[1] = 0
        os.write(st[0], data)
        st[1] += len(data)
        st[2] += n
        written += n
    # Leave a small active segment in every partition, as a live store has: the cleaner never
    # touches it, so the closed segments are (nearly) the whole log.
    for lp in lps:
        st = state[lp]
        os.close(st[0])
        g = by_partition[lp][0]
        data = frame_payload(st[2], encode_payload([(0, 1, 0, {"group": g, "topic": "events-0",
                             "partition": 0},
                             {"offset": 0, "commit_timestamp": ts})]),
                             record_count=1, last_offset_delta=0, timestamp=ts)
        with open(naming.segment_path(naming.partition_dir(path, lp), st[2]), "wb") as f:
            f.write(data)
    subprocess.run(["sync"], check=False)
    return {"records": records + len(lps), "bytes": _tree_bytes(path)}


def _tree_bytes(path: str) -> int:
    return sum(os.path.getsize(os.path.join(r, f)) for r, _, fs in os.walk(path) for f in fs)


def _copy(src: str, dst: str) -> str:
    shutil.rmtree(dst, ignore_errors=True)
    subprocess.run(["cp", "-al", src, dst], check=True)
    return dst


def _tasks(path: str) -> list[PartitionTask]:
    return [PartitionTask(path, p, d, START_MS + 10**9, DELETE_RETENTION_MS, SEGMENT_BYTES)
            for p, d in naming.list_partition_dirs(path)]


def _digest(path: str) -> dict:
    import hashlib
    out = {}
    for p, d in naming.list_partition_dirs(path):
        for name in sorted(os.listdir(d)):
            with open(os.path.join(d, name), "rb") as f:
                out[(p, name)] = hashlib.sha1(f.read()).hexdigest()
    return out


def _work(results: list[dict]) -> dict:
    """The tasks' own seconds: what the job would cost with no scheduling overhead."""
    return {"task_s": sum(r["task_s"] for r in results),
            "task_cpu_s": sum(r["task_cpu_s"] for r in results)}


def run_local(path: str) -> tuple[float, dict]:
    started = time.perf_counter()
    results = [compact_partition(t) for t in _tasks(path)]
    return time.perf_counter() - started, _work(results)


def run_pool(path: str, processes: int = 2) -> tuple[float, dict]:
    ctx = multiprocessing.get_context("fork")
    with ctx.Pool(processes) as pool:
        pool.map(len, [[]] * processes)  # workers started before the clock
        started = time.perf_counter()
        results = pool.map(compact_partition, _tasks(path), chunksize=1)
        return time.perf_counter() - started, _work(results)


def _cpu_seconds(pid: int) -> float:
    """utime + stime of one process (all its threads), from /proc."""
    with open(f"/proc/{pid}/stat") as f:
        fields = f.read().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def spark_session(cores: int):
    from offsetlog.spark.session import local_session
    started = time.perf_counter()
    spark = local_session(f"local[{cores}]", app_name=f"bench-spark{cores}")
    spark.sparkContext.parallelize(range(cores), cores).map(lambda x: x).collect()  # warm
    return spark, time.perf_counter() - started


def run_spark(spark, path: str) -> tuple[float, dict]:
    jvm = spark.sparkContext._gateway.proc.pid  # spark-submit execs the driver JVM
    jvm_cpu = _cpu_seconds(jvm)
    started = time.perf_counter()
    results = compact(spark, path, now_ms=START_MS + 10**9,
                      delete_retention_ms=DELETE_RETENTION_MS, segment_bytes=SEGMENT_BYTES)
    secs = time.perf_counter() - started
    return secs, dict(_work(results), jvm_cpu_s=_cpu_seconds(jvm) - jvm_cpu)


def _load() -> str:
    with open("/proc/loadavg") as f:
        return " ".join(f.read().split()[:3])


def _busy_others() -> str:
    """The processes other than this one's family using CPU now (for the report)."""
    out = subprocess.run(["ps", "-eo", "pcpu,comm", "--sort=-pcpu", "--no-headers"],
                         capture_output=True, text=True).stdout.splitlines()
    return "; ".join(line.strip() for line in out[:6])


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="python -m offsetlog.bench.spark_compaction")
    ap.add_argument("--sizes", default="1000000,5000000,20000000")
    ap.add_argument("--dir", default=os.path.join("data", "bench-spark"))
    ap.add_argument("--modes", default="local,pool2,spark1,spark2",
                    help="run in this order; a mode named again is a repetition, and the "
                         "fastest of its runs is kept (the machine may be shared)")
    ap.add_argument("--json", default=os.path.join("bench", "out", "spark_compaction.json"))
    ap.add_argument("--keep", action="store_true", help="keep the generated logs")
    args = ap.parse_args(argv)
    sizes = [int(s) for s in args.sizes.split(",")]
    modes = args.modes.split(",")
    root = os.path.abspath(args.dir)
    os.makedirs(root, exist_ok=True)
    results = {"sizes": {}, "started": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
               "cpus": os.cpu_count()}
    for size in sizes:
        src = os.path.join(root, f"log-{size}")
        t = time.perf_counter()
        info = generate(src, size)
        info["generate_s"] = time.perf_counter() - t
        print(f"{size}: generated {info['records']} records, {info['bytes']} bytes in "
              f"{info['generate_s']:.1f} s", flush=True)
        reference = None
        for mode in modes:
            work = _copy(src, os.path.join(root, f"work-{mode}"))
            load_before = _load()
            if mode == "local":
                (secs, work_s), cores = run_local(work), 1
            elif mode == "pool2":
                (secs, work_s), cores = run_pool(work, 2), 2
            elif mode.startswith("spark"):
                cores = int(mode[5:])
                spark, start_s = spark_session(cores)
                try:
                    secs, work_s = run_spark(spark, work)
                finally:
                    from offsetlog.spark.session import stop
                    stop(spark)
                info[f"{mode}_session_s"] = start_s
            else:
                raise SystemExit(f"unknown mode {mode}")
            digest = _digest(work)
            if reference is None:
                reference = digest
            info.setdefault("runs", []).append({"mode": mode, "seconds": secs})
            if mode in info and info[mode]["seconds"] <= secs:
                print(f"  {mode:7s} {secs:8.2f} s  (slower than its earlier run: kept that)")
                shutil.rmtree(work, ignore_errors=True)
                continue
            info[mode] = {"seconds": secs, "cores": cores,
                          "records_per_s": info["records"] / secs,
                          "records_per_s_per_core": info["records"] / secs / cores,
                          "identical_to_first": digest == reference,
                          "load_before": load_before, "load_after": _load(),
                          "busy": _busy_others(), **work_s}
            print(f"  {mode:7s} {secs:8.2f} s  {info['records'] / secs:12,.0f} rec/s  "
                  f"{info['records'] / secs / cores:12,.0f} rec/s/core  "
                  f"same output: {digest == reference}  load {load_before} -> {_load()}",
                  flush=True)
            print("          tasks: " + "  ".join(f"{k} {v:.2f}" for k, v in work_s.items()),
                  flush=True)
            shutil.rmtree(work, ignore_errors=True)
        if "spark2" in info and "pool2" in info:
            info["spark2_over_pool2"] = info["pool2"]["seconds"] / info["spark2"]["seconds"]
            print(f"  spark local[2] / pool of 2: {info['spark2_over_pool2']:.3f}x")
        for a, b in (("spark1", "spark2"), ("local", "pool2")):
            if a in info and b in info:
                info[f"speedup_{a}_{b}"] = info[a]["seconds"] / info[b]["seconds"]
        results["sizes"][size] = info
        if not args.keep:
            shutil.rmtree(src, ignore_errors=True)
        os.makedirs(os.path.dirname(os.path.abspath(args.json)), exist_ok=True)
        with open(args.json, "w") as f:
            json.dump(results, f, indent=1, default=str)
    return 0


if __name__ == "__main__":
    sys.exit(main())
