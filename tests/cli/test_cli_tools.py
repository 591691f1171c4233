"""crashtest's --workload and --option, bench's outputs and --check, and progress bars on a
terminal only (issue 15, items 9-11)."""

import io
import os
import subprocess
import sys

import pytest

from offsetlog import TopicPartition
from offsetlog.cli import main
from offsetlog.cli import output as cli_output

from support.stores import open_store

WORKLOAD = '''
from offsetlog import TopicPartition

def run(ctx):
    seq = ctx.offset_base
    while True:
        offsets = {TopicPartition("w", ctx.thread): seq}
        ctx.store.commit_sync("wg", offsets)
        ctx.ack("wg", offsets)
        seq += 1
'''


def test_crashtest_workload_is_imported_from_the_current_directory(tmp_path, monkeypatch,
                                                                     capsys):
    """As the installed script runs it: neither '' nor the directory on sys.path."""
    (tmp_path / "myworkload.py").write_text(WORKLOAD)
    monkeypatch.chdir(tmp_path)
    monkeypatch.setattr(sys, "path", [p for p in sys.path if p not in ("", str(tmp_path))])
    monkeypatch.delitem(sys.modules, "myworkload", raising=False)
    assert main(["crashtest", str(tmp_path / "run"), "--cycles", "2", "--threads", "1",
                 "--workload", "myworkload:run", "--seed", "7"]) == 0, capsys.readouterr()
    out = capsys.readouterr().out
    assert "0 violations" in out


def test_crashtest_unknown_option_is_a_usage_error(tmp_path, capsys):
    assert main(["crashtest", str(tmp_path / "run"), "--cycles", "2",
                 "--option", "fsnyc=always"]) == 2
    out, err = capsys.readouterr()
    assert "unknown OffsetStore.open option" in err and "fsnyc" in err
    assert "violation" not in (out + err).lower()
    assert not (tmp_path / "run").exists() or not os.listdir(tmp_path / "run")
    assert main(["crashtest", str(tmp_path / "run"), "--option", "novalue"]) == 2


def test_crashtest_config_refuses_unknown_store_options():
    from offsetlog.recovery.crashtest.harness import CrashTestConfig
    with pytest.raises(ValueError, match="fsnyc"):
        CrashTestConfig(store_options={"fsnyc": "always"})


# -- bench --------------------------------------------------------------------------------

class FakeRunner:
    """Stands in for bench's Runner: one row that misses its target, a threads series."""

    def __init__(self, data_dir, sizes, console) -> None:
        from offsetlog.bench.report import LOWER, Row
        self.rows = [Row("latency", "os.write + os.fsync", 3.0, 1.0, "us", better=LOWER,
                         target=1.1)]
        self.series = {"threads": [1, 2], "commits_per_s": {"offsetlog": [10.0, 20.0]}}
        self.raw = {}

    def latency(self) -> None:
        pass


def source_tree_state():
    from offsetlog.bench.common import SOURCE_ROOT
    if not os.path.isdir(os.path.join(SOURCE_ROOT, ".git")) and not os.path.isfile(
            os.path.join(SOURCE_ROOT, ".git")):
        return None
    return subprocess.run(["git", "status", "--porcelain", "--ignored", "--untracked-files=all"],
                          cwd=SOURCE_ROOT, capture_output=True, text=True).stdout


@pytest.fixture
def fake_bench(monkeypatch, tmp_path):
    from offsetlog.bench import runner
    monkeypatch.setattr(runner, "Runner", FakeRunner)
    monkeypatch.chdir(tmp_path)
    return tmp_path


def test_bench_writes_json_and_plot_into_the_data_directory(fake_bench, capsys):
    before = source_tree_state()
    data = fake_bench / "data"
    assert main(["bench", "--only", "latency", "--dir", str(data), "--plot"]) == 0
    assert (data / "results.json").is_file() and (data / "throughput.png").is_file()
    assert main(["bench", "--only", "latency", "--dir", str(data), "--plot",
                 str(fake_bench / "p.png"), "--json", str(fake_bench / "r.json")]) == 0
    assert (fake_bench / "p.png").is_file() and (fake_bench / "r.json").is_file()
    assert source_tree_state() == before  # nothing written into the source tree


def test_bench_check_fails_on_a_missed_target(fake_bench, capsys):
    data = str(fake_bench / "data")
    assert main(["bench", "--only", "latency", "--dir", data]) == 0  # reported only
    capsys.readouterr()
    assert main(["bench", "--only", "latency", "--dir", data, "--check"]) == 1
    assert "target missed: latency" in capsys.readouterr().err


# -- progress -----------------------------------------------------------------------------

@pytest.fixture
def store_with_segments(store_dir):
    with open_store(store_dir, partitions=2, segment_bytes=2048) as s:
        for i in range(300):
            s.commit_sync(f"g{i % 5}", {TopicPartition("t", i % 7): i})
    return store_dir


def test_progress_on_a_terminal(store_with_segments, monkeypatch):
    err = io.StringIO()
    monkeypatch.setattr(sys, "stderr", err)
    monkeypatch.setattr(cli_output, "_isatty", lambda stream: stream is err)
    assert main(["compact", store_with_segments]) == 0
    text = err.getvalue()
    assert "opening (replaying the log)" in text and "compacting" in text


@pytest.mark.parametrize("command", [["compact"], ["verify"], ["snapshot"],
                                     ["recover", "--salvage"], ["describe"]])
def test_no_progress_when_piped(store_with_segments, capsys, command):
    assert main([command[0], store_with_segments, *command[1:]]) == 0
    assert capsys.readouterr().err == ""
