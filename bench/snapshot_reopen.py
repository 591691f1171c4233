"""Reopen with a snapshot vs. a full replay of the same log (issue 3, item 7).

Target: reopening a store whose log holds 5,000,000 records over 200,000 keys, with a
snapshot taken at 99% of the log, takes <= 0.2x the time of a full replay of the same log.

    python -m offsetlog.bench.snapshot_reopen [--records N] [--reps R] [--dir DIR]

Build: the recovery benchmark's generator writes 99% of the records straight into segment
files (2,000 groups x 10 topics x 10 partitions = 200,000 keys, 1-4 offsets per commit); a
store opens it (full replay), snapshots every log partition, and commits the last 1% through
the normal API (fsync="never", then flush). Measure: each reopen runs in a fresh interpreter
(``--child``), the two sides alternating; the full replay opens with the snapshot directory
moved aside, so both read the same log from a warm page cache. Both sides must end with the
same tables (a digest is compared). Prints one JSON line; the ratio is the median of the
snapshot side over the median of the full side.
"""

from __future__ import annotations

import argparse
import gc
import hashlib
import json
import os
import shutil
import sys
import time

from offsetlog.bench.common import DEFAULT_DATA_DIR, median, run_child, warm_page_cache
from offsetlog.bench.workload import generate_log, group_name, topic_name

GROUPS, TOPICS, PARTITIONS_PER_TOPIC = 2000, 10, 10  # 200,000 keys
TARGET = 0.2  # <= : snapshot reopen / full replay
QUIET = dict(retention_check_interval_ms=0, cleaner_backoff_ms=0, snapshot_interval_records=0,
             snapshot_interval_ms=0, snapshot_on_close=False)


def build(root: str, records: int, log=print) -> dict:
    """The store of the case: 99% generated, snapshot, 1% committed after it."""
    from offsetlog import OffsetStore, TopicPartition
    head = records * 99 // 100
    t0 = time.perf_counter()
    shape = generate_log(root, head, groups=GROUPS, topics=TOPICS,
                         partitions_per_topic=PARTITIONS_PER_TOPIC)
    log(f"snapshot_reopen: generated {head:,} records in {time.perf_counter() - t0:.1f}s")
    t0 = time.perf_counter()
    with OffsetStore.open(root, fsync="never", **QUIET) as store:
        taken = store.snapshot()
        log(f"snapshot_reopen: opened and snapshotted {len(taken)} partitions in "
            f"{time.perf_counter() - t0:.1f}s")
        # the last 1%, two offsets per commit, through the normal write path
        tail = records - head
        i = 0
        while i < tail:
            g = i // 2 % GROUPS
            k = i % (TOPICS * PARTITIONS_PER_TOPIC)
            offsets = {TopicPartition(topic_name(k // PARTITIONS_PER_TOPIC),
                                      k % PARTITIONS_PER_TOPIC): 5_000_000 + i}
            if i + 1 < tail:
                k2 = (k + 1) % (TOPICS * PARTITIONS_PER_TOPIC)
                offsets[TopicPartition(topic_name(k2 // PARTITIONS_PER_TOPIC),
                                       k2 % PARTITIONS_PER_TOPIC)] = 5_000_000 + i
            store.commit_sync(group_name(g), offsets)
            i += len(offsets)
        store.flush()
        snapshot_offsets = sum(r.offset for r in taken)
    return {**shape, "records": records, "snapshot_records": snapshot_offsets,
            "tail_records": records - head}


def child(side: str, root: str) -> dict:
    """One timed reopen, in this (fresh) process."""
    from offsetlog import OffsetStore
    t0 = time.perf_counter_ns()
    store = OffsetStore.open(root, snapshots=(side == "snapshot"), **QUIET)
    elapsed = (time.perf_counter_ns() - t0) / 1e9
    report = store.recovery_report
    try:
        if side == "snapshot" and (report.snapshots_discarded or not report.snapshots_loaded):
            raise SystemExit(f"the snapshot side did not use its snapshots: {report}")
        if side == "full" and report.snapshots_loaded:
            raise SystemExit("the full side loaded snapshots")
        gc.disable()
        digest = hashlib.sha256()
        keys = 0
        for part in store._parts:
            items = sorted(part.table.items())
            keys += len(items)
            digest.update(repr(items).encode())
    finally:
        store.close()
    return {"side": side, "seconds": elapsed, "records_replayed": report.records,
            "bytes_read": report.bytes_read, "keys": keys, "digest": digest.hexdigest()}


def run(root: str, records: int, reps: int, log=print) -> dict:
    """Build the case in ``root`` (emptied first) and time both sides ``reps`` times."""
    shutil.rmtree(root, ignore_errors=True)
    os.makedirs(root)
    shape = build(root, records, log)
    warm_page_cache(root)
    snaps = os.path.join(root, "snapshots")
    aside = os.path.join(os.path.dirname(root), os.path.basename(root) + "-snapshots-aside")
    runs: dict[str, list[dict]] = {"snapshot": [], "full": []}
    for r in range(reps):
        for side in (("snapshot", "full") if r % 2 == 0 else ("full", "snapshot")):
            if side == "full":
                os.rename(snaps, aside)
            try:
                res = run_child("offsetlog.bench.snapshot_reopen", "--child", side, root)
            finally:
                if side == "full":
                    os.rename(aside, snaps)
            runs[side].append(res)
        log(f"snapshot_reopen rep {r}: snapshot {runs['snapshot'][-1]['seconds']:.3f}s, "
            f"full {runs['full'][-1]['seconds']:.3f}s")
    if len({res["digest"] for v in runs.values() for res in v}) != 1:
        raise RuntimeError("snapshot_reopen: the two sides ended with different tables")
    med = {k: median([res["seconds"] for res in v]) for k, v in runs.items()}
    return {"log": shape, "runs": runs, "median_s": med, "ratio": med["snapshot"] / med["full"],
            "target": TARGET, "keys": runs["full"][0]["keys"]}


def main(argv: list[str] | None = None) -> int:
    argv = sys.argv[1:] if argv is None else argv
    if argv[:1] == ["--child"]:
        print(json.dumps(child(argv[1], argv[2])))
        return 0
    p = argparse.ArgumentParser(prog="python -m offsetlog.bench.snapshot_reopen",
                                description=__doc__.split("\n")[0])
    p.add_argument("--records", type=int, default=5_000_000)
    p.add_argument("--reps", type=int, default=5)
    p.add_argument("--dir", default=os.path.join(DEFAULT_DATA_DIR, "snapshot_reopen"))
    args = p.parse_args(argv)
    root = os.path.abspath(args.dir)
    try:
        result = run(root, args.records, args.reps, log=lambda m: print(m, file=sys.stderr))
    finally:
        shutil.rmtree(root, ignore_errors=True)
    print(json.dumps(result))
    print(f"snapshot reopen / full replay = {result['ratio']:.3f} (target <= {TARGET}); "
          f"medians {result['median_s']['snapshot']:.3f}s vs {result['median_s']['full']:.3f}s",
          file=sys.stderr)
    return 0


if __name__ == "__main__":
    sys.exit(main())
