"""Under strace, a commit's DSYNC write has returned before the commit is acknowledged.

A child process commits under ``fsync="always"`` (``commit_sync`` on its own thread,
``commit_async`` whose write the store's writer thread makes, and ``commit_sync`` made durable
in the store's WRITE-AHEAD file) and, once each call has
returned (or its future resolved), writes an acknowledgement line to stdout. strace records
every ``pwritev2`` and ``write`` with its thread and a timestamp: the write of each commit's
batch, with ``RWF_DSYNC``, must have *returned* before the acknowledgement's ``write`` began.
"""

from __future__ import annotations

import re
import shutil
import subprocess
import sys

import pytest

CHILD = r"""
import os, sys
from offsetlog import OffsetStore, TopicPartition
store = OffsetStore.open(sys.argv[1], fsync="always", snapshots=False)
tp = TopicPartition("orders", 0)
for i in range(3):
    store.commit_sync("g-sync", {tp: 100 + i})
    os.write(1, b"ACK sync %d\n" % i)
for i in range(3):
    store.commit_async("g-async", {tp: 200 + i}).result()
    os.write(1, b"ACK async %d\n" % i)
store._write_ahead.alone_limit = 0  # (these through the WRITE-AHEAD file's rounds)
store.commit_sync("g-ahead", {tp: 299})
for i in range(3):
    store.commit_sync("g-ahead", {tp: 300 + i})
    os.write(1, b"ACK ahead %d\n" % i)
store.close()
"""

#: ``PID SECONDS.MICROS call(...`` and the end of a call: `` = RESULT``
LINE = re.compile(r"^(\d+)\s+(\d+\.\d+)\s+(.*)$")


def _calls(trace: str):
    """``(kind, start, end, text)`` per system call, joining strace's unfinished/resumed
    halves per thread."""
    pending: dict[str, tuple[float, str]] = {}
    out = []
    for line in trace.splitlines():
        m = LINE.match(line)
        if not m:
            continue
        pid, ts, rest = m.group(1), float(m.group(2)), m.group(3)
        if rest.endswith("<unfinished ...>"):
            pending[pid] = (ts, rest)
            continue
        if rest.startswith("<..."):
            start, first = pending.pop(pid)
            out.append((first.split("(", 1)[0], start, ts, first + rest))
            continue
        out.append((rest.split("(", 1)[0], ts, ts, rest))
    return out


@pytest.mark.skipif(sys.platform != "linux", reason="RWF_DSYNC and strace are Linux's")
def test_the_dsync_write_returns_before_the_commit_is_acknowledged(tmp_path):
    strace = shutil.which("strace")
    if strace is None:
        pytest.skip("strace is not installed")
    log = tmp_path / "trace"
    run = subprocess.run([strace, "-f", "-ttt", "-y", "-e", "trace=pwritev2,write", "-s", "256",
                          "-o", str(log), sys.executable, "-c", CHILD, str(tmp_path / "store")],
                         capture_output=True, text=True, timeout=120)
    if run.returncode != 0 and "ptrace" in run.stderr:
        pytest.skip(f"strace cannot trace here: {run.stderr.strip()[-200:]}")
    assert run.returncode == 0, run.stderr[-2000:]
    calls = _calls(log.read_text())
    dsync = [c for c in calls if c[0] == "pwritev2" and "RWF_DSYNC" in c[3]]
    acks = [c for c in calls if c[0] == "write" and '"ACK ' in c[3]]
    assert len(acks) == 9, acks
    # the k-th acknowledgement of a group follows k+1 DSYNC writes of that group's batches
    # (each commit is its own write here: the child waits for each before the next), every
    # one of which had returned a byte count before the acknowledgement began; g-ahead's are
    # entries of the WRITE-AHEAD file (its first commit is its segment's first write)
    seen = {"g-sync": 0, "g-async": 0, "g-ahead": 1}
    for _, start, _, text in acks:
        group = ("g-sync" if "ACK sync" in text else "g-async" if "ACK async" in text
                 else "g-ahead")
        seen[group] += 1
        done = [c for c in dsync if group in c[3]  # the batch's bytes name its group
                and c[2] <= start and re.search(r"= \d+$", c[3])]
        assert len(done) >= seen[group], (text, done)
    ahead = [c for c in dsync if "g-ahead" in c[3] and "WRITE-AHEAD" in c[3]]
    assert len(ahead) >= 3, ahead  # (strace -y names the file of each call)
    # and no acknowledgement came before the first DSYNC write returned
    assert min(a[1] for a in acks) >= min(d[2] for d in dsync)
