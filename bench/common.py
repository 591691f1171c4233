"""Measurement helpers shared by the comparative runner and the pytest-benchmark suites.

Every measurement follows three rules:

* baseline and offsetlog run in the same process run, on the same data directory (so the same
  file system and disk), and their samples are interleaved where the case allows it, so drift
  (other load, page cache, thermal) hits both sides alike;
* time comes from ``time.perf_counter_ns``; latencies are summarised by percentiles, never by
  means, and the first samples of every block are discarded as warm-up;
* every case works in its own sub-directory of the data directory, wiped before and removed
  after, whatever happens in between.
"""

from __future__ import annotations

import contextlib
import json
import os
import resource
import shutil
import subprocess
import sys
import threading
import time
from collections.abc import Callable, Iterator

#: the checkout this package runs from, when it is one: results name its git commit
SOURCE_ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))

#: data directory when none is given: under the current directory
DEFAULT_DATA_DIR = os.path.join("data", "bench")


@contextlib.contextmanager
def case_dir(root: str, name: str) -> Iterator[str]:
    """A fresh, empty ``root/name`` for one case; removed afterwards even on error."""
    path = os.path.join(os.path.abspath(root), name)
    shutil.rmtree(path, ignore_errors=True)
    os.makedirs(path)
    try:
        yield path
    finally:
        shutil.rmtree(path, ignore_errors=True)


def percentile(values: list[int] | list[float], q: float) -> float:
    """The ``q``-th percentile (0..100) by linear interpolation between closest ranks."""
    if not values:
        raise ValueError("no samples")
    s = sorted(values)
    if len(s) == 1:
        return float(s[0])
    k = (len(s) - 1) * q / 100.0
    lo = int(k)
    hi = min(lo + 1, len(s) - 1)
    return s[lo] + (s[hi] - s[lo]) * (k - lo)


def median(values) -> float:
    return percentile(list(values), 50)


def measure_latency(ops: dict[str, Callable[[], object]], *, rounds: int, per_round: int,
                    warmup: int) -> dict[str, list[int]]:
    """Per-call latency (ns) of each op, in alternating blocks.

    Each round runs ``warmup + per_round`` calls of every op, one op after the other (the
    order alternates between rounds); the first ``warmup`` calls of each block are dropped.
    """
    names = list(ops)
    samples: dict[str, list[int]] = {n: [] for n in names}
    clock = time.perf_counter_ns
    for r in range(rounds):
        for name in (names if r % 2 == 0 else names[::-1]):
            op = ops[name]
            for _ in range(warmup):
                op()
            out = samples[name]
            for _ in range(per_round):
                t0 = clock()
                op()
                out.append(clock() - t0)
    return samples


def run_threads(n: int, make_op: Callable[[int], tuple[Callable[[], object], Callable[[], None]]],
                *, duration_s: float = 1.0, warmup_s: float = 0.2,
                calls_per_thread: int | None = None, batch: bool = False,
                cpu: dict | None = None) -> tuple[int, int]:
    """Run ``n`` threads that each call their op in a loop; return ``(calls, elapsed_ns)``.

    ``make_op(i)`` runs inside thread ``i`` (so per-thread resources such as a sqlite3
    connection belong to that thread) and returns ``(op, cleanup)``. All threads start
    together. By default calls completed during the first ``warmup_s`` are not counted and the
    window is the next ``duration_s``; with ``calls_per_thread`` each thread makes exactly that
    many calls and the window runs from the common start until the last thread is done.
    With ``batch`` each thread first puts itself under ``SCHED_BATCH``, as ``offsetlog
    serve``'s connection threads do (``connection.no_wakeup_preemption``). ``cpu``, if
    given, is filled with the process's CPU and context switches in the window
    (``window_cpu``).
    """
    counts = [0] * n
    stop = [False]
    errors: list[BaseException] = []
    ready = threading.Barrier(n + 1)
    fixed = calls_per_thread

    def body(i: int) -> None:
        try:
            if batch:
                from offsetlog.server.connection import no_wakeup_preemption
                no_wakeup_preemption()
            op, cleanup = make_op(i)
        except BaseException as e:  # noqa: BLE001 - reported below
            errors.append(e)
            ready.abort()
            return
        try:
            ready.wait()
            if fixed is not None:
                for _ in range(fixed):
                    op()
                counts[i] = fixed
                return
            c = 0
            while not stop[0]:
                op()
                c += 1
                counts[i] = c
        except threading.BrokenBarrierError:
            pass
        except BaseException as e:  # noqa: BLE001 - reported below
            errors.append(e)
        finally:
            cleanup()

    threads = [threading.Thread(target=body, args=(i,), name=f"bench-{i}", daemon=True)
               for i in range(n)]
    for t in threads:
        t.start()
    c0 = c1 = t0 = t1 = 0
    try:
        ready.wait()
    except threading.BrokenBarrierError:
        pass
    try:
        if errors:
            pass
        elif fixed is not None:
            t0, r0 = time.perf_counter_ns(), resource.getrusage(resource.RUSAGE_SELF)
            for t in threads:
                t.join()
            t1, r1 = time.perf_counter_ns(), resource.getrusage(resource.RUSAGE_SELF)
            c1 = sum(counts)
        else:
            time.sleep(warmup_s)
            c0, t0 = sum(counts), time.perf_counter_ns()
            r0 = resource.getrusage(resource.RUSAGE_SELF)
            time.sleep(duration_s)
            c1, t1 = sum(counts), time.perf_counter_ns()
            r1 = resource.getrusage(resource.RUSAGE_SELF)
    finally:
        stop[0] = True
        for t in threads:
            t.join()
    if errors:
        raise RuntimeError(f"a benchmark thread failed: {errors[0]!r}") from errors[0]
    if cpu is not None:
        cpu.update(window_cpu(r0, r1, c1 - c0))
    return c1 - c0, t1 - t0


def window_cpu(r0, r1, calls: int) -> dict:
    """Per call, between two ``getrusage(RUSAGE_SELF)``: the process's user and system CPU
    (µs: every thread's, the kernel's work for them included) and its threads' voluntary
    and involuntary context switches."""
    per = max(calls, 1)
    return {"calls": calls,
            "user_us": (r1.ru_utime - r0.ru_utime) * 1e6 / per,
            "system_us": (r1.ru_stime - r0.ru_stime) * 1e6 / per,
            "voluntary_switches": (r1.ru_nvcsw - r0.ru_nvcsw) / per,
            "involuntary_switches": (r1.ru_nivcsw - r0.ru_nivcsw) / per}


def run_child(module: str, *args: str, timeout: float = 900) -> dict:
    """Run ``python -m module args...`` in a fresh interpreter; return the JSON it prints last."""
    proc = subprocess.run([sys.executable, "-m", module, *args],
                          capture_output=True, text=True, timeout=timeout)
    if proc.returncode != 0:
        raise RuntimeError(f"{module} {' '.join(args)} failed ({proc.returncode}):\n"
                           f"{proc.stderr[-4000:]}")
    lines = [ln for ln in proc.stdout.splitlines() if ln.strip()]
    return json.loads(lines[-1])


def warm_page_cache(root: str) -> int:
    """Read every file under ``root`` once, so every reader after this finds them cached."""
    total = 0
    for dirpath, _, files in os.walk(root):
        for name in files:
            with open(os.path.join(dirpath, name), "rb") as f:
                while chunk := f.read(1 << 22):
                    total += len(chunk)
    return total


def rss_bytes() -> int:
    """Resident set size of this process, from /proc (Linux)."""
    with open("/proc/self/statm") as f:
        return int(f.read().split()[1]) * os.sysconf("SC_PAGE_SIZE")


def cpu_snapshot() -> tuple[float, float]:
    """(busy CPU seconds of the whole machine, CPU seconds of this process and its children)."""
    with open("/proc/stat") as f:
        fields = [int(x) for x in f.readline().split()[1:]]
    ticks = os.sysconf("SC_CLK_TCK")
    idle = fields[3] + (fields[4] if len(fields) > 4 else 0)  # idle + iowait
    t = os.times()
    return (sum(fields) - idle) / ticks, t.user + t.system + t.children_user + t.children_system


def pressure_stall_s() -> dict[str, float]:
    """Seconds (cumulative, since boot) that some task stalled on CPU and on I/O (Linux PSI)."""
    out = {}
    for kind in ("cpu", "io"):
        try:
            with open(f"/proc/pressure/{kind}") as f:
                some = f.readline().split()
            out[kind] = int(some[-1].split("=")[1]) / 1e6
        except (OSError, IndexError, ValueError):
            pass
    return out
