"""Transactional commits per second against plain ``commit_sync`` of the same offsets.

Each operation commits 10 offsets (thread i owns topic partitions 10i .. 10i+9 of one group):

* ``txn``:   ``begin(); commit_offsets(group, offsets); commit()`` on the thread's own
  transactional id. With fsync="always" that is 4 synchronous writes, each its own fsync
  unless group commit merges it with another thread's: the Ongoing state (carrying the last
  transaction's CompleteCommit), the offsets, PrepareCommit, the marker;
* ``plain``: ``commit_sync(group, offsets)``: one write, one fsync.

Both run in the same process and the same run, alternating ``--reps`` times, 1 and 8 threads.

    python -m offsetlog.bench.transactions [--duration 3] [--reps 3] [--dir DIR] [--json PATH]
"""

from __future__ import annotations

import argparse
import itertools
import json
import os
import statistics
import tempfile

from offsetlog import OffsetStore, TopicPartition
from offsetlog.bench.common import case_dir, run_threads

GROUP = "bench-txn-group"
TOPIC = "bench-topic"
OFFSETS_PER_TXN = 10


def _offsets(thread: int) -> list[TopicPartition]:
    return [TopicPartition(TOPIC, thread * OFFSETS_PER_TXN + k) for k in range(OFFSETS_PER_TXN)]


def run_case(path: str, kind: str, threads: int, *, duration_s: float, warmup_s: float) -> float:
    """Operations (each: 10 offsets) per second."""
    store = OffsetStore.open(path, fsync="always", retention_check_interval_ms=0,
                             cleaner_backoff_ms=0)
    try:
        def make_op(i: int):
            tps = _offsets(i)
            counter = itertools.count(1)
            if kind == "plain":
                def op() -> None:
                    n = next(counter)
                    store.commit_sync(GROUP, {tp: n for tp in tps})
            else:
                txn = store.init_transactions(f"bench-txn-{i}")

                def op() -> None:
                    n = next(counter)
                    txn.begin()
                    txn.commit_offsets(GROUP, {tp: n for tp in tps})
                    txn.commit()
            return op, lambda: None

        calls, ns = run_threads(threads, make_op, duration_s=duration_s, warmup_s=warmup_s)
    finally:
        store.close()
    return calls / (ns / 1e9)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--duration", type=float, default=3.0, help="seconds per measurement")
    parser.add_argument("--warmup", type=float, default=0.5)
    parser.add_argument("--reps", type=int, default=3)
    parser.add_argument("--threads", default="1,8")
    parser.add_argument("--dir", default=None, help="where stores are created (a real disk)")
    parser.add_argument("--json", default=None)
    args = parser.parse_args(argv)
    root = args.dir or tempfile.mkdtemp(prefix="offsetlog-bench-txn-", dir=os.getcwd())
    results: dict[str, dict[str, list[float]]] = {}
    for n in [int(x) for x in args.threads.split(",")]:
        for rep in range(args.reps):
            for kind in ("plain", "txn"):  # alternate so drift hits both alike
                with case_dir(root, f"{kind}-{n}-{rep}") as d:
                    v = run_case(os.path.join(d, "store"), kind, n, duration_s=args.duration,
                                 warmup_s=args.warmup)
                results.setdefault(str(n), {}).setdefault(kind, []).append(v)
                print(f"threads={n} rep={rep} {kind}: {v:,.0f} commits/s", flush=True)
    print()
    # Each repetition measures both back to back: the ratio within a pair is robust to the
    # drift of a shared disk, which moves both sides of a pair alike.
    print(f"{'threads':>7}  {'plain commit_sync/s':>20}  {'transactions/s':>15}  "
          f"{'txn/plain':>9}  {'paired':>7}")
    for n, r in results.items():
        plain, txn = statistics.median(r["plain"]), statistics.median(r["txn"])
        paired = statistics.median(t / p for t, p in zip(r["txn"], r["plain"]))
        print(f"{n:>7}  {plain:>20,.0f}  {txn:>15,.0f}  {txn / plain:>9.3f}  {paired:>7.3f}")
    if args.json:
        with open(args.json, "w") as f:
            json.dump({"offsets_per_commit": OFFSETS_PER_TXN, "fsync": "always",
                       "results": results}, f, indent=2)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
