"""Compaction ratio on a realistic workload: how much of a long-lived log the cleaner keeps.

A fleet of ``--groups`` consumer groups, each consuming one topic of
``--partitions-per-group`` partitions, commits ``--records`` offsets (each commit carries
1..``--max-batch`` consecutive partitions of its group, groups take turns), written straight
into segment files by ``offsetlog.bench.workload.generate_log`` (the engine's own framing). Then the
store is opened (full replay), ``store.compact()`` cleans every log partition's closed
segments, and the committed state is compared before, after and after a reopen.

    python -m offsetlog.bench.compaction_ratio --dir data/ratio            # 1 000 x 50, 10 000 000
    python -m offsetlog.bench.compaction_ratio --records 200000 --dir /tmp/r   # a quick look

Prints a table and, last, one JSON line with every figure.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import time

from offsetlog import OffsetStore
from offsetlog.bench.workload import generate_log


def state(store: OffsetStore) -> dict:
    return {g: store.fetch(g) for g in store.groups()}


def segment_bytes_on_disk(root: str) -> tuple[int, int]:
    """(bytes, segment files) under ``root``."""
    total = files = 0
    for dirpath, _, names in os.walk(root):
        for n in names:
            if n.endswith(".log"):
                total += os.path.getsize(os.path.join(dirpath, n))
                files += 1
    return total, files


def run(args) -> dict:
    root = os.path.abspath(args.dir)
    shutil.rmtree(root, ignore_errors=True)
    t0 = time.perf_counter()
    gen = generate_log(root, args.records, groups=args.groups, topics=1,
                       partitions_per_topic=args.partitions_per_group, max_batch=args.max_batch,
                       segment_bytes=args.segment_bytes, seed=args.seed)
    generate_s = time.perf_counter() - t0
    bytes_before, files_before = segment_bytes_on_disk(root)
    opts = dict(segment_bytes=args.segment_bytes, cleaner_backoff_ms=0,
                retention_check_interval_ms=0)
    t0 = time.perf_counter()
    store = OffsetStore.open(root, **opts)
    open_s = time.perf_counter() - t0
    try:
        before = state(store)
        keys = sum(len(v) for v in before.values())
        t0 = time.perf_counter()
        results = store.compact()
        compact_s = time.perf_counter() - t0
        after = state(store)
    finally:
        store.close()
    bytes_after, files_after = segment_bytes_on_disk(root)
    t0 = time.perf_counter()
    with OffsetStore.open(root, **opts) as again:
        reopen_s = time.perf_counter() - t0
        reopened = state(again)
        records_after_all = again.recovery_report.records
    closed_before = sum(r.bytes_before for r in results)
    closed_after = sum(r.bytes_after for r in results)
    out = {
        "records": gen["records"], "batches": gen["batches"], "keys": keys,
        "groups": args.groups, "partitions_per_group": args.partitions_per_group,
        "segment_bytes": args.segment_bytes,
        "log_bytes_before": bytes_before, "log_bytes_after": bytes_after,
        "segment_files_before": files_before, "segment_files_after": files_after,
        "closed_bytes_before": closed_before, "closed_bytes_after": closed_after,
        "closed_records_before": sum(r.records_before for r in results),
        "closed_records_after": sum(r.records_after for r in results),
        "records_after_reopen": records_after_all,
        "ratio_closed": closed_after / closed_before if closed_before else 1.0,
        "ratio_log": bytes_after / bytes_before if bytes_before else 1.0,
        "generate_s": round(generate_s, 2), "open_s": round(open_s, 2),
        "compact_s": round(compact_s, 2), "reopen_s": round(reopen_s, 2),
        "compact_mb_per_s": round(closed_before / 1e6 / compact_s, 1) if compact_s else None,
        "state_unchanged": before == after == reopened,
    }
    if not args.keep:
        shutil.rmtree(root, ignore_errors=True)
    return out


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--dir", default=os.path.join("data", "compaction-ratio"))
    p.add_argument("--records", type=int, default=10_000_000)
    p.add_argument("--groups", type=int, default=1000)
    p.add_argument("--partitions-per-group", type=int, default=50)
    p.add_argument("--max-batch", type=int, default=10,
                   help="offsets per commit are uniform in 1..N")
    p.add_argument("--segment-bytes", type=int, default=4 * 1024 * 1024)
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--keep", action="store_true", help="keep the store directory")
    args = p.parse_args(argv)
    out = run(args)
    for k, v in out.items():
        print(f"{k:>24}: {v}")
    print(json.dumps(out))
    return 0 if out["state_unchanged"] else 1


if __name__ == "__main__":
    raise SystemExit(main())
