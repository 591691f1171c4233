"""Recovery and memory, offsetlog beside its baseline (same cases as ``offsetlog.bench.runner``, small).

Recovery runs in-process here (pytest-benchmark times a callable); the runner uses a fresh
process per run. Memory is a single measurement per side, reported in extra_info.
"""

from __future__ import annotations

import os
import shutil

import pytest

from offsetlog import OffsetStore
from offsetlog.bench import baselines
from offsetlog.bench.common import DEFAULT_DATA_DIR, run_child, warm_page_cache
from offsetlog.bench.workload import generate_log

RECORDS = 200_000


@pytest.fixture(scope="module")
def log_dir():
    root = os.environ.get("OFFSETLOG_BENCH_DIR") or os.path.join(
        os.path.dirname(DEFAULT_DATA_DIR), "bench-pytest")
    path = os.path.abspath(os.path.join(root, "recovery-log"))
    shutil.rmtree(path, ignore_errors=True)
    shape = generate_log(path, RECORDS, groups=1000, topics=10, partitions_per_topic=10)
    warm_page_cache(path)
    yield path, shape
    shutil.rmtree(path, ignore_errors=True)
    try:
        os.rmdir(os.path.abspath(root))  # only if empty
    except OSError:
        pass


@pytest.mark.benchmark(group=f"recovery: {RECORDS:,} records")
def test_bare_replay(benchmark, log_dir):
    path, shape = log_dir
    records, _, _ = benchmark.pedantic(baselines.bare_replay, args=(path,), rounds=3,
                                       iterations=1)
    assert records == shape["records"]


@pytest.mark.benchmark(group=f"recovery: {RECORDS:,} records")
def test_store_reopen(benchmark, log_dir):
    path, shape = log_dir

    def reopen() -> int:
        store = OffsetStore.open(path, snapshots=False)  # a full replay every round
        try:
            return store.recovery_report.records
        finally:
            store.close()

    assert benchmark.pedantic(reopen, rounds=3, iterations=1) == shape["records"]


@pytest.mark.parametrize("side", ["dict", "table"])
@pytest.mark.benchmark(group="memory: 100,000 keys (RSS delta in extra_info)")
def test_memory(benchmark, side):
    result = benchmark.pedantic(run_child, args=("offsetlog.bench.memory_child", side, "100", "10", "100"),
                                rounds=1, iterations=1)
    benchmark.extra_info.update(result)
    benchmark.extra_info["rss_delta_mib"] = result["rss_delta"] / 2**20
