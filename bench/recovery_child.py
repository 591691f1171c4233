"""One side of the recovery case, in a fresh interpreter (``python -m offsetlog.bench.recovery_child``).

Each side runs in its own process so that neither inherits the other's heap (whose size
changes what every garbage collection costs) and both start as a reopening service does.

    python -m offsetlog.bench.recovery_child store|bare|bare-nogc STORE_DIR
    python -m offsetlog.bench.recovery_child lean LEAN_FILE

``lean`` is issue 16's lean replay loop over the same records in its own file
(``baselines.lean_replay``), with the cyclic collector paused as the engine pauses it; ``bare`` a bare loop over the engine's format; ``bare-nogc`` the
bare loop with the cyclic garbage collector paused, as the engine pauses it during recovery.

prints one JSON line: side, records, batches, keys, seconds, records_per_s, peak_rss_bytes.
"""

from __future__ import annotations

import gc
import json
import resource
import sys
import time


def main(argv: list[str]) -> int:
    side, root = argv
    if side == "store":
        from offsetlog import OffsetStore
        t0 = time.perf_counter_ns()
        # snapshots=False: this case measures a full replay (with snapshots, close() would
        # leave one that every later repetition loads instead; see bench/snapshot_reopen.py)
        store = OffsetStore.open(root, snapshots=False)
        elapsed = time.perf_counter_ns() - t0
        report = store.recovery_report
        records, batches = report.records, report.batches
        keys = sum(len(part.table) for part in store._parts)
        if not report.clean:
            raise SystemExit(f"recovery was not clean: {report}")
        store.close()
    elif side == "lean":
        from offsetlog.bench.baselines import lean_replay

        gc.disable()  # as the engine pauses it during recovery: the stronger baseline
        t0 = time.perf_counter_ns()
        records, batches, table = lean_replay(root)
        elapsed = time.perf_counter_ns() - t0
        keys = len(table)
    elif side in ("bare", "bare-nogc"):
        from offsetlog.bench.baselines import bare_replay

        if side == "bare-nogc":
            gc.disable()
        t0 = time.perf_counter_ns()
        records, batches, table = bare_replay(root)
        elapsed = time.perf_counter_ns() - t0
        keys = len(table)
    else:
        raise SystemExit(f"unknown side {side!r}")
    print(json.dumps({"side": side, "records": records, "batches": batches, "keys": keys,
                      "seconds": elapsed / 1e9, "records_per_s": records / (elapsed / 1e9),
                      "peak_rss_bytes": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
                      * 1024}))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
