"""``offsetlog report``: one Spark job per command (issue 15, item 15), the same numbers as
``report()``'s DataFrames, --json, and a clear error for a directory without a store."""

import json

from offsetlog import OffsetStore, TopicPartition
from offsetlog.cli import main
from offsetlog.spark.report import collect, report


def _jobs(spark) -> set[int]:
    return set(spark.sparkContext.statusTracker().getJobIdsForGroup(None))


def make_fleet(root, clock):
    for name in ("a", "b"):
        with OffsetStore.open(str(root / name), partitions=2, clock=clock,
                              cleaner_backoff_ms=0, retention_check_interval_ms=0) as s:
            for i in range(5):
                s.commit_sync(f"group-{name}", {TopicPartition("t", i % 2): i})
    return str(root)


def test_report_command_runs_one_spark_job(spark, tmp_path, clock, capsys):
    fleet = make_fleet(tmp_path / "fleet", clock)
    before = _jobs(spark)
    assert main(["report", fleet, "--json"]) == 0
    assert len(_jobs(spark) - before) == 1
    doc = json.loads(capsys.readouterr().out)
    assert sorted(g["group"] for g in doc["groups"]) == ["group-a", "group-b"]
    assert len(doc["log_partitions"]) == 2  # one log partition per store has a log


def test_collect_equals_the_dataframes(spark, tmp_path, clock):
    fleet = make_fleet(tmp_path / "fleet", clock)
    rows = collect(spark, fleet, now_ms=clock())
    rep = report(spark, fleet, now_ms=clock())
    assert [tuple(r) for r in rep.groups.collect()] == rows.groups
    assert [tuple(r) for r in rep.log_partitions.collect()] == rows.log_partitions
    assert collect(spark.sparkContext, fleet, now_ms=clock()) == rows  # a context will do


def test_report_of_a_directory_without_stores_fails_before_spark(tmp_path, capsys):
    (tmp_path / "empty").mkdir()
    assert main(["report", str(tmp_path / "empty")]) == 1
    assert "holds no offsetlog store" in capsys.readouterr().err
