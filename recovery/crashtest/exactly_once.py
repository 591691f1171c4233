"""An exactly-once crash harness: a service that reads numbered input records, writes derived
rows into its own SQLite database and records its progress through a *prepared* offsetlog
transaction, killed with SIGKILL again and again, must end with every input record reflected
exactly once.

The service's protocol (two-phase commit with the database as the coordinator, KIP-939)::

    BEGIN (database)          rows for records [pos, end) and progress = end, not committed
    txn.begin(); txn.commit_offsets(group, {tp: end}); txn.prepare()     offsetlog: prepared
    COMMIT (database)         the decision: the batch is in the database
    txn.commit()              offsetlog: committed

and on every start::

    txn = store.init_transactions(tid, keep_prepared=True)
    if txn.prepared:          decide by looking at the database
        commit if the database's progress equals the prepared offset, else abort

after which the committed offset must equal the database's progress (checked on every start).

Point it at your own processing function (``module:function``, importable by a child
process), called inside the database transaction for each record::

    def process(conn: sqlite3.Connection, number: int, payload: bytes) -> None: ...

    python -m offsetlog.recovery.crashtest.exactly_once --dir /tmp/eo --cycles 100 --process mymod:process

or from Python: ``run_harness(work_dir, process="mymod:process", cycles=100)``. Optional
``setup(conn)`` creates your tables; optional ``check(conn, records)`` raises if your rows are
wrong after the run. The harness keeps its own ledger (one row per processed record, no
unique constraint, so a duplicate would show) and checks it after every cycle.
"""

from __future__ import annotations

import argparse
import hashlib
import importlib
import json
import os
import random
import signal
import sqlite3
import subprocess
import sys
import time
from collections import Counter
from dataclasses import asdict, dataclass, field
from typing import Callable

from offsetlog.types import TopicPartition

GROUP = "exactly-once"
TOPIC_PARTITION = TopicPartition("input", 0)
TRANSACTIONAL_ID = "exactly-once-service"
#: where a service may kill itself (besides the parent's kills at random times)
STEPS = ("processing", "prepared", "db-committed", "decided", "marker", "committed")

ProcessFn = Callable[[sqlite3.Connection, int, bytes], None]


class ExactlyOnceViolation(AssertionError):
    """The database and the committed offset disagree: a record was lost or duplicated."""


# -- the example processing function (the default) ------------------------------------------

def input_record(number: int) -> bytes:
    """The numbered input stream the service reads."""
    return f"input-{number}".encode()


def setup_derived(conn: sqlite3.Connection) -> None:
    conn.execute("CREATE TABLE IF NOT EXISTS derived (number INTEGER NOT NULL, "
                 "digest TEXT NOT NULL)")


def derive_rows(conn: sqlite3.Connection, number: int, payload: bytes) -> None:
    """Writes one derived row per input record: its number and a digest of its payload."""
    conn.execute("INSERT INTO derived (number, digest) VALUES (?, ?)",
                 (number, hashlib.sha256(payload).hexdigest()[:16]))


def check_derived(conn: sqlite3.Connection, records: int) -> None:
    rows = conn.execute("SELECT number, digest FROM derived ORDER BY number").fetchall()
    want = [(n, hashlib.sha256(input_record(n)).hexdigest()[:16]) for n in range(records)]
    if rows != want:
        raise ExactlyOnceViolation(f"derived rows: {len(rows)} rows, want {records} "
                                   "(one per input record)")


def _load(spec: str | None):
    if not spec:
        return None
    module, _, name = spec.partition(":")
    return getattr(importlib.import_module(module), name)


# -- the service (runs in the child process) --------------------------------------------------

@dataclass
class ServiceConfig:
    store_dir: str
    db_path: str
    records: int
    batch: int = 10
    process: str = "offsetlog.recovery.crashtest.exactly_once:derive_rows"
    setup: str | None = "offsetlog.recovery.crashtest.exactly_once:setup_derived"
    partitions: int = 5
    #: (step, batches to complete first) at which the service SIGKILLs itself, or None
    kill_at: tuple[str, int] | None = None
    events_file: str | None = None


def open_db(path: str) -> sqlite3.Connection:
    conn = sqlite3.connect(path, isolation_level=None)  # transactions are explicit
    conn.execute("PRAGMA journal_mode=WAL")
    conn.execute("PRAGMA synchronous=FULL")
    # One transaction, so a kill cannot leave the progress table without its row.
    conn.executescript("""
        BEGIN IMMEDIATE;
        CREATE TABLE IF NOT EXISTS offsetlog_ledger (number INTEGER NOT NULL);
        CREATE TABLE IF NOT EXISTS offsetlog_progress
            (id INTEGER PRIMARY KEY CHECK (id = 0), next_offset INTEGER NOT NULL);
        INSERT OR IGNORE INTO offsetlog_progress VALUES (0, 0);
        COMMIT;
    """)
    return conn


def db_progress(conn: sqlite3.Connection) -> int:
    return conn.execute("SELECT next_offset FROM offsetlog_progress").fetchone()[0]


def serve(cfg: ServiceConfig) -> int:
    """Process input records until all are done; returns the committed offset."""
    from offsetlog.store import OffsetStore

    process: ProcessFn = _load(cfg.process)
    setup = _load(cfg.setup)
    events = os.open(cfg.events_file, os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o644) \
        if cfg.events_file else None
    batches_done = 0

    def event(text: str) -> None:
        if events is not None:
            os.write(events, (text + "\n").encode())

    def maybe_die(step: str) -> None:
        if cfg.kill_at is not None and cfg.kill_at[0] == step and batches_done >= cfg.kill_at[1]:
            event(f"KILL {step}")
            os.kill(os.getpid(), signal.SIGKILL)

    conn = open_db(cfg.db_path)
    if setup is not None:
        setup(conn)
    with OffsetStore.open(cfg.store_dir, partitions=cfg.partitions,
                          retention_check_interval_ms=0) as store:
        store._transactions.fault_hook = lambda step, meta: maybe_die(step)
        txn = store.init_transactions(TRANSACTIONAL_ID, keep_prepared=True)
        progress = db_progress(conn)
        if txn.prepared:
            held = txn.pending_offsets().get(GROUP, {}).get(TOPIC_PARTITION)
            if held is not None and held.offset == progress:
                txn.commit()  # the database has the batch: the decision was commit
                event("RESOLVED commit")
            else:
                txn.abort()
                event("RESOLVED abort")
        found = store.committed(GROUP, TOPIC_PARTITION, require_stable=True)
        committed = 0 if found is None else found.offset
        if committed != progress:
            raise ExactlyOnceViolation(f"committed offset {committed} but the database has "
                                       f"processed up to {progress}")
        event("READY")
        pos = committed
        while pos < cfg.records:
            end = min(pos + cfg.batch, cfg.records)
            conn.execute("BEGIN IMMEDIATE")
            for number in range(pos, end):
                process(conn, number, input_record(number))
                conn.execute("INSERT INTO offsetlog_ledger (number) VALUES (?)", (number,))
                maybe_die("processing")
            conn.execute("UPDATE offsetlog_progress SET next_offset = ?", (end,))
            txn.begin()
            txn.commit_offsets(GROUP, {TOPIC_PARTITION: end})
            txn.prepare()
            maybe_die("prepared")
            conn.execute("COMMIT")
            maybe_die("db-committed")
            txn.commit()
            batches_done += 1
            maybe_die("committed")
            pos = end
        return pos


# -- the parent -------------------------------------------------------------------------------

@dataclass
class HarnessReport:
    cycles: int = 0
    records: int = 0
    timed_kills: int = 0
    step_kills: dict = field(default_factory=dict)
    resolved: dict = field(default_factory=dict)  # "commit"/"abort" -> prepared txns decided
    exits_before_kill: int = 0  # cycles where the service finished before the kill
    cycles_with_progress: int = 0  # cycles in which the database's progress advanced
    duration_s: float = 0.0
    seed: int = 0

    def __str__(self) -> str:
        return (f"{self.cycles} SIGKILL cycles over {self.records} records (seed {self.seed}): "
                f"{self.timed_kills} at random times, step kills {self.step_kills}, prepared "
                f"transactions resolved {self.resolved}, {self.cycles_with_progress} cycles made "
                f"progress, {self.exits_before_kill} runs finished first; every record "
                f"exactly once; {self.duration_s:.1f} s")


def _spawn(cfg: ServiceConfig) -> subprocess.Popen:
    env = dict(os.environ, PYTHONPATH=os.pathsep.join(p for p in sys.path if p))
    return subprocess.Popen([sys.executable, "-m", "offsetlog.recovery.crashtest.exactly_once", "--serve",
                             json.dumps(asdict(cfg))], env=env,
                            stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)


def verify_ledger(db_path: str, *, complete_at: int | None = None) -> int:
    """Raise unless every record up to the database's progress is in the ledger exactly once
    (and, with ``complete_at``, the progress is that); returns the progress."""
    conn = sqlite3.connect(db_path)
    try:
        tables = {name for (name,) in conn.execute(
            "SELECT name FROM sqlite_master WHERE type = 'table'")}
        if "offsetlog_progress" not in tables:  # killed before the service created them
            if complete_at:
                raise ExactlyOnceViolation(f"no progress recorded, expected {complete_at}")
            return 0
        progress = conn.execute("SELECT next_offset FROM offsetlog_progress").fetchone()[0]
        numbers = [n for (n,) in conn.execute(
            "SELECT number FROM offsetlog_ledger ORDER BY number")]
    finally:
        conn.close()
    if numbers != list(range(progress)):
        dup = [n for n, c in Counter(numbers).items() if c > 1]
        raise ExactlyOnceViolation(f"ledger holds {len(numbers)} rows for progress {progress}"
                                   f" (duplicates: {dup[:10]})")
    if complete_at is not None and progress != complete_at:
        raise ExactlyOnceViolation(f"progress {progress}, expected {complete_at}")
    return progress


def run_harness(work_dir: str, *, cycles: int = 100, records: int = 200_000, batch: int = 10,
                process: str = "offsetlog.recovery.crashtest.exactly_once:derive_rows",
                setup: str | None = "offsetlog.recovery.crashtest.exactly_once:setup_derived",
                check: str | None = "offsetlog.recovery.crashtest.exactly_once:check_derived",
                seed: int | None = None, max_kill_delay_s: float = 0.5,
                log: Callable[[str], None] | None = None) -> HarnessReport:
    """Run the service ``cycles`` times, SIGKILLing each run (at a random time, or at a
    random step of the protocol), then once to the end; verify exactly-once throughout.

    :raises ExactlyOnceViolation: a record was lost or duplicated, or the committed offset
        and the database disagree
    """
    os.makedirs(work_dir, exist_ok=True)
    seed = random.randrange(1 << 32) if seed is None else seed
    rng = random.Random(seed)
    report = HarnessReport(records=records, seed=seed)
    started = time.perf_counter()
    base = ServiceConfig(store_dir=os.path.join(work_dir, "offsets"),
                         db_path=os.path.join(work_dir, "service.db"), records=records,
                         batch=batch, process=process, setup=setup,
                         events_file=os.path.join(work_dir, "events.log"))
    steps: Counter = Counter()
    progress = 0
    for k in range(cycles):
        timed = rng.random() < 0.5
        cfg = ServiceConfig(**{**asdict(base), "kill_at": None if timed else
                               (rng.choice(STEPS), rng.randrange(0, 4))})
        child = _spawn(cfg)
        if timed:
            time.sleep(rng.uniform(0, max_kill_delay_s))
            child.send_signal(signal.SIGKILL)
        try:
            _, err = child.communicate(timeout=120)
        except subprocess.TimeoutExpired:
            child.kill()
            child.communicate()
            raise
        if child.returncode == 0:
            report.exits_before_kill += 1
        elif child.returncode == -signal.SIGKILL:
            if timed:
                report.timed_kills += 1
            else:
                steps[cfg.kill_at[0]] += 1
        else:
            raise ExactlyOnceViolation(f"cycle {k}: the service failed (exit "
                                       f"{child.returncode}, seed {seed}):\n{err.decode()}")
        now = verify_ledger(base.db_path)
        report.cycles_with_progress += now > progress
        progress = now
        report.cycles += 1
        if log is not None and (k + 1) % 10 == 0:
            log(f"{k + 1}/{cycles} cycles, progress {verify_ledger(base.db_path)}")
    child = _spawn(base)  # to the end
    _, err = child.communicate(timeout=600)
    if child.returncode != 0:
        raise ExactlyOnceViolation(f"final run failed (seed {seed}):\n{err.decode()}")
    verify_ledger(base.db_path, complete_at=records)
    from offsetlog.store import OffsetStore

    with OffsetStore.open(base.store_dir, retention_check_interval_ms=0) as store:
        committed = store.committed(GROUP, TOPIC_PARTITION, require_stable=True)
    if committed is None or committed.offset != records:
        raise ExactlyOnceViolation(f"committed offset {committed} at the end, not {records}")
    check_fn = _load(check)
    if check_fn is not None:
        conn = sqlite3.connect(base.db_path)
        try:
            check_fn(conn, records)
        finally:
            conn.close()
    with open(base.events_file) as f:
        report.resolved = dict(Counter(line.split()[1] for line in f
                                       if line.startswith("RESOLVED")))
    report.step_kills = dict(steps)
    report.duration_s = time.perf_counter() - started
    return report


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m offsetlog.recovery.crashtest.exactly_once",
                                     description=__doc__.split("\n\n")[0])
    parser.add_argument("--dir", help="work directory (store + SQLite database); must be new")
    parser.add_argument("--cycles", type=int, default=100)
    parser.add_argument("--records", type=int, default=200_000,
                        help="input records; enough that the kill cycles do not finish them")
    parser.add_argument("--batch", type=int, default=10)
    parser.add_argument("--process", default="offsetlog.recovery.crashtest.exactly_once:derive_rows",
                        help="module:function called per record inside the database txn")
    parser.add_argument("--setup", default="offsetlog.recovery.crashtest.exactly_once:setup_derived")
    parser.add_argument("--check", default="offsetlog.recovery.crashtest.exactly_once:check_derived")
    parser.add_argument("--seed", type=int)
    parser.add_argument("--serve", help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    if args.serve:
        cfg = json.loads(args.serve)
        if cfg.get("kill_at"):
            cfg["kill_at"] = tuple(cfg["kill_at"])
        serve(ServiceConfig(**cfg))
        return 0
    if not args.dir:
        parser.error("--dir is required")
    report = run_harness(args.dir, cycles=args.cycles, records=args.records, batch=args.batch,
                         process=args.process, setup=args.setup, check=args.check,
                         seed=args.seed, log=print)
    print(report)
    return 0


if __name__ == "__main__":
    sys.exit(main())
