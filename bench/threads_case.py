"""The ``threads`` case of ``offsetlog bench`` (issue 25's many-groups goals): ``N`` threads of
``commit_sync`` on one store against threads that share nothing (their own file, one
``pwritev(RWF_DSYNC)`` each commit), a lock around write + fsync, and sqlite3; and, for
information, what the GIL costs those own-file threads once each commit runs some Python
first, what the case's groups cost by sharing log partitions (32 groups on 32 of them
against ``group-k``'s 30, and the baselines' threads sharing files as those groups share
log partitions), what the case's groups do in a store of one log partition (their commits
then share rounds: one write, one sync for many groups), and what 32 threads of the engine
and of the own-file loop do
with their threads under ``SCHED_BATCH`` (the policy ``offsetlog serve`` gives its
connection threads: a woken thread does not preempt the GIL's holder).
"""

from __future__ import annotations

import os
from typing import Callable

from offsetlog.bench import baselines, cases
from offsetlog.bench.common import case_dir, median
from offsetlog.bench.report import HIGHER, LOWER, Row
from offsetlog.bench.workload import (
    apart_groups,
    framed_commit,
    many_group,
    many_log_partition,
    many_partition,
)

#: issue 25's goals for this case (ratio offsetlog / baseline, all >=)
THREAD_TARGETS = {("lock", 32): 5.5, ("own", 8): 0.8, ("own", 32): 0.7, ("ownpy", 32): 1.0,
                  ("sqlite", 32): 3.5}


def run_threads_case(data_dir: str, sizes: dict, log: Callable[[str], None]
                     ) -> tuple[list[Row], dict, dict]:
    """``(rows, raw figures, the threads plot's series)`` of the case; ``sizes``: the
    runner's ``FULL`` or ``QUICK``."""
    rows: list[Row] = []
    s = sizes
    threads = sorted(set(s["threads"]) | {8, 32})
    names = {"many": "offsetlog commit_sync, group per thread (group-k, partition k % 8)",
             "one": "offsetlog commit_sync, one group",
             "lock": "threads: lock + write + fsync",
             "own": "threads: own file each, one pwritev(RWF_DSYNC) per commit",
             "ownpy": "threads: own file each, a lean commit's Python (pack, CRC, frame, "
                      "dict) before each write",
             "ownpy5": "threads: own file each, a lean commit's Python and 5 us more",
             "ownnat": "threads: own file each, the native core's pieces of a commit "
                       "(checks, framing, apply) around each write",
             "sqlite": "sqlite3 WAL FULL, connection per thread (group-k, partition k % 8)",
             "many-apart": "offsetlog commit_sync, group per thread, each group in a log "
                           "partition of its own",
             "many-one-log": "offsetlog commit_sync, group per thread, a store of one log "
                             "partition (the groups' commits share rounds)",
             "many-batch": "offsetlog commit_sync, group per thread, threads under SCHED_BATCH",
             "own-batch": "threads: own file each, one pwritev(RWF_DSYNC) per commit, "
                          "threads under SCHED_BATCH",
             "own-case": "threads: one pwritev(RWF_DSYNC) per commit, to the file of their "
                         "group's log partition (two pairs share one, as the case's groups)",
             "ownpy-case": "threads: a lean commit's Python before each write, to the file of "
                           "their group's log partition (two pairs share one)"}
    results: dict[str, list[float | None]] = {k: [] for k in names}
    runs: dict[str, dict[int, list[float]]] = {k: {} for k in names}
    #: (key, threads) -> each window's CPU per commit (common.window_cpu)
    cpu: dict[tuple[str, int], list[dict]] = {}
    data = framed_commit(group=many_group(31), partition=many_partition(31))
    kw = {"duration_s": s["thread_duration_s"], "warmup_s": s["thread_warmup_s"]}
    for n in threads:
        # one thread: the engine and its two disk baselines only (information)
        keys = [k for k in names if n > 1 or k in ("many", "lock", "own")]
        # (the scheduling policy's pair, the groups apart and the files shared as the case's
        # groups share log partitions: at 32 threads only)
        keys = [k for k in keys
                if n == 32 or not k.endswith(("-batch", "-apart", "-case", "-one-log"))]
        for r in range(s["thread_reps"]):
            order = keys if (n + r) % 2 else keys[::-1]  # interleaved, alternating
            for key in order:
                window: dict = {}
                wkw = {**kw, "cpu": window}  # (the window's CPU, common.window_cpu)
                with case_dir(data_dir, f"threads-{key}-{n}") as d:
                    if key in ("many", "one", "many-batch", "many-apart", "many-one-log"):
                        v = cases.commit_sync_threads(
                            os.path.join(d, "store"), n, one_group=key == "one",
                            many_groups=key != "one", batch=key == "many-batch",
                            groups=apart_groups(n) if key == "many-apart" else None,
                            partitions=1 if key == "many-one-log" else None, **wkw)
                    elif key == "lock":
                        v = baselines.lock_fsync_threads(os.path.join(d, "lock.log"), n,
                                                         data, **wkw)
                    elif key in ("own", "own-batch", "own-case"):
                        v = baselines.own_file_dsync_threads(
                            d, n, data, batch=key == "own-batch",
                            files=many_log_partition if key == "own-case" else None, **wkw)
                    elif key == "ownnat":
                        v = baselines.own_file_native_threads(d, n, **wkw)
                    elif key in ("ownpy", "ownpy5", "ownpy-case"):
                        v = baselines.own_file_python_threads(
                            d, n, spin_us=5.0 if key == "ownpy5" else 0.0,
                            files=many_log_partition if key == "ownpy-case" else None, **wkw)
                    else:
                        v = baselines.sqlite_threads(os.path.join(d, "offsets.db"), n,
                                                     many_groups=True, **wkw)
                runs[key].setdefault(n, []).append(v)
                cpu.setdefault((key, n), []).append(window)
        for key in names:
            results[key].append(median(runs[key][n]) if n in runs[key] else None)
        log(f"threads={n}: " + ", ".join(f"{k} {results[k][-1]:,.0f}/s" for k in keys))
    series = {"threads": threads, "commits_per_s": {names[k]: results[k] for k in names}}
    raw = {"threads": threads, "commits_per_s": results,
           "runs": {k: {str(n): v for n, v in r.items()} for k, r in runs.items()},
           "cpu_per_commit": {f"{k}@{n}": w for (k, n), w in cpu.items()},
           "bytes_per_write": len(data), **kw}
    at = {k: dict(zip(threads, v)) for k, v in results.items()}

    def spread(key: str, base: str, n: int) -> str:
        """The range of the ratios of the windows run next to each other (same rep)."""
        pairs = [a / b for a, b in zip(runs[key][n], runs[base][n])]
        raw.setdefault("paired_ratios", {})[f"{key}/{base}@{n}"] = pairs
        return (f"vs {base}, windows run side by side: median {median(pairs):.2f}×, "
                f"range {min(pairs):.2f}-{max(pairs):.2f}×")

    reps = (f"{kw['duration_s']}s windows, median of {s['thread_reps']} per side, "
            f"interleaved; {spread('many', 'lock', 8)}")
    rows.append(Row("many groups, 8 threads, commit_sync",
                    "8 threads, own file each, one DSYNC write per commit",
                    at["many"][8], at["own"][8], "commits/s", HIGHER,
                    THREAD_TARGETS[("own", 8)], note=reps))
    for n in (8, 32):
        rows.append(Row(f"many groups, {n} threads, commit_sync", f"{n} threads lock+fsync",
                        at["many"][n], at["lock"][n], "commits/s", HIGHER,
                        THREAD_TARGETS.get(("lock", n))))
    rows[-1].note = spread("many", "lock", 32)
    rows.append(Row("many groups, 32 threads, commit_sync",
                    "32 threads, own file each, a lean commit's Python (~2 us)",
                    at["many"][32], at["ownpy"][32], "commits/s", HIGHER,
                    THREAD_TARGETS[("ownpy", 32)], note=spread("many", "ownpy", 32)))
    rows.append(Row("many groups, 32 threads, commit_sync",
                    "32 threads, own file each, one DSYNC write per commit",
                    at["many"][32], at["own"][32], "commits/s", HIGHER,
                    THREAD_TARGETS[("own", 32)], note=spread("many", "own", 32)))
    rows.append(Row("many groups, 32 threads, commit_sync", "sqlite3 WAL FULL, 32 conns",
                    at["many"][32], at["sqlite"][32], "commits/s", HIGHER,
                    THREAD_TARGETS[("sqlite", 32)], note=spread("many", "sqlite", 32)))
    for n in (8, 32):
        rows.append(Row(f"one group, {n} threads, commit_sync (info)",
                        f"{n} threads lock+fsync", at["one"][n], at["lock"][n],
                        "commits/s", HIGHER))
    rows.append(Row("own file per thread, 32 threads (info: the disk's headroom)",
                    "32 threads lock+fsync", at["own"][32], at["lock"][32],
                    "commits/s", HIGHER))
    # The GIL's toll: the same own-file loop once each commit runs some Python first.
    for key, what in (("ownpy", "a lean commit's Python (~2 us)"),
                      ("ownpy5", "a lean commit's Python and 5 us more"),
                      ("ownnat", "the native pieces of a commit around the write")):
        for n in (8, 32):
            rows.append(Row(
                f"own file per thread, {n} threads, {what} (info)",
                f"{n} threads, own file each, one DSYNC write per commit", at[key][n],
                at["own"][n], "commits/s", HIGHER,
                note=spread(key, "own", n) if n == 32 else ""))
    def at_32(name: str, baseline: str, key: str, base: str) -> Row:
        """An information row at 32 threads: ``key``'s commits/s against ``base``'s."""
        return Row(name, baseline, at[key][32], at[base][32], "commits/s", HIGHER,
                   note=spread(key, base, 32))

    own_32 = "32 threads, own file each, one DSYNC write per commit"
    apart = "many groups, 32 threads, commit_sync, each group in a log partition of its own (info)"
    batch = "many groups, 32 threads, commit_sync, threads under SCHED_BATCH (info)"
    one_log = "many groups, 32 threads, commit_sync, a store of one log partition (info)"
    rows += [
        # Two pairs of the case's 32 groups share a log partition (30 logs for 32 threads):
        # each pair's commits take turns on one file, where the baselines have a file per
        # thread; then the same sharing in the baselines (pairs appending to one file).
        at_32(apart, "the case's groups (group-k: 30 log partitions for 32 threads)",
              "many-apart", "many"),
        at_32(apart, own_32, "many-apart", "own"),
        at_32("many groups, 32 threads, commit_sync (info)",
              "32 threads, a lean commit's Python, each writing to its group's log partition's "
              "file (two pairs share one, as in the case)", "many", "ownpy-case"),
        at_32("32 threads, one DSYNC write per commit, each to its group's log partition's "
              "file (info: what the case's sharing costs the disk)", own_32, "own-case", "own"),
        # The same groups in a store of one log partition: their commits share rounds (one
        # write and one sync for many groups) in their log itself, which the store's
        # write-ahead file gives the default's 50 (docs/DESIGN.md, "Many groups: a
        # store-wide write-ahead file").
        at_32(one_log, "the case's groups (group-k: 30 log partitions for 32 threads)",
              "many-one-log", "many"),
        at_32(one_log, own_32, "many-one-log", "own"),
        at_32(batch, own_32 + ", under SCHED_BATCH", "many-batch", "own-batch"),
        at_32(batch, "the same threads under the default policy", "many-batch", "many"),
    ]
    rows += cpu_rows(cpu)
    return rows, raw, series


def cpu_rows(cpu: dict[tuple[str, int], list[dict]]) -> list[Row]:
    """CPU per commit, the process's (issue 25 asks for it at 1 and 32 threads): the engine
    against a thread's own DSYNC write at 1 thread and against the lean commit at 32, the
    user/system split and context switches in the note. Most of it is the kernel's: the
    write itself, and at 32 threads the hand-offs of the GIL (a thread that finds it held
    sleeps)."""

    def med(key: str, n: int, field: str) -> float:
        return median([w[field] for w in cpu[(key, n)]])

    def split(key: str, n: int) -> str:
        return (f"{med(key, n, 'user_us'):.1f} user + {med(key, n, 'system_us'):.1f} system "
                f"µs, {med(key, n, 'voluntary_switches'):.2f} context switches")

    rows = []
    for n, base, what in ((1, "own", "1 thread, own file, one DSYNC write per commit"),
                          (32, "ownpy", "32 threads, own file each, a lean commit's Python")):
        if (base, n) not in cpu:
            continue
        total = {k: med(k, n, "user_us") + med(k, n, "system_us") for k in ("many", base)}
        note = f"median of the windows; offsetlog {split('many', n)}; baseline {split(base, n)}"
        if n > 1 and ("own", n) in cpu:
            note += f"; own file, no Python: {split('own', n)}"
        rows.append(Row(f"many groups, {n} thread{'s' * (n > 1)}, commit_sync: the process's "
                        f"CPU per commit (info)", what, total["many"], total[base], "us",
                        LOWER, note=note))
    return rows
