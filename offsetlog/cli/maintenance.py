"""The commands that change a store: ``compact``, ``recover`` and ``snapshot``.

Each takes the store's lock (so it refuses a store that is open elsewhere) and opens an
existing store only: pointed at a directory that is not a store (a typo, a fleet's root) it
refuses with an error and creates nothing there.
"""

from __future__ import annotations

import argparse
import os

from offsetlog.cli.output import Output, Styled
from offsetlog.errors import SnapshotError


def open_existing(out: Output, path: str, *, create: bool = False, **options):
    """``OffsetStore.open(path, create=False)`` with the background passes off, showing the
    replay of the log as a progress bar on a terminal. ``create``: a store that does not
    exist yet is made (``users add`` before the first ``serve``)."""
    from offsetlog.recovery.tools.inspect import total_segment_bytes
    from offsetlog.store import OffsetStore
    from offsetlog.store.opening import check_store_path

    check_store_path(path, create=create)  # before the size scan: a clear error, not a guess
    size = total_segment_bytes(path) if os.path.isdir(path) else 0
    with out.progress(size, "opening (replaying the log)") as advance:
        return OffsetStore.open(path, create=create, cleaner_backoff_ms=0,
                                retention_check_interval_ms=0, progress=advance, **options)


# -- compact ------------------------------------------------------------------------------

def cmd_compact(args: argparse.Namespace, out: Output) -> int:
    if args.engine == "spark":
        from offsetlog.cli.spark_cmds import spark_compact
        results = spark_compact(args, out)
    else:
        with open_existing(out, args.dir) as store:
            results = []
            with out.progress(store.partitions, "compacting", unit="items") as advance:
                for p in range(store.partitions):
                    results += store.compact([p])
                    advance(1)
    rows = [{"partition": r.partition, "segments_before": r.segments_before,
             "segments_after": r.segments_after, "bytes_before": r.bytes_before,
             "bytes_after": r.bytes_after, "records_before": r.records_before,
             "records_after": r.records_after, "tombstones_dropped": r.tombstones_dropped,
             "seconds": round(r.duration_s, 3)} for r in results]
    if out.json:
        out.emit_json({"partitions": rows})
        return 0
    columns = ("PARTITION", "SEGMENTS", "BYTES", "RECORDS", "TOMBSTONES-DROPPED", "SECONDS")
    out.table(columns, [[str(r["partition"]),
                         f"{r['segments_before']} -> {r['segments_after']}",
                         f"{r['bytes_before']} -> {r['bytes_after']}",
                         f"{r['records_before']} -> {r['records_after']}",
                         str(r["tombstones_dropped"]), f"{r['seconds']:.3f}"] for r in rows],
              title=f"compact {args.dir}", right=columns)
    before = sum(r["bytes_before"] for r in rows)
    after = sum(r["bytes_after"] for r in rows)
    if not rows:
        out.line("nothing to clean: no partition has a closed segment")
    else:
        out.line(f"closed segments: {before} -> {after} bytes "
                 f"({after / before if before else 1:.1%} kept)")
    return 0


# -- recover ------------------------------------------------------------------------------

def cmd_recover(args: argparse.Namespace, out: Output) -> int:
    """Recover a closed store now (takes its lock). Without --salvage this is exactly what
    ``OffsetStore.open`` does; with it, corrupt regions are cut out of their segments."""
    from offsetlog.recovery.tools import salvage
    from offsetlog.recovery.tools.inspect import total_segment_bytes
    from offsetlog.store.opening import check_store_path

    check_store_path(args.dir, create=False)
    label = "salvaging" if args.salvage else "recovering"
    with out.progress(total_segment_bytes(args.dir), label) as advance:
        report = salvage.recover_store(args.dir, salvage=args.salvage, progress=advance)
    regions = [{"file": os.path.relpath(r.path, args.dir), "position": r.position,
                "bytes": r.bytes_dropped, "reason": r.reason,
                "offsets_lost": None if r.offsets_lost is None else list(r.offsets_lost),
                "action": r.action} for r in report.regions]
    rewritten = [os.path.relpath(p, args.dir) for p in report.rewritten]
    if out.json:
        out.emit_json({"regions": regions, "rewritten": rewritten,
                       "snapshots_removed": report.snapshots_removed,
                       "records": report.records, "batches": report.batches,
                       "bytes_dropped": report.bytes_dropped})
        return 0
    if regions:
        columns = ("FILE", "POSITION", "BYTES", "REASON", "OFFSETS-LOST", "ACTION")
        out.table(columns, [[r["file"], str(r["position"]), str(r["bytes"]), r["reason"],
                             "-" if r["offsets_lost"] is None
                             else f"{r['offsets_lost'][0]}..{r['offsets_lost'][1]}",
                             r["action"]] for r in regions],
                  title=f"recover {args.dir}" + (" --salvage" if args.salvage else ""),
                  right=("POSITION", "BYTES"))
    for path in rewritten:
        out.line(f"rewrote {path} without its corrupt regions")
    if report.snapshots_removed:
        out.line(f"removed {report.snapshots_removed}: snapshots of a salvaged log are stale")
    out.line(f"{report.records} records in {report.batches} batches kept; "
             f"{report.bytes_dropped} bytes dropped in {len(regions)} regions "
             f"({len(rewritten)} segments rewritten)")
    return 0


# -- snapshot -----------------------------------------------------------------------------

def cmd_snapshot(args: argparse.Namespace, out: Output) -> int:
    store = open_existing(out, args.dir, snapshot_interval_records=0, snapshot_interval_ms=0,
                          snapshot_on_close=False)
    rows, failed = [], 0
    with store:
        with out.progress(store.partitions, "snapshotting", unit="items") as advance:
            for p in range(store.partitions):
                try:
                    for r in store.snapshot([p]):
                        rows.append({"partition": p, "offset": r.offset,
                                     "keys": r.keys if r.taken else None,
                                     "bytes": r.bytes if r.taken else None,
                                     "seconds": round(r.duration_s, 3) if r.taken else None,
                                     "status": "written" if r.taken else "up to date"})
                except SnapshotError as e:
                    failed += 1
                    rows.append({"partition": p, "offset": None, "keys": None, "bytes": None,
                                 "seconds": None, "status": f"FAILED: {e.failures.get(p, e)}"})
                advance(1)
    if out.json:
        out.emit_json({"partitions": rows, "failed": failed})
        return 1 if failed else 0
    columns = ("PARTITION", "OFFSET", "KEYS", "BYTES", "SECONDS", "STATUS")
    out.table(columns, [["-" if r[c.lower()] is None else str(r[c.lower()])
                         for c in columns[:-1]]
                        + [Styled(r["status"], "red") if r["status"].startswith("FAILED")
                           else r["status"]] for r in rows],
              title=f"snapshot {args.dir}", right=columns[:-1])
    out.line(f"{len(rows) - failed} partitions snapshotted or up to date, {failed} failed"
             if rows else "nothing to snapshot: every log partition is empty")
    return 1 if failed else 0
