"""The kafka case of ``offsetlog bench`` (bench/kafka.py) runs in a tiny mode and gives its
four rows: offsetlog / Kafka for commits/s from 32 connections and for one connection's p50,
at both durabilities. No assertion on the figures themselves (timings), only that each was
measured."""

from __future__ import annotations

import pytest

from offsetlog.bench.kafka_broker import KafkaUnavailable, check_available
from offsetlog.bench.report import HIGHER, LOWER
from support.client_runners import unavailable

TINY = {"reps": 1, "duration_s": 0.5, "warmup_s": 0.2, "count": 20, "warmup": 5, "rounds": 2}


def test_kafka_bench_case_gives_four_rows(tmp_path):
    try:
        check_available()
    except KafkaUnavailable as e:
        unavailable(str(e))
    from offsetlog.bench.kafka import run_kafka_benchmark

    rows = run_kafka_benchmark(str(tmp_path), sizes=TINY)
    assert [(r.case, r.unit, r.better) for r in rows] == [
        ("kafka: OffsetCommit from 32 connections, offsetlog fsync=interval", "commits/s",
         HIGHER),
        ("kafka: OffsetCommit p50, one connection, offsetlog fsync=interval", "us", LOWER),
        ("kafka: OffsetCommit from 32 connections, offsetlog fsync=always", "commits/s",
         HIGHER),
        ("kafka: OffsetCommit p50, one connection, offsetlog fsync=always", "us", LOWER),
    ]
    assert "defaults" in rows[0].baseline and "flush.messages=1" in rows[2].baseline
    # Kafka ran with the JVM's usual JIT and collector, not the tests' quick-start flags
    for row in (rows[0], rows[2]):
        flags = row.extra["kafka_jvm_flags"]
        assert "-Xmx1g" in flags and not {"-XX:TieredStopAtLevel=1", "-XX:+UseSerialGC"} & set(
            flags), flags
    for row in rows:
        assert row.offsetlog > 0 and row.baseline_value > 0, row
        assert row.ratio == pytest.approx(row.offsetlog / row.baseline_value)


def test_bench_runs_kafka_only_when_named():
    from offsetlog.bench import runner

    assert "kafka" in runner.CASES and "kafka" not in runner.DEFAULT_CASES
