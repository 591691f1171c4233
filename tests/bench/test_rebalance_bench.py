"""The rebalance case of ``offsetlog bench`` (bench/rebalance.py), without Kafka (the kafka
case's test starts a broker already): 10 confluent-kafka members on ``offsetlog serve``, on the
consumer and the classic protocol, each group settling after a join and after a leave (a group
that never settles fails the case). Only that each figure was measured is checked, not what it
is."""

from __future__ import annotations

import pytest

from offsetlog.bench.report import LOWER


def test_rebalance_case_measures_both_protocols(tmp_path):
    pytest.importorskip("confluent_kafka")
    from offsetlog.bench.rebalance import run_rebalance_benchmark

    rows = run_rebalance_benchmark(str(tmp_path), kafka=False, sizes={"reps": 1})
    assert [r.case for r in rows] == [
        "rebalance: the last of 10 joins -> all owned, offsetlog serve, consumer protocol",
        "rebalance: the last of 10 joins -> all owned, consumer protocol, offsetlog",
        "rebalance: the last of 10 joins -> all owned, classic protocol, offsetlog",
        "rebalance: one of 10 leaves -> all owned, offsetlog serve, consumer protocol",
        "rebalance: one of 10 leaves -> all owned, consumer protocol, offsetlog",
        "rebalance: one of 10 leaves -> all owned, classic protocol, offsetlog",
        *(f"rebalance, at a random point of the heartbeat interval: {moment} -> all owned, "
          f"{protocol} protocol, offsetlog"
          for moment in ("the last of 10 joins", "one of 10 leaves")
          for protocol in ("consumer", "classic"))]
    for r in rows:
        assert r.better == LOWER and r.unit == "s" and r.offsetlog > 0, r
    assert rows[0].baseline_value > 0  # the classic protocol's figure
    assert all(r.baseline_value is None for r in rows if "Kafka" in r.baseline)
    assert all(r.target is None for r in rows[6:])  # the random-phase rows: information
