"""A crash-test harness: commit in a child process, SIGKILL it at random moments, reopen, check.

Every cycle starts ``python -m offsetlog.recovery.crashtest.child`` on the same store directory, lets it
commit (sync and async, several threads, several groups, or the user's own workload) and kills
it with SIGKILL at a seeded random moment: sometimes during start-up or recovery, usually
mid-commit, and with ``compaction`` on, mid-cleaning (a compaction loop runs beside the
commits, and every other cycle the child kills itself at a chosen step of a cleaner swap, each
step in turn). Optionally the harness then simulates a power cut (``power_loss``: every
partition loses a random part of its bytes that were written but never fsynced) or tears the
tail of one active segment at a random unsynced byte (``tear_tail``); a third of those cuts
are holes instead, zeros with the unsynced bytes after them kept (a disk that persisted a
write out of order). Then it reopens the store and checks (docs/CRASHTEST.md):

``acknowledged``
    every acknowledged commit is there, or a later commit of the same key (not after a power
    cut under ``fsync="interval"`` or ``"never"``, which acknowledge before the fsync);
``atomic`` (built-in workload)
    the keys of each thread hold exactly the state after some prefix of its calls: every call
    all-or-nothing, calls applied in call order, sync and async alike;
``monotonic``
    no key's offset is lower than after the previous reopen (workloads commit growing offsets);
``replay``
    the reopened store's tables equal a full replay of the log by ``offsetlog.recovery.tools.inspect.scan``
    (whatever snapshots or caches the open used), and that scan finds no corruption and no
    torn tail (the open repaired it);
``verify``
    before reopening, the read-only scan ``offsetlog verify`` runs finds nothing wrong with
    the crashed directory but a torn tail, and its replay (leftover swaps planned, not
    applied) is the state recovery then produces;
``recovery``
    the store opens at all (no ``CorruptLogError``), and nothing the child ran raised.

Python::

    from offsetlog.recovery.crashtest.harness import CrashTestConfig, run_crashtest
    result = run_crashtest("/tmp/ct", CrashTestConfig(cycles=50, compaction=True))
    assert result.ok, result.summary()

Command line: ``offsetlog crashtest DIR --cycles N ...``; pytest: the ``offsetlog_crashtest``
fixture (recovery/crashtest/pytest_plugin.py).
"""

from __future__ import annotations

import dataclasses
import inspect
import json
import os
import random
import signal
import subprocess
import sys
import time
from dataclasses import dataclass, field
from typing import Callable

from offsetlog.compaction.cleaner import STEPS
from offsetlog.log import naming
from offsetlog.recovery.crashtest import power_cut
from offsetlog.recovery.crashtest.child import TOPIC_PARTITIONS, call_keys, group_of, load_workload
from offsetlog.recovery.tools.inspect import scan
from offsetlog.store.transactions import MARKER_ATTRIBUTES, completion_marker
from offsetlog.table.offset_table import OffsetTable
from offsetlog.txn.state import TxnMetadata

#: offsets of cycle k start at k * CYCLE_STRIDE + 1, so they grow from cycle to cycle
CYCLE_STRIDE = 10_000_000
#: the child's start-up budget (import, recovery, READY) before the harness gives up
READY_TIMEOUT_S = 120


@dataclass
class CrashTestConfig:
    """What to run. Defaults are a short, broad run; ``store_options`` are the user's settings.

    :ivar cycles: kill/reopen cycles
    :ivar threads: committing threads in the child
    :ivar groups: consumer groups the built-in committer spreads its threads over
    :ivar partitions: log partitions of a new store (``store_options["partitions"]`` wins)
    :ivar async_fraction: share of the built-in committer's calls made with ``commit_async``
    :ivar kill_delay_s: (low, high) seconds after READY at which the child is killed
    :ivar early_kill_probability: chance per cycle of a kill before READY (start-up, recovery)
    :ivar tear_tail: chance per cycle of cutting one active segment at a random unsynced byte
    :ivar power_loss: every cycle, drop a random part of every partition's unsynced bytes
    :ivar compaction: run ``store.compact()`` in a loop beside the commits
    :ivar step_kills: with compaction, every other cycle SIGKILL the child at a chosen step of a
        cleaner swap (``offsetlog.compaction.cleaner.STEPS``, in turn)
    :ivar snapshots: also call ``store.snapshot()`` in that loop, where the store has one
    :ivar segment_bytes: ``None``: 8 KiB with compaction (so segments roll and get cleaned),
        otherwise the store's default or ``store_options``
    :ivar sync_delay_ms: sleep before each fsync in the child (widens the unsynced window);
        ``None``: 2 ms with power_loss or tear_tail, else 0
    :ivar store_options: keyword arguments for ``OffsetStore.open`` in the child and on reopen
    :ivar seed: ``None`` picks one (it is in the result: pass it back to replay a run)
    :ivar time_budget_s: stop early (after at least half the cycles) once this is spent
    :ivar stop_on_violation: stop at the first cycle that finds a violation
    """

    cycles: int = 20
    threads: int = 4
    groups: int = 3
    partitions: int = 3
    async_fraction: float = 0.5
    kill_delay_s: tuple[float, float] = (0.01, 0.35)
    early_kill_probability: float = 0.1
    tear_tail: float = 0.0
    power_loss: bool = False
    compaction: bool = False
    step_kills: bool = True
    snapshots: bool = False
    segment_bytes: int | None = None
    sync_delay_ms: float | None = None
    store_options: dict = field(default_factory=dict)
    seed: int | None = None
    time_budget_s: float | None = None
    stop_on_violation: bool = True

    def __post_init__(self) -> None:
        if self.cycles < 1 or self.threads < 1 or self.groups < 1:
            raise ValueError("cycles, threads and groups must be at least 1")
        if not 0 <= self.async_fraction <= 1 or not 0 <= self.tear_tail <= 1:
            raise ValueError("async_fraction and tear_tail are probabilities in [0, 1]")
        lo, hi = self.kill_delay_s
        if not 0 <= lo <= hi:
            raise ValueError("kill_delay_s must be (low, high) with 0 <= low <= high")
        check_store_options(self.store_options)

    @property
    def fsync(self) -> str:
        return self.store_options.get("fsync", "always")

    @property
    def checks_acknowledged(self) -> bool:
        """Whether every acknowledged commit must survive: always after a kill; after a
        simulated power cut only under ``fsync="always"`` (the other policies acknowledge
        before the fsync, so a power cut may take back what they acknowledged; the store must
        still reopen, as a prefix of what each thread committed)."""
        return self.fsync == "always" or not (self.power_loss or self.tear_tail)

    def open_options(self) -> dict:
        """``OffsetStore.open`` keywords for the child."""
        opts = {"partitions": self.partitions, "retention_check_interval_ms": 0,
                "cleaner_backoff_ms": 0}
        if self.segment_bytes is not None:
            opts["segment_bytes"] = self.segment_bytes
        elif self.compaction:
            opts["segment_bytes"] = 8 * 1024
        opts.update(self.store_options)
        return opts


@dataclass(frozen=True)
class Violation:
    cycle: int
    invariant: str  # acknowledged, atomic, monotonic, replay, recovery
    message: str

    def __str__(self) -> str:
        return f"cycle {self.cycle}: {self.invariant}: {self.message}"


@dataclass
class CrashTestResult:
    seed: int
    cycles: int = 0
    #: acknowledged commit calls (sync returns and successful async callbacks)
    acknowledged: int = 0
    #: calls found applied after reopening (built-in workload only)
    applied: int = 0
    violations: list[Violation] = field(default_factory=list)
    killed_during_startup: int = 0
    #: cleaner swap step -> cycles in which the child was killed exactly there
    killed_at_step: dict[str, int] = field(default_factory=dict)
    torn_tails_repaired: int = 0  # truncations recovery reported
    tails_torn: int = 0  # segments the harness cut (tear_tail and power_loss)
    tails_zeroed: int = 0  # of those, cut by zeroing the bytes in the reserve, not truncating
    holes: int = 0  # of those, zeroed in the middle, the unsynced bytes after the hole kept
    #: of the holes, those that durable bytes follow (a commit's write that ended before the
    #: write it followed: power_cut's ``kept``)
    cut_before_durable: int = 0
    bytes_cut: int = 0
    duration_s: float = 0.0

    @property
    def ok(self) -> bool:
        return not self.violations

    def summary(self) -> str:
        steps = ", ".join(f"{s}={n}" for s, n in sorted(self.killed_at_step.items())) or "-"
        lines = [f"crashtest: {self.cycles} cycles in {self.duration_s:.1f}s, "
                 f"{self.acknowledged} commits acknowledged, {self.applied} applied, "
                 f"{len(self.violations)} violations [seed {self.seed}]",
                 f"  killed during start-up/recovery: {self.killed_during_startup}; "
                 f"at cleaner swap steps: {steps}",
                 f"  tails torn by the harness: {self.tails_torn} ({self.bytes_cut} bytes, "
                 f"{self.tails_zeroed} zeroed in the reserve, {self.holes} holes, "
                 f"{self.cut_before_durable} before durable bytes); "
                 f"torn tails repaired by recovery: {self.torn_tails_repaired}"]
        lines += [f"  VIOLATION {v}" for v in self.violations[:50]]
        return "\n".join(lines)


Key = tuple[str, str, int]  # (group, topic, partition)


def _as_open_completes(tables: dict[int, OffsetTable]) -> dict[int, OffsetTable]:
    """The read-only scan's ``tables`` of a crashed store, changed as its open will change
    them: every transaction decided (PrepareCommit / PrepareAbort) but not finished gets its
    marker in each log partition it touched, as the store's open writes them (Kafka's
    coordinator completes such a transaction when it loads). Its Complete state is not
    written at open (it goes with the transactional id's next state record), so its state
    stays as the scan found it. Changes ``tables`` in place and returns it."""
    decided = [meta for table in list(tables.values())
               for tid, value in sorted(table.txn.states.items())
               if (meta := TxnMetadata.from_value(tid, value)).decided]
    for meta in decided:
        marker = completion_marker(meta)
        for p in meta.partitions:
            table = tables.setdefault(p, OffsetTable())
            table.apply_batch(table.next_offset, (marker,), MARKER_ATTRIBUTES,
                              meta.producer_id, meta.producer_epoch)
    return tables


class _Harness:
    def __init__(self, directory: str, config: CrashTestConfig, workload: str | None,
                 seed: int) -> None:
        self.root = os.path.abspath(directory)
        self.store_dir = os.path.join(self.root, "store")
        self.work = os.path.join(self.root, "work")
        self.config = config
        self.workload = workload
        self.builtin = workload is None
        self.rng = random.Random(seed)
        self.seed = seed
        self.result = CrashTestResult(seed=seed)
        self.options = config.open_options()
        #: key -> offset after the previous reopen
        self.previous: dict[Key, int] = {}
        #: key -> highest offset ever acknowledged for it
        self.acked: dict[Key, int] = {}
        #: built-in: thread -> its last applied seq (progress key), and its keys' state
        self.progress = {t: 0 for t in range(config.threads)}
        self.state: dict[int, dict[Key, int]] = {t: {} for t in range(config.threads)}
        self.step_turn = 0

    # -- one cycle -------------------------------------------------------------------------

    def cycle(self, k: int) -> list[Violation]:
        cfg = self.config
        ack_file = os.path.join(self.work, f"ack-{k}")
        sync_log = (os.path.join(self.work, f"sync-{k}")
                    if cfg.power_loss or cfg.tear_tail else None)
        durable_at_start = power_cut.durable_sizes(self.store_dir)
        step = None
        if cfg.compaction and cfg.step_kills and k % 2 == 1:
            step = STEPS[self.step_turn % len(STEPS)]
            self.step_turn += 1
        sync_delay = cfg.sync_delay_ms
        if sync_delay is None:
            sync_delay = 2 if sync_log else 0
        child_config = {
            "dir": self.store_dir, "ack_file": ack_file, "cycle": k,
            "offset_base": k * CYCLE_STRIDE + 1, "seed": self.seed, "threads": cfg.threads,
            "groups": cfg.groups, "async_fraction": cfg.async_fraction,
            "store_options": self.options, "sync_log": sync_log, "sync_delay_ms": sync_delay,
            "compaction": cfg.compaction, "snapshots": cfg.snapshots, "kill_at_step": step,
            "workload": self.workload}
        env = dict(os.environ)
        # The child imports offsetlog, recovery and the user's workload as this process does.
        env["PYTHONPATH"] = os.pathsep.join(p for p in sys.path if p and os.path.isdir(p))
        # stderr to a file, not a pipe: a chatty workload must not block on a full pipe
        err_path = os.path.join(self.work, f"stderr-{k}")
        with open(err_path, "wb") as err_file:
            child = subprocess.Popen([sys.executable, "-m", "offsetlog.recovery.crashtest.child",
                                      json.dumps(child_config)], stdout=subprocess.DEVNULL,
                                     stderr=err_file, env=env)
        violations: list[Violation] = []
        try:
            if self.rng.random() < cfg.early_kill_probability:
                time.sleep(self.rng.uniform(0, 0.25))  # during start-up or recovery
            else:
                err = self._wait_ready(child, ack_file)
                if err:
                    violations.append(Violation(k, "recovery", err))
                else:
                    delay = self.rng.uniform(*cfg.kill_delay_s)
                    # A step kill may come later than a plain kill: give the cleaner time to
                    # reach its step (the child kills itself there), then kill anyway.
                    deadline = time.monotonic() + (max(delay, 3.0) if step else delay)
                    while time.monotonic() < deadline and child.poll() is None:
                        time.sleep(0.005)
        finally:
            if child.poll() is None:
                child.send_signal(signal.SIGKILL)
            child.wait(timeout=60)
        with open(err_path, "rb") as f:
            stderr = f.read()[-4000:].decode(errors="replace")
        lines = power_cut.read_lines(ack_file)
        if not lines or lines[0] != b"READY":
            self.result.killed_during_startup += 1
        if child.returncode != -signal.SIGKILL:
            violations.append(Violation(k, "recovery", f"child exited with {child.returncode}"
                                                       f": {stderr[-2000:]}"))
        for line in lines:
            if line.startswith(b"STEP "):
                name = line[5:].decode()
                self.result.killed_at_step[name] = self.result.killed_at_step.get(name, 0) + 1
            elif line.startswith(b"ERROR "):
                violations.append(Violation(k, "recovery", "the child raised: "
                                            + line[6:].decode(errors="replace")[-2000:]))
        calls = [json.loads(line[4:]) for line in lines if line.startswith(b"ACK ")]
        self.result.acknowledged += len(calls)
        if sync_log is not None and os.path.isdir(self.store_dir):
            # (a child killed during its first start-up may not have created the store yet)
            self._cut_unsynced(sync_log, durable_at_start)
        violations += self._verify(k, calls)
        return violations

    def _wait_ready(self, child, ack_file: str) -> str | None:
        deadline = time.monotonic() + READY_TIMEOUT_S
        while time.monotonic() < deadline:
            lines = power_cut.read_lines(ack_file)
            if lines and lines[0] == b"READY":
                return None
            if child.poll() is not None:
                return f"the child died before opening the store ({child.returncode})"
            time.sleep(0.005)
        return f"the child did not open the store within {READY_TIMEOUT_S}s"

    # -- simulated power loss ----------------------------------------------------------------

    def _cut_unsynced(self, sync_log: str, durable_at_start: dict[str, int]) -> None:
        """Cut active segments somewhere in the bytes no successful fsync covered
        (``power_cut``): every partition's with ``power_loss``, one partition's with chance
        ``tear_tail``."""
        candidates = power_cut.unsynced(self.store_dir, sync_log, durable_at_start)
        if self.config.power_loss:
            chosen = candidates
        elif candidates and self.rng.random() < self.config.tear_tail:
            chosen = [self.rng.choice(candidates)]
        else:
            chosen = []
        for path, durable, size, kept in chosen:
            shape, lost = power_cut.cut(path, durable, size, self.rng, kept)
            self.result.tails_torn += 1
            self.result.bytes_cut += lost
            if shape == power_cut.HOLE_BEFORE_DURABLE:
                self.result.holes += 1
                self.result.cut_before_durable += 1
            elif shape == power_cut.HOLE:
                self.result.holes += 1
            elif shape == power_cut.ZEROED:
                self.result.tails_zeroed += 1

    # -- checks ------------------------------------------------------------------------------

    def _verify(self, k: int, calls: list) -> list[Violation]:
        from offsetlog import OffsetStore  # the harness drives the engine; recovery does not

        out: list[Violation] = []
        # First, what `offsetlog verify` sees in the crashed directory (read-only: leftover
        # swaps are planned, not applied; a torn tail is reported, not cut). Only a torn tail
        # may be wrong with it, and its replay must be what the reopened store will hold.
        crashed = None
        if os.path.isdir(self.store_dir) and os.path.exists(naming.meta_path(self.store_dir)):
            try:
                report_before, crashed = scan(self.store_dir, salvage=True, tables=True)
                crashed = _as_open_completes(crashed)
            except Exception as e:
                out.append(Violation(k, "verify", f"read-only scan of the crashed store failed:"
                                                  f" {type(e).__name__}: {e}"))
            else:
                if report_before.skipped:
                    out.append(Violation(k, "verify", "corruption in the crashed store: "
                                         + "; ".join(map(str, report_before.skipped))))
        options = dict(self.options, cleaner_backoff_ms=0, retention_check_interval_ms=0)
        try:
            store = OffsetStore.open(self.store_dir, **options)
        except Exception as e:
            return [Violation(k, "recovery", f"reopen failed: {type(e).__name__}: {e}")]
        try:
            report = store.recovery_report
            self.result.torn_tails_repaired += len(report.truncations)
            if report.skipped:
                out.append(Violation(k, "recovery", f"skipped regions: {report.skipped}"))
            tables = {p: part.table.as_dict() for p, part in enumerate(store._parts)}
            now: dict[Key, int] = {}
            values: dict[Key, tuple] = {}
            for group in store.groups():
                for tp, v in store.fetch(group).items():
                    now[(group, tp.topic, tp.partition)] = v.offset
                    values[(group, tp.topic, tp.partition)] = v
            try:
                scanned, replayed = scan(self.store_dir, salvage=False, tables=True)
            except Exception as e:
                out.append(Violation(k, "replay", f"full replay failed: {type(e).__name__}: {e}"))
            else:
                if not scanned.clean:
                    out.append(Violation(k, "replay", f"the log is not clean after reopening: "
                                                      f"{scanned}"))
                empty = {"offsets": {}, "group_metadata": {}}
                for p, table in tables.items():
                    full = replayed[p].as_dict() if p in replayed else empty
                    if table != full:
                        out.append(Violation(k, "replay", f"log partition {p}: the reopened "
                                             "table differs from a full replay of the log"))
                    if crashed is not None and (
                            table != (crashed[p].as_dict() if p in crashed else empty)):
                        out.append(Violation(k, "verify", f"log partition {p}: the read-only "
                                             "scan of the crashed store saw another state "
                                             "than recovery produced"))
        finally:
            store.close()

        # acknowledged: every acknowledged offset (or a later one) is there
        for group, items in calls:
            for topic, partition, offset in items:
                key = (group, topic, partition)
                if offset > self.acked.get(key, -1):
                    self.acked[key] = offset
        for key, offset in (self.acked if self.config.checks_acknowledged else {}).items():
            got = now.get(key)
            if got is None or got < offset:
                out.append(Violation(k, "acknowledged", f"{key}: acknowledged {offset}, "
                                                        f"found {got}"))
        # monotonic: nothing lower than after the previous reopen
        for key, offset in self.previous.items():
            got = now.get(key)
            if got is None or got < offset:
                out.append(Violation(k, "monotonic", f"{key}: was {offset}, now {got}"))
        if self.builtin:
            out += self._check_prefixes(k, now, values)
        self.previous = now
        return out

    def _check_prefixes(self, k: int, now: dict[Key, int], values: dict) -> list[Violation]:
        """Built-in workload: each thread's keys are exactly the state after a prefix of its
        calls (so every call is whole, and calls applied in order)."""
        out = []
        start = k * CYCLE_STRIDE + 1
        known = set()
        for t in range(self.config.threads):
            group = group_of(t, self.config.groups)
            topic = f"t{t}"
            mine = {key: v for key, v in now.items() if key[0] == group and key[1] == topic}
            known |= set(mine)
            for key in mine:
                v = values[key]
                if (v.metadata, v.leader_epoch) != ("", None):
                    out.append(Violation(k, "atomic", f"{key}: unexpected value {v}"))
            c = mine.get((group, topic, 0), 0)
            if c < self.progress[t]:
                continue  # reported as monotonic
            expected = dict(self.state[t])
            if c != self.progress[t]:
                if not start <= c < start + CYCLE_STRIDE:
                    out.append(Violation(k, "atomic", f"thread {t}: impossible progress {c}"))
                    continue
                for seq in range(start, c + 1):
                    for tp in call_keys(self.seed, t, seq):
                        expected[(group, tp.topic, tp.partition)] = seq
                self.result.applied += c - start + 1
            if mine != expected:
                diff = sorted((key, mine.get(key), expected.get(key))
                              for key in set(mine) | set(expected)
                              if mine.get(key) != expected.get(key))
                out.append(Violation(k, "atomic", f"thread {t}: not the state after a prefix "
                                     f"of whole calls (last applied call {c}); "
                                     f"(key, found, expected): {diff}"))
            self.state[t] = expected
            self.progress[t] = c
        stray = sorted(set(now) - known)
        if stray:
            out.append(Violation(k, "atomic", f"keys nobody committed: {stray[:10]}"))
        return out


def run_crashtest(directory: str | os.PathLike, config: CrashTestConfig | None = None, *,
                  workload: str | Callable | None = None,
                  progress: Callable[[int, CrashTestResult], None] | None = None
                  ) -> CrashTestResult:
    """Run the crash test in ``directory`` (created; must be empty) and return what it found.

    :param workload: ``None`` for the built-in committer, or a ``"module:function"`` string
        (or a module-level function, whose module the child can import) taking a
        ``offsetlog.recovery.crashtest.child.WorkloadContext``
    :param progress: called after every cycle with the cycle number and the result so far
    :return: the result; ``result.ok`` is False when any invariant was violated
    """
    config = config or CrashTestConfig()
    if callable(workload):
        workload = f"{workload.__module__}:{workload.__qualname__}"
    if workload is not None:
        try:  # fail here, clearly, rather than in every child
            load_workload(workload)
        except (ImportError, AttributeError) as e:
            raise ValueError(f"cannot load workload {workload!r}: {e}") from None
    directory = os.fspath(directory)
    if os.path.isdir(directory) and os.listdir(directory):
        raise ValueError(f"{directory} is not empty: the crash test needs a fresh directory")
    seed = config.seed if config.seed is not None else random.randrange(1 << 32)
    harness = _Harness(directory, config, workload, seed)
    os.makedirs(harness.work, exist_ok=True)
    started = time.monotonic()
    for k in range(config.cycles):
        found = harness.cycle(k)
        harness.result.cycles = k + 1
        harness.result.violations += found
        harness.result.duration_s = time.monotonic() - started
        if progress is not None:
            progress(k, harness.result)
        if found and config.stop_on_violation:
            break
        if (config.time_budget_s is not None and harness.result.duration_s > config.time_budget_s
                and k + 1 >= config.cycles // 2):
            break
    return harness.result


def check_store_options(options: dict) -> None:
    """Refuse a key that is no ``OffsetStore.open`` keyword here, in the harness: in the child
    it would fail every open, which the harness would report as recovery violations."""
    from offsetlog import OffsetStore  # the harness drives the engine; recovery does not
    params = inspect.signature(OffsetStore.open).parameters
    known = {n for n, p in params.items() if p.kind is inspect.Parameter.KEYWORD_ONLY}
    unknown = sorted(set(options) - known)
    if unknown:
        raise ValueError(f"unknown OffsetStore.open option(s): {', '.join(unknown)} "
                         f"(known: {', '.join(sorted(known))})")


def config_from_options(**kw) -> CrashTestConfig:
    """A ``CrashTestConfig`` from keyword arguments, ignoring ``None`` (CLI and fixture)."""
    names = {f.name for f in dataclasses.fields(CrashTestConfig)}
    unknown = set(kw) - names
    if unknown:
        raise TypeError(f"unknown crash-test settings: {sorted(unknown)}")
    return CrashTestConfig(**{k: v for k, v in kw.items() if v is not None})


__all__ = ["CrashTestConfig", "CrashTestResult", "Violation", "check_store_options",
           "config_from_options",
           "run_crashtest", "TOPIC_PARTITIONS"]
