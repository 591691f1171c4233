"""The command as Unix and Kafka's tools have it: stderr and exit codes, no traceback unless
--debug, plain text when piped, --json, --version, ``python -m offsetlog`` (issue 15, items
4, 5 and 8)."""

import json
import os
import subprocess
import sys

import pytest

from offsetlog import __version__
from offsetlog.cli import main


def run(*args, cwd=None, env=None):
    """The command in a child process, its stdout and stderr pipes (not a terminal)."""
    return subprocess.run([sys.executable, "-m", "offsetlog", *args], capture_output=True,
                          text=True, timeout=120, cwd=cwd, env=env)


def test_version_and_python_dash_m():
    r = run("--version")
    assert r.returncode == 0 and r.stdout.strip() == f"offsetlog {__version__}"


def test_usage_errors_exit_2_on_stderr(tmp_path, capsys):
    assert main(["describe"]) == 2  # DIR missing
    assert main(["frobnicate"]) == 2
    assert main(["verify", str(tmp_path / "nope")]) == 2
    out, err = capsys.readouterr()
    assert out == "" and "usage:" in err and "nope: no such directory" in err


def test_a_failure_exits_1_with_one_line_on_stderr_and_no_traceback(tmp_path):
    (tmp_path / "empty").mkdir()
    r = run("describe", str(tmp_path / "empty"))
    assert r.returncode == 1 and r.stdout == ""
    assert r.stderr.startswith("offsetlog: ") and "not an offsetlog store" in r.stderr
    assert "Traceback" not in r.stderr and len(r.stderr.splitlines()) == 1
    r = run("describe", str(tmp_path / "empty"), "--debug")
    assert r.returncode == 1 and "Traceback" in r.stderr and "StoreNotFoundError" in r.stderr


def test_an_unexpected_error_is_one_line_unless_debug(populated, monkeypatch, capsys):
    from offsetlog.cli import inspect_cmds

    def broken(*a, **k):
        raise RuntimeError("boom")

    monkeypatch.setattr(inspect_cmds, "load_groups", broken)
    assert main(["describe", populated]) == 1
    err = capsys.readouterr().err
    assert "RuntimeError: boom" in err and "--debug" in err and "Traceback" not in err
    assert main(["describe", populated, "--debug"]) == 1
    assert "Traceback" in capsys.readouterr().err


@pytest.mark.parametrize("command", ["describe", "groups", "transactions", "verify", "dump"])
def test_piped_output_is_plain_and_whole(group_store, command):
    """COLUMNS=40 as a narrow terminal would set: piped, nothing is squeezed into it."""
    r = run(command, group_store, env={**os.environ, "COLUMNS": "40", "TERM": "xterm"})
    assert r.returncode == 0, r.stderr
    for bad in ("─", "│", "┃", "━", "…", "\x1b["):
        assert bad not in r.stdout, (bad, r.stdout)
    if command in ("describe", "dump"):  # never cut at a terminal's width: lines stay whole
        assert max(len(line) for line in r.stdout.splitlines()) > 80


def test_describe_text_is_aligned_columns(group_store, capsys):
    assert main(["describe", group_store, "--group", "billing"]) == 0
    lines = capsys.readouterr().out.splitlines()
    header = lines[0]
    assert header.split() == ["GROUP", "TOPIC", "PARTITION", "CURRENT-OFFSET",
                              "LOG-END-OFFSET", "LAG", "CONSUMER-ID", "HOST", "CLIENT-ID",
                              "LEADER-EPOCH", "METADATA", "COMMITTED-AT", "TRANSACTION"]
    start = header.index("CONSUMER-ID")
    assert all(line[start - 1] == " " for line in lines[1:3])  # cells line up under it


@pytest.mark.parametrize("command,key", [("describe", "offsets"), ("groups", "groups"),
                                         ("transactions", "transactions"),
                                         ("verify", "partitions")])
def test_json_is_one_document(group_store, capsys, command, key):
    assert main([command, group_store, "--json"]) == 0
    doc = json.loads(capsys.readouterr().out)
    assert isinstance(doc[key], list) and doc[key]


def test_json_has_the_fields_of_the_text(group_store, capsys):
    assert main(["describe", group_store, "--group", "billing"]) == 0
    header = capsys.readouterr().out.splitlines()[0].split()
    assert main(["describe", group_store, "--group", "billing", "--json"]) == 0
    row = json.loads(capsys.readouterr().out)["offsets"][0]
    for column in header:
        assert column.lower().replace("-", "_") in row, column
    assert row["log_end_offset"] is None and row["lag"] is None


def test_dump_json_lines(group_store, capsys):
    assert main(["dump", group_store, "--json"]) == 0
    rows = [json.loads(line) for line in capsys.readouterr().out.splitlines()]
    assert rows and all({"offset", "type", "key", "value", "batch", "transaction"} <= set(r)
                        for r in rows)
