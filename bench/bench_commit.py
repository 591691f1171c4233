"""Commit paths, offsetlog beside its baseline (same cases as ``offsetlog.bench.runner``, small sizes).

Compare the pairs in pytest-benchmark's table (``--benchmark-group-by=group``); nothing here
asserts a time.
"""

from __future__ import annotations

import os

import pytest

from offsetlog.bench import baselines, cases
from offsetlog.bench.workload import framed_commit

THREADS = [8, 32]
ASYNC_KEYS = [(f"bench-topic-{t}", p) for t in range(10) for p in range(100)]


# -- 1. one commit_sync against one append + fsync --------------------------------------------

@pytest.mark.benchmark(group="latency: 1 thread, fsync per commit")
def test_bare_append_fsync(benchmark, bench_dir):
    op, close = baselines.bare_append_fsync(os.path.join(bench_dir, "bare.log"), framed_commit())
    try:
        benchmark.pedantic(op, rounds=300, iterations=1, warmup_rounds=30)
    finally:
        close()


@pytest.mark.benchmark(group="latency: 1 thread, fsync per commit")
def test_commit_sync(benchmark, bench_dir):
    store = cases.open_store(os.path.join(bench_dir, "store"))
    try:
        benchmark.pedantic(cases.commit_sync_op(store), rounds=300, iterations=1,
                           warmup_rounds=30)
    finally:
        store.close()


# -- 2. N threads: a fixed number of commits shared by the threads -------------------------

COMMITS = 1600  # per round, over all threads
SQLITE_COMMITS = 320  # sqlite3 at 32 threads manages ~200 commits/s on this kind of disk


def _rounds(benchmark, fn, commits: int) -> None:
    rates: list[float] = []
    benchmark.pedantic(lambda: rates.append(fn()), rounds=3, iterations=1)
    benchmark.extra_info["commits"] = commits
    benchmark.extra_info["commits_per_s"] = sorted(rates)[len(rates) // 2]


@pytest.mark.parametrize("n", THREADS)
@pytest.mark.benchmark(group="threads: 1600 commits")
def test_lock_fsync_threads(benchmark, bench_dir, n):
    path = os.path.join(bench_dir, "lock.log")
    data = framed_commit()
    _rounds(benchmark, lambda: baselines.lock_fsync_threads(
        path, n, data, calls_per_thread=COMMITS // n), COMMITS)


@pytest.mark.parametrize("one_group", [True, False], ids=["one-group", "group-per-thread"])
@pytest.mark.parametrize("n", THREADS)
@pytest.mark.benchmark(group="threads: 1600 commits")
def test_commit_sync_threads(benchmark, bench_dir, n, one_group):
    runs = iter(range(100))

    def window() -> float:
        # a fresh store directory per round (a store directory is open in one place at a time)
        path = os.path.join(bench_dir, f"store-{next(runs)}")
        return cases.commit_sync_threads(path, n, one_group=one_group,
                                         calls_per_thread=COMMITS // n)

    _rounds(benchmark, window, COMMITS)


@pytest.mark.parametrize("n", THREADS)
@pytest.mark.benchmark(group="threads: sqlite3, 320 commits")
def test_sqlite_threads(benchmark, bench_dir, n):
    path = os.path.join(bench_dir, "offsets.db")
    _rounds(benchmark, lambda: baselines.sqlite_threads(
        path, n, calls_per_thread=SQLITE_COMMITS // n), SQLITE_COMMITS)


# -- 3. async: records through the whole pipeline ---------------------------------------------

ASYNC_RECORDS = 10_000


@pytest.mark.benchmark(group="async: 10k records, 1 offset per record")
def test_lean_pipeline(benchmark, bench_dir):
    path = os.path.join(bench_dir, "bare.log")
    benchmark.pedantic(lambda: baselines.lean_pipeline(path, ASYNC_RECORDS, ASYNC_KEYS),
                       rounds=3, iterations=1)


@pytest.mark.benchmark(group="async: 10k records, 1 offset per record")
def test_commit_async(benchmark, bench_dir):
    runs = iter(range(100))

    def run() -> float:
        path = os.path.join(bench_dir, f"store-{next(runs)}")
        return cases.commit_async_stream(path, ASYNC_RECORDS, ASYNC_KEYS, warmup=200)

    benchmark.pedantic(run, rounds=3, iterations=1)
