"""Real crash tests: a child process commits from several threads and is SIGKILLed at seeded
random moments, again and again on the same directory; after every kill the parent reopens
the store and checks the guarantees users rely on:

1. no acknowledged commit is lost (a thread's "ACK" line is written only once the commit
   is durable, so every key shows that commit or a later one of the same thread);
2. every call is all-or-nothing, and 3. calls of one thread apply in call order: the state of
   a thread's keys is exactly the state after *some* prefix of its calls (each call writes
   ``seq`` to its progress key and a seeded subset of its other keys, so the prefix is
   read off the progress key and every other key is then known exactly);
4. values never go backwards from one reopen to the next.

The power-loss variant also drops a random part of every byte that was written but not yet
fsynced (the child logs each fsync), which is what a power failure may do; acknowledged
commits must survive that too, and recovery must repair the torn tails it leaves.
"""

from __future__ import annotations

import json
import os
import re
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from crash_child import TOPIC_PARTITIONS, call_keys, group_of
from durability_helpers import TP, Seeded, file_sizes, open_store, segment_files

CHILD = str(Path(__file__).with_name("crash_child.py"))
ACK_RE = re.compile(rb"^ACK (\d+) (\d+)$")
SYNC_RE = re.compile(rb"^SYNC (\S+) (\d+)$")
CYCLE_STRIDE = 10_000_000  # seq numbers of cycle k start at k * CYCLE_STRIDE + 1


class CrashHarness:
    def __init__(self, tmp_path, rng: Seeded, *, mode: str, threads: int, groups: int,
                 partitions: int, segment_bytes: int, power_loss: bool = False,
                 sync_delay_ms: float = 0) -> None:
        self.dir = tmp_path / "store"
        self.tmp = tmp_path
        self.rng = rng
        self.mode = mode
        self.threads = threads
        self.groups = groups
        self.partitions = partitions
        self.segment_bytes = segment_bytes
        self.power_loss = power_loss
        self.sync_delay_ms = sync_delay_ms
        #: thread -> key -> the seq it holds in the verified state (absent: never committed)
        self.state: dict[int, dict[TP, int]] = {t: {} for t in range(threads)}
        #: thread -> its last applied seq (its progress key), 0 if none
        self.progress = {t: 0 for t in range(threads)}
        self.stats = {"acked": 0, "applied": 0, "truncations": 0, "cut_bytes": 0,
                      "killed_before_ready": 0}

    # -- one cycle -------------------------------------------------------------------------

    def cycle(self, k: int) -> None:
        start = k * CYCLE_STRIDE + 1
        ack_file = self.tmp / f"ack-{k}"
        sync_log = self.tmp / f"sync-{k}" if self.power_loss else None
        durable_at_start = file_sizes(self.dir) if self.dir.exists() else {}
        config = {"dir": str(self.dir), "ack_file": str(ack_file), "start": start,
                  "seed": self.rng.seed_value, "threads": self.threads, "groups": self.groups,
                  "mode": self.mode, "partitions": self.partitions,
                  "segment_bytes": self.segment_bytes,
                  "sync_log": str(sync_log) if sync_log else None,
                  "sync_delay_ms": self.sync_delay_ms}
        child = subprocess.Popen([sys.executable, CHILD, json.dumps(config)],
                                 stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
        try:
            if self.rng.random() < 0.15:
                time.sleep(self.rng.uniform(0, 0.25))  # maybe during start-up or recovery
            else:
                self._wait_ready(child, ack_file)
                time.sleep(self.rng.uniform(0.01, 0.35))
            if child.poll() is not None:
                raise AssertionError(self.rng.why(
                    f"cycle {k}: child exited by itself ({child.returncode}): "
                    f"{child.stderr.read().decode(errors='replace')[-2000:]}"))
        finally:
            child.send_signal(signal.SIGKILL)
            child.wait(timeout=60)
            child.stderr.close()
        acked = self._read_acks(ack_file)
        if not ack_file.exists() or not ack_file.read_bytes().startswith(b"READY\n"):
            self.stats["killed_before_ready"] += 1
        if self.power_loss:
            self._lose_unsynced(sync_log, durable_at_start)
        self._verify(k, start, acked)

    def _wait_ready(self, child, ack_file: Path) -> None:
        deadline = time.monotonic() + 60
        while time.monotonic() < deadline:
            if ack_file.exists() and ack_file.read_bytes().startswith(b"READY\n"):
                return
            if child.poll() is not None:
                raise AssertionError(self.rng.why(
                    f"child died before opening the store: "
                    f"{child.stderr.read().decode(errors='replace')[-2000:]}"))
            time.sleep(0.005)
        raise AssertionError(self.rng.why("child never opened the store"))

    @staticmethod
    def _read_acks(ack_file: Path) -> dict[int, int]:
        acked: dict[int, int] = {}
        if ack_file.exists():
            for line in ack_file.read_bytes().splitlines():
                m = ACK_RE.match(line)
                if m:
                    t, seq = int(m.group(1)), int(m.group(2))
                    acked[t] = max(acked.get(t, 0), seq)
        return acked

    def _lose_unsynced(self, sync_log: Path, durable_at_start: dict[str, int]) -> None:
        """Cut each partition's last segment somewhere in its unsynced suffix."""
        if not self.dir.exists():
            return  # killed before the child created the store: nothing was written
        synced = dict(durable_at_start)
        if sync_log.exists():
            for line in sync_log.read_bytes().splitlines():
                m = SYNC_RE.match(line)
                if m:
                    path = m.group(1).decode()
                    synced[path] = max(synced.get(path, 0), int(m.group(2)))
        for p, paths in segment_files(self.dir).items():
            if not paths:
                continue
            last = paths[-1]
            size = os.path.getsize(last)
            durable = min(synced.get(last, 0), size)
            if durable < size:
                cut = self.rng.randint(durable, size)
                os.truncate(last, cut)
                self.stats["cut_bytes"] += size - cut

    def _verify(self, k: int, start: int, acked: dict[int, int]) -> None:
        where = f"cycle {k}"
        store = open_store(self.dir, partitions=self.partitions)
        try:
            self.stats["truncations"] += len(store.recovery_report.truncations)
            fetched = {g: store.fetch(group_of(g, self.groups)) for g in range(self.groups)}
        finally:
            store.close()
        for t in range(self.threads):
            mine = {tp: v for tp, v in fetched[t % self.groups].items() if tp.topic == f"t{t}"}
            got = {tp: v.offset for tp, v in mine.items()}
            assert all(v == (v.offset, "", None) for v in mine.values()), mine
            c = got.get(TP(f"t{t}", 0), 0)
            why = self.rng.why(f"{where}, thread {t}: progress {c}, acked {acked.get(t)}, "
                               f"previous {self.progress[t]}")
            # 1. nothing acknowledged is lost
            assert c >= acked.get(t, 0), "acknowledged commit lost: " + why
            # 4. never backwards
            assert c >= self.progress[t], "went backwards: " + why
            # 2+3. exactly the state after the prefix of calls ending at c
            expected = dict(self.state[t])
            if c != self.progress[t]:
                assert start <= c < start + CYCLE_STRIDE, "impossible progress value: " + why
                for seq in range(start, c + 1):
                    for tp in call_keys(self.rng.seed_value, t, seq):
                        expected[tp] = seq
            assert got == expected, (f"not a prefix of whole calls: {why}\n"
                                     f" got {sorted(got.items())}\nwant {sorted(expected.items())}")
            assert set(got) <= {TP(f"t{t}", p) for p in range(TOPIC_PARTITIONS)}
            self.stats["acked"] += 1 if t in acked else 0
            self.stats["applied"] += max(0, c - max(self.progress[t], start - 1))
            self.state[t] = expected
            self.progress[t] = c


def run_cycles(harness: CrashHarness, cycles: int, budget_s: float) -> dict:
    started = time.monotonic()
    done = 0
    for k in range(cycles):
        harness.cycle(k)
        done += 1
        if time.monotonic() - started > budget_s and done >= cycles // 2:
            break  # a slow machine: fewer cycles, same checks
    harness.stats["cycles"] = done
    print(f"crash cycles: {harness.stats} [seed {harness.rng.seed_value}]")
    assert harness.stats["applied"] > 0, harness.rng.why(f"no commit ever landed: {harness.stats}")
    return harness.stats


@pytest.mark.slow
def test_kill9_during_sync_commits_loses_nothing_acknowledged(tmp_path):
    rng = Seeded()
    harness = CrashHarness(tmp_path, rng, mode="sync", threads=6, groups=4, partitions=3,
                           segment_bytes=16 * 1024)
    stats = run_cycles(harness, cycles=25, budget_s=30)
    assert stats["acked"] > 0, rng.why(str(stats))


@pytest.mark.slow
def test_kill9_during_mixed_async_and_sync_commits_keeps_calls_whole_and_in_order(tmp_path):
    rng = Seeded()
    harness = CrashHarness(tmp_path, rng, mode="mixed", threads=6, groups=3, partitions=50,
                           segment_bytes=8 * 1024)
    stats = run_cycles(harness, cycles=20, budget_s=25)
    assert stats["acked"] > 0, rng.why(str(stats))


@pytest.mark.slow
def test_power_loss_after_kill_drops_only_unsynced_bytes(tmp_path):
    """SIGKILL, then drop a random part of every partition's unsynced tail (a power cut)."""
    rng = Seeded()
    harness = CrashHarness(tmp_path, rng, mode="mixed", threads=6, groups=4, partitions=3,
                           segment_bytes=16 * 1024, power_loss=True, sync_delay_ms=2)
    stats = run_cycles(harness, cycles=20, budget_s=25)
    assert stats["cut_bytes"] > 0, rng.why(f"no unsynced bytes were ever dropped: {stats}")
    assert stats["truncations"] > 0, rng.why(f"no torn tail was ever repaired: {stats}")
