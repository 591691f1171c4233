"""offsetlog.spark.report against a plain-Python computation over the engine's own reader,
and its reclaimable_now against what a real cleaning of a copy of the store drops."""

import os
from collections import Counter, defaultdict

import pytest

from offsetlog import OffsetStore, TopicPartition
from offsetlog.compaction.rules import record_key as cleaner_key
from offsetlog.group.expiry import RetentionView, expired_offsets
from offsetlog.log.format import Attribute
from offsetlog.log.naming import list_partition_dirs
from offsetlog.log.records import OFFSET_COMMIT, TRANSACTION_STATE, commit_entry, record_group
from offsetlog.recovery.swap import plan_swaps
from offsetlog.recovery.tools.inspect import iter_records, scan
from offsetlog.spark.report import report
from support.groups import form_group
from support.spark_report import MIN, cleaned_copy, dead_records
from support.stores import open_group_store as open_store

pytestmark = pytest.mark.spark
RETENTION = 10 * MIN
CHECK = 1 * MIN


def build(path, clock):
    """Standalone groups, a Stable consumer group, deletes, and one compaction (horizons)."""
    with open_store(path, clock, segment_bytes=1024, retention_ms=RETENTION) as s:
        gen, (member,) = form_group(s, clock, group="managed", topics=("orders",))
        for i in range(40):
            clock.advance(5_000)  # within the member's session: commits keep it alive
            offsets = {TopicPartition("orders", 0): i}
            if i < 20:
                offsets[TopicPartition("legacy", 0)] = i  # a topic it no longer reads
            s.commit_sync("managed", offsets, generation_id=gen, member_id=member)
            s.commit_sync(f"solo-{i % 3}", {TopicPartition("t", i % 4): i})
            if i == 20:
                s.delete_offsets("solo-1", [TopicPartition("t", 1)])
        s.delete_group("solo-2")
        s.compact()  # stamps delete horizons on the tombstones it keeps
        for i in range(30):  # new closed segments, with records a cleaning would drop
            s.commit_sync(f"solo-{i % 2}", {TopicPartition("t", i % 2): i})
        s.commit_sync("late", {TopicPartition("t", 0): 1})
        s.commit_sync("solo-0", {TopicPartition("t", 3): 99})
        assert s.describe_group("managed").state == "Stable"
    # the report looks at the store later: the next check is just under RETENTION after the
    # last commits, past it for the early ones
    return clock.now + RETENTION - CHECK - 30_000


def expected(path, now, tmp):
    path = os.path.abspath(path)
    recs = list(iter_records(path))
    _, tables = scan(path, salvage=False, tables=True)
    parts = {}
    by_lp = defaultdict(list)
    for p, seg, batch, off, r in recs:
        by_lp[p].append((seg, batch, off, r))
    cleaned = cleaned_copy(path, now, tmp)
    for p, directory in list_partition_dirs(path):
        rows = by_lp[p]
        parts[p] = dict(records=len(rows), dead_records=dead_records(rows),
                        reclaimable_now=cleaned[p][0],
                        tombstones=sum(r[4] is None for *_, r in rows),
                        segments=len(plan_swaps(directory).segments))
    commits = [(record_group(r), commit_entry(r[2], r[4])[3]) for *_, r in recs
               if r[1] == OFFSET_COMMIT and r[4] is not None]
    times = [t for _, t in commits]
    span_min = max(max(times) - min(times), MIN) / MIN
    count = Counter(g for g, _ in commits)
    groups = {}
    for lp, table in tables.items():
        names = {record_group(r) for q, *_, r in recs if q == lp and record_group(r)}
        for g in names:
            entries = dict(table.group_entries(g))
            view = RetentionView.of_value(table.group_metadata.get(g))
            groups[g] = dict(
                log_partition=lp, partitions=len(entries), commits=count[g],
                last_commit_timestamp=max((t for h, t in commits if h == g), default=None),
                commits_per_minute=count[g] / span_min,
                expiring_next_check=len(expired_offsets(view, entries, now + CHECK, RETENTION)))
    return groups, parts, cleaned


def test_report_numbers_match_a_plain_computation(spark, tmp_path, clock):
    store = str(tmp_path / "s")
    now = build(store, clock)
    rep = report(spark, store, now_ms=now, retention_ms=RETENTION,
                 retention_check_interval_ms=CHECK)
    groups = {r["group"]: r.asDict() for r in rep.groups.collect()}
    parts = {r["log_partition"]: r.asDict() for r in rep.log_partitions.collect()}
    want_groups, want_parts, _ = expected(store, now, str(tmp_path))
    assert set(groups) == set(want_groups) == {"managed", "solo-0", "solo-1", "solo-2", "late"}
    for g, want in want_groups.items():
        got = groups[g]
        for k, v in want.items():
            assert got[k] == pytest.approx(v), (g, k)
    for p, want in want_parts.items():
        for k, v in want.items():
            assert parts[p][k] == v, (p, k)
        assert parts[p]["dead_share"] == pytest.approx(want["dead_records"] / want["records"])
    # the scenario exercises what it should
    assert groups["managed"]["expiring_next_check"] == 1  # legacy-0: not subscribed
    assert groups["solo-2"]["partitions"] == 0
    assert groups["late"]["expiring_next_check"] == 0
    assert groups["solo-0"]["expiring_next_check"] >= 1
    assert sum(p["tombstones"] for p in parts.values()) > 0
    assert any(p["reclaimable_now"] for p in parts.values())


def test_cli_report_prints_and_writes_parquet(spark, tmp_path, clock, capsys):
    from offsetlog.cli import main
    for name in ("a", "b"):
        with OffsetStore.open(str(tmp_path / "fleet" / name), partitions=2, clock=clock,
                              cleaner_backoff_ms=0, retention_check_interval_ms=0) as s:
            s.commit_sync(f"group-{name}", {TopicPartition("t", 0): 1})
    out = tmp_path / "out"
    assert main(["report", str(tmp_path / "fleet"), "--engine", "spark",
                 "--out", str(out)]) == 0
    text = capsys.readouterr().out
    assert "group-a" in text and "group-b" in text
    back = spark.read.parquet(str(out / "groups")).collect()
    assert sorted(r["group"] for r in back) == ["group-a", "group-b"]
    assert spark.read.parquet(str(out / "log_partitions")).count() == 2


def build_with_transactions(path, clock):
    """Transactions committed and aborted (their TRANSACTION_STATE records superseded many
    times in closed segments), plain commits racing them, a compaction stamping horizons that
    have passed by the report's time, and a transaction left undecided under later commits."""
    with open_store(path, clock, segment_bytes=1024, delete_retention_ms=MIN,
                    transaction_check_interval_ms=0) as s:
        for round_ in range(2):
            for i in range(12):
                clock.advance(1_000)
                txn = s.init_transactions(f"tx-{i % 3}")
                txn.begin()
                txn.commit_offsets(f"tg-{i % 2}", {TopicPartition("in", i % 3): 10 * i + round_})
                s.commit_sync(f"tg-{(i + 1) % 2}", {TopicPartition("in", i % 3): i})
                txn.commit() if i % 4 != 3 else txn.abort()
            s.delete_group("tg-1")
            for j in range(20):  # closes the tombstones' segment (the group's log partition)
                s.commit_sync("tg-1", {TopicPartition("pad", 0): j})
            s.compact()  # stamps horizons (now + 1 min) on tombstones and spent markers
            clock.advance(2 * MIN)
        txn = s.init_transactions("tx-open")
        txn.begin()
        txn.commit_offsets("open", {TopicPartition("in", 0): 1})
        for i in range(30):  # closes the undecided transaction's segment
            s.commit_sync("open", {TopicPartition("other", i % 2): i})
        for i in range(8):  # more superseded TRANSACTION_STATE records after the cut
            s.init_transactions(f"tx-{i % 3}")
    return clock.now


def test_transactions_are_counted_as_a_cleaning_drops_them(spark, tmp_path, clock):
    store = str(tmp_path / "s")
    now = build_with_transactions(store, clock)
    rep = report(spark, store, now_ms=now)
    parts = {r["log_partition"]: r.asDict() for r in rep.log_partitions.collect()}
    _, want_parts, cleaned = expected(store, now, str(tmp_path))
    for p, want in want_parts.items():
        for k, v in want.items():
            assert parts[p][k] == v, (p, k)
    # the scenario exercises what it should: superseded TRANSACTION_STATE records in closed
    # segments, aborted records, spent markers past their horizon, the cut before tx-open
    recs = list(iter_records(os.path.abspath(store)))
    states = Counter((p, cleaner_key(r)) for p, *_, r in recs if r[1] == TRANSACTION_STATE)
    assert max(states.values()) > 2
    copy = os.path.join(str(tmp_path), "cleaned-copy")
    after = Counter(p for p, *_, r in iter_records(copy) if r[1] == TRANSACTION_STATE)
    before = Counter(p for p, *_, r in recs if r[1] == TRANSACTION_STATE)
    assert any(after[p] < before[p] for p in before)  # the cleaning drops some
    assert any(r.markers_dropped for _, r in cleaned.values())
    assert any(r.tombstones_dropped for _, r in cleaned.values())
    assert any(r.first_unstable_offset is not None for _, r in cleaned.values())
    assert any(batch.attributes & Attribute.SEMANTIC and not batch.attributes & Attribute.CONTROL
               and r[4] is not None for *_, batch, _, r in recs)
