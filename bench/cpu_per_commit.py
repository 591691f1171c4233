"""CPU per commit: user and system microseconds the process spends per ``commit_sync``
(``fsync="always"``, many groups: thread k commits ``group-k``), at 1 and 32 threads.

Issue 25 asks for it before and after the native core; run it against each engine:

    python -m offsetlog.bench.cpu_per_commit [--seconds S] [--dir DIR]
    PYTHONPATH=<checkout of another engine> python bench/cpu_per_commit.py   # (this file)

It prints one line per thread count: commits/s, and user and system CPU per commit (all
threads of the process: the committers', the writer's and the kernel's work for them).
"""

from __future__ import annotations

import argparse
import os
import resource
import tempfile
import threading
import time

import offsetlog
from offsetlog import OffsetStore, TopicPartition


def measure(directory: str, threads: int, seconds: float) -> dict:
    """Commits/s and user/system µs per commit of ``threads`` committers for ``seconds``."""
    store = OffsetStore.open(directory, fsync="always", snapshots=False)
    counts = [0] * threads
    start = threading.Barrier(threads + 1)
    stop_at = [0.0]

    def committer(k: int) -> None:
        tp, group, n = TopicPartition("orders", k % 8), f"group-{k}", 0
        commit = store.commit_sync
        start.wait()
        while time.monotonic() < stop_at[0]:
            commit(group, {tp: n})
            n += 1
        counts[k] = n

    workers = [threading.Thread(target=committer, args=(k,)) for k in range(threads)]
    for w in workers:
        w.start()
    r0, t0 = resource.getrusage(resource.RUSAGE_SELF), time.perf_counter()
    stop_at[0] = time.monotonic() + seconds
    start.wait()
    for w in workers:
        w.join()
    elapsed, r1 = time.perf_counter() - t0, resource.getrusage(resource.RUSAGE_SELF)
    store.close()
    total = max(1, sum(counts))
    return {"threads": threads, "commits_per_s": total / elapsed,
            "user_us": 1e6 * (r1.ru_utime - r0.ru_utime) / total,
            "system_us": 1e6 * (r1.ru_stime - r0.ru_stime) / total}


def main(argv: list[str] | None = None) -> None:
    p = argparse.ArgumentParser(prog="python -m offsetlog.bench.cpu_per_commit")
    p.add_argument("--seconds", type=float, default=5.0)
    p.add_argument("--dir", default=None, help="where the stores go (default: a temp dir)")
    args = p.parse_args(argv)
    engine = os.path.dirname(os.path.dirname(os.path.abspath(offsetlog.__file__)))
    for n in (1, 32):
        with tempfile.TemporaryDirectory(dir=args.dir) as d:
            r = measure(d, n, args.seconds)
        print(f"engine {engine}: {n:2d} threads {r['commits_per_s']:9,.0f} commits/s, "
              f"user {r['user_us']:5.1f} us, system {r['system_us']:5.1f} us per commit")


if __name__ == "__main__":
    main()
