"""offsetlog export and import (issue 29, part 1): committed offsets out as csv or JSON lines,
in through the store's commit path, groups with live members refused."""

import json
import os

from cli.conftest import build_group_store
from offsetlog import OffsetAndMetadata, TopicPartition
from offsetlog.cli import main
from support.stores import open_store

T = [TopicPartition("orders", p) for p in range(3)]


def _populate(path):
    with open_store(path, partitions=3) as s:
        s.commit_sync("alpha", {T[0]: 5, T[1]: OffsetAndMetadata(9, "note,with \"quotes\"", 3)})
        s.commit_sync("beta", {TopicPartition("clicks", 2): 11})
        s.commit_sync("gamma/one", {T[2]: 1})
        txn = s.init_transactions("tx")
        txn.begin()
        txn.commit_offsets("alpha", {T[2]: 77})  # left open: pending, never exported
        txn.commit_offsets("pending-only", {T[0]: 3})


def _fetch_all(path):
    with open_store(path) as s:
        return {g: s.fetch(g) for g in s.groups() if s.fetch(g)}


def test_export_csv_is_group_topic_partition_offset_and_says_what_it_left_out(tmp_path, capsys):
    src = str(tmp_path / "src")
    _populate(src)
    assert main(["export", src]) == 0
    out, err = capsys.readouterr()
    assert sorted(out.splitlines()) == ["alpha,orders,0,5", "alpha,orders,1,9",
                                        "beta,clicks,2,11", "gamma/one,orders,2,1"]
    assert "2 pending transactional offsets not exported" in err
    assert "alpha" in err and "pending-only" in err


def test_export_per_group_files_in_a_directory(tmp_path, capsys):
    src, outdir = str(tmp_path / "src"), tmp_path / "out"
    _populate(src)
    outdir.mkdir()
    assert main(["export", src, "-o", str(outdir), "--group", "alpha", "--group",
                 "gamma/one"]) == 0
    assert sorted(os.listdir(outdir)) == ["alpha.csv", "gamma%2Fone.csv"]
    assert (outdir / "alpha.csv").read_text().splitlines() == ["orders,0,5", "orders,1,9"]
    assert main(["export", src, "--group", "nope"]) == 1
    assert "no such group" in capsys.readouterr().err


def test_json_round_trip_into_a_new_store_is_equal(tmp_path, capsys):
    src, dst, f = str(tmp_path / "src"), str(tmp_path / "dst"), str(tmp_path / "o.jsonl")
    _populate(src)
    assert main(["export", src, "--format", "json", "-o", f]) == 0
    with open(f) as fh:
        lines = [json.loads(x) for x in fh]
    alpha1 = next(x for x in lines if x["group"] == "alpha" and x["partition"] == 1)
    assert alpha1["metadata"] == 'note,with "quotes"' and alpha1["leader_epoch"] == 3
    assert isinstance(alpha1["commit_timestamp"], int)
    assert main(["import", dst, f]) == 2  # no store there: a usage error, nothing created
    assert not os.path.exists(dst)
    assert main(["import", dst, f, "--create", "--partitions", "5"]) == 0
    assert _fetch_all(dst) == _fetch_all(src)
    capsys.readouterr()
    assert main(["import", dst, f, "--json"]) == 0  # again: nothing to do
    doc = json.loads(capsys.readouterr().out)
    assert {r["status"] for r in doc["groups"]} == {"unchanged"}
    assert sum(r["sent"] for r in doc["groups"]) == 0


def test_csv_import_dry_run_plans_and_writes_nothing(tmp_path, capsys):
    dst, f = str(tmp_path / "dst"), tmp_path / "o.csv"
    with open_store(dst, partitions=3) as s:
        s.commit_sync("alpha", {T[0]: 5, T[1]: 4})
    f.write_text("alpha,orders,0,5\nalpha,orders,1,9\nalpha,orders,2,1\n")
    before = _fetch_all(dst)
    assert main(["import", dst, str(f), "--dry-run", "--json"]) == 0
    plan = json.loads(capsys.readouterr().out)["plan"]
    assert [(r["partition"], r["action"]) for r in plan] == [(0, "stay"), (1, "change"),
                                                            (2, "new")]
    assert _fetch_all(dst) == before
    # three-column csv (one group's file) needs --group
    g = tmp_path / "alpha.csv"
    g.write_text("orders,1,9\n")
    assert main(["import", dst, str(g)]) == 2
    assert main(["import", dst, str(g), "--group", "alpha"]) == 0
    assert _fetch_all(dst)["alpha"][T[1]] == OffsetAndMetadata(9, "", None)
    bad = tmp_path / "bad.csv"
    bad.write_text("alpha,orders,x,1\n")
    assert main(["import", dst, str(bad)]) == 2
    assert ":1:" in capsys.readouterr().err


def test_import_refuses_a_group_with_live_members_unless_forced(tmp_path, clock, capsys):
    dst, f = str(tmp_path / "dst"), tmp_path / "o.csv"
    build_group_store(dst, clock)
    f.write_text("billing,orders,0,500\nsolo,orders,2,8\n")
    assert main(["import", dst, str(f), "--json"]) == 1
    doc = json.loads(capsys.readouterr().out)
    by = {r["group"]: r for r in doc["groups"]}
    assert by["billing"]["status"] == "refused" and "live members" in by["billing"]["reason"]
    assert by["solo"]["status"] == "moved"  # the other group goes on
    with open_store(dst) as s:
        assert s.committed("billing", T[0]).offset == 10
        assert s.committed("solo", T[2]).offset == 8
    assert main(["import", dst, str(f), "--force", "--json"]) == 0
    with open_store(dst) as s:
        assert s.committed("billing", T[0]).offset == 500


def test_import_into_a_store_open_elsewhere_fails_cleanly(tmp_path, capsys):
    dst, f = str(tmp_path / "dst"), tmp_path / "o.csv"
    f.write_text("a,t,0,1\n")
    with open_store(dst, partitions=3):
        assert main(["import", dst, str(f)]) == 1
    assert "offsetlog:" in capsys.readouterr().err


def test_import_summary_is_plain_when_piped_and_progress_only_on_a_terminal(tmp_path, capsys,
                                                                          monkeypatch):
    import io
    import sys

    from offsetlog.cli import output as cli_output
    dst, f = str(tmp_path / "dst"), tmp_path / "o.csv"
    f.write_text("a,orders,0,1\nb,orders,1,2\n")
    with open_store(dst, partitions=3):
        pass
    assert main(["import", dst, str(f)]) == 0
    out, err = capsys.readouterr()
    lines = out.splitlines()
    assert lines[0].split() == ["GROUP", "STATUS", "SENT", "UNCHANGED", "SKIPPED", "VERIFIED",
                                "REASON"]
    assert [ln.split()[:3] for ln in lines[1:3]] == [["a", "moved", "1"], ["b", "moved", "1"]]
    assert "\u2500" not in out and "\x1b[" not in out and err == ""
    errs = io.StringIO()
    monkeypatch.setattr(sys, "stderr", errs)
    monkeypatch.setattr(cli_output, "_isatty", lambda stream: stream is errs)
    f.write_text("a,orders,0,3\n")
    assert main(["import", dst, str(f)]) == 0
    assert "importing" in errs.getvalue()
