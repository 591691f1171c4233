"""Commit latency with and without a cleaning running on the same store.

A store is filled with a large log (``offsetlog.bench.workload.generate_log``: many keys, so every
cleaning pass has real work: it re-reads every closed segment and rewrites the survivors),
then ``commit_sync`` latency is sampled under ``fsync="always"`` by 1 and by N threads, in
alternating blocks: without compaction, then with a thread running ``store.compact()`` in a
loop. The report says how much of each "with" block a cleaning was actually running (it
must be ~100 % for the comparison to mean anything), how many swaps completed, and how long
swaps waited for the partition's writer.

    python -m offsetlog.bench.compaction_latency --dir data/compaction-latency

Prints a table and, last, one JSON line.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import shutil
import threading
import time

from offsetlog import OffsetStore, TopicPartition
from offsetlog.bench.common import percentile
from offsetlog.bench.workload import generate_log


class CompactionLoop:
    """``store.compact()`` over and over on a thread; records when it was busy."""

    def __init__(self, store: OffsetStore) -> None:
        self.store = store
        self.stop = threading.Event()
        self.passes = 0
        self.busy: list[tuple[float, float]] = []
        self.swaps = 0
        self.errors: list[BaseException] = []
        self.thread = threading.Thread(target=self._run, daemon=True)

    def _run(self) -> None:
        while not self.stop.is_set():
            t0 = time.perf_counter()
            try:
                results = self.store.compact()
            except Exception as e:  # noqa: BLE001 - reported
                self.errors.append(e)
                return
            swapped = sum(len(r.swapped) for r in results)
            if swapped:  # a pass that found nothing to clean is not "cleaning"
                self.busy.append((t0, time.perf_counter()))
            self.passes += 1
            self.swaps += swapped
            # A pause between passes: a loop of empty passes would measure lock and GIL
            # contention of compact() calls, not of cleaning.
            self.stop.wait(0.01)

    def busy_fraction(self, start: float, end: float) -> float:
        """Share of [start, end) during which a compact() call was running (a call still
        running at ``end`` counts up to ``end``)."""
        covered = 0.0
        spans = list(self.busy)
        if self.thread.is_alive() and (not spans or spans[-1][1] < end):
            last_end = spans[-1][1] if spans else start
            spans.append((last_end, end))  # the pass in progress
        for a, b in spans:
            covered += max(0.0, min(b, end) - max(a, start))
        return covered / (end - start)


def sample(store: OffsetStore, threads: int, seconds: float, block: int,
           last: dict[str, int]) -> list[int]:
    """commit_sync latencies (ns) from ``threads`` threads for ``seconds``; ``last`` gets
    each group's last committed offset."""
    out: list[list[int]] = [[] for _ in range(threads)]
    stop = threading.Event()
    barrier = threading.Barrier(threads + 1)

    def body(t: int) -> None:
        group = f"latency-{t}"
        tp = TopicPartition("latency", t)
        clock = time.perf_counter_ns
        mine = out[t]
        barrier.wait()
        i = block * 10_000_000
        while not stop.is_set():
            t0 = clock()
            store.commit_sync(group, {tp: i})
            mine.append(clock() - t0)
            last[group] = i
            i += 1

    ts = [threading.Thread(target=body, args=(t,), daemon=True) for t in range(threads)]
    for t in ts:
        t.start()
    barrier.wait()
    time.sleep(seconds)
    stop.set()
    for t in ts:
        t.join()
    return [x for xs in out for x in xs[5:]]  # drop each thread's first calls (warm-up)


def run(args) -> dict:
    root = os.path.abspath(args.dir)
    shutil.rmtree(root, ignore_errors=True)
    gen = generate_log(root, args.records, groups=args.groups, topics=1,
                       partitions_per_topic=args.partitions_per_group, max_batch=10,
                       segment_bytes=args.segment_bytes, seed=1)
    store = OffsetStore.open(root, segment_bytes=args.segment_bytes, fsync="always",
                             cleaner_backoff_ms=0, retention_check_interval_ms=0)
    waits: list[float] = []
    real_exclusive = store._writer.exclusive

    @contextlib.contextmanager
    def timed_exclusive(part):  # how long each swap waited for the partition's writer
        t0 = time.perf_counter()
        with real_exclusive(part):
            waits.append(time.perf_counter() - t0)
            yield

    store._writer.exclusive = timed_exclusive
    samples: dict[tuple[int, str], list[int]] = {}
    coverage: dict[tuple[int, str], list[float]] = {}
    passes = swaps = 0
    last: dict[str, int] = {}
    try:
        for rep in range(args.repeats):
            for threads in args.threads:
                for mode in ("idle", "compacting") if rep % 2 == 0 else ("compacting", "idle"):
                    loop = None
                    if mode == "compacting":
                        loop = CompactionLoop(store)
                        loop.thread.start()
                        time.sleep(0.5)  # let the pass get going
                    t0 = time.perf_counter()
                    lat = sample(store, threads, args.seconds,
                                 block=len(samples) + 1 + rep * 100, last=last)
                    t1 = time.perf_counter()
                    if loop is not None:
                        coverage.setdefault((threads, mode), []).append(
                            loop.busy_fraction(t0, t1))
                        loop.stop.set()
                        loop.thread.join()
                        if loop.errors:
                            raise loop.errors[0]
                        passes += loop.passes
                        swaps += loop.swaps
                    samples.setdefault((threads, mode), []).extend(lat)
        state_ok = all(store.fetch(g)[TopicPartition("latency", int(g.split("-")[1]))].offset
                       == off for g, off in last.items())
    finally:
        store.close()
    with OffsetStore.open(root, cleaner_backoff_ms=0, retention_check_interval_ms=0) as again:
        state_ok = state_ok and all(
            again.fetch(g)[TopicPartition("latency", int(g.split("-")[1]))].offset == off
            for g, off in last.items())
    rows = {}
    for (threads, mode), lat in sorted(samples.items()):
        rows[f"{threads}t-{mode}"] = {
            "threads": threads, "mode": mode, "commits": len(lat),
            "p50_ms": round(percentile(lat, 50) / 1e6, 3),
            "p99_ms": round(percentile(lat, 99) / 1e6, 3),
            "p999_ms": round(percentile(lat, 99.9) / 1e6, 3),
            "compaction_busy": (round(min(coverage[(threads, mode)]), 3)
                                if (threads, mode) in coverage else None)}
    waits.sort()
    out = {"records": gen["records"], "log_bytes": gen["bytes"], "seconds_per_block": args.seconds,
           "repeats": args.repeats, "compaction_passes": passes, "swaps": swaps,
           "swap_wait_p50_ms": round(percentile(waits, 50) * 1e3, 2) if waits else None,
           "swap_wait_max_ms": round(waits[-1] * 1e3, 2) if waits else None,
           "rows": rows, "state_ok": state_ok}
    if not args.keep:
        shutil.rmtree(root, ignore_errors=True)
    return out


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--dir", default=os.path.join("data", "compaction-latency"))
    p.add_argument("--records", type=int, default=2_000_000)
    p.add_argument("--groups", type=int, default=10_000)
    p.add_argument("--partitions-per-group", type=int, default=50)
    p.add_argument("--segment-bytes", type=int, default=1024 * 1024)
    p.add_argument("--threads", type=int, nargs="+", default=[1, 4])
    p.add_argument("--seconds", type=float, default=4.0, help="per block")
    p.add_argument("--repeats", type=int, default=2)
    p.add_argument("--keep", action="store_true")
    args = p.parse_args(argv)
    out = run(args)
    print(f"{'case':>16} {'commits':>8} {'p50 ms':>8} {'p99 ms':>8} {'p99.9 ms':>9} "
          f"{'cleaning busy':>13}")
    for name, r in out["rows"].items():
        busy = "-" if r["compaction_busy"] is None else f"{r['compaction_busy']:.0%}"
        print(f"{name:>16} {r['commits']:>8} {r['p50_ms']:>8} {r['p99_ms']:>8} "
              f"{r['p999_ms']:>9} {busy:>13}")
    print(f"compaction passes {out['compaction_passes']}, swaps {out['swaps']}, swap wait "
          f"p50 {out['swap_wait_p50_ms']} ms, max {out['swap_wait_max_ms']} ms")
    print(json.dumps(out))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
