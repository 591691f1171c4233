"""Real crash tests of transactions: a child process is SIGKILLed at every step of finishing a
transaction (via the store's fault hook) and at random moments of a commit loop; after each
kill the parent reopens the store and checks that what it shows is exactly what was durable:

* a crash before the decision leaves the transaction open (pending, invisible) or prepared;
* a crash after the decision (PrepareCommit / PrepareAbort written), even with only some
  markers written, is completed on reopen (roll-forward): both groups, on two log
  partitions, show the transaction's offsets, or neither does;
* a prepared transaction stays prepared across the crash until a handle decides it.
"""

from __future__ import annotations

import json
import subprocess
import sys
import time
from pathlib import Path

import pytest

from offsetlog.errors import UnstableOffsetCommitError
from offsetlog.partitioner import partition_for
from support.durability_helpers import Seeded, open_store
from support.txn_crash_child import KEY_G, KEY_H, PLAIN_VALUE, TXN_VALUE

CHILD = str(Path(__file__).parents[1] / "support" / "txn_crash_child.py")
PARTITIONS = 5
assert partition_for("g", PARTITIONS) != partition_for("h", PARTITIONS)


def run_child(tmp_path, config, *, kill_after_s=None) -> list[str]:
    ack = tmp_path / f"ack-{time.monotonic_ns()}"
    config = dict(config, dir=str(tmp_path / "store"), ack_file=str(ack),
                  partitions=PARTITIONS)
    child = subprocess.Popen([sys.executable, CHILD, json.dumps(config)],
                             stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
    try:
        if kill_after_s is not None:
            deadline = time.monotonic() + 30
            while (not ack.exists() or b"READY" not in ack.read_bytes()) and (
                    time.monotonic() < deadline and child.poll() is None):
                time.sleep(0.005)
            time.sleep(kill_after_s)
            child.kill()
        _, err = child.communicate(timeout=60)
    finally:
        if child.poll() is None:
            child.kill()
            child.wait()
    assert child.returncode == -9, err.decode()
    return ack.read_text().split("\n") if ack.exists() else []


def both(store) -> tuple:
    return (store.committed("g", KEY_G).offset, store.committed("h", KEY_H).offset)


# hook calls: 1 "decided", 2 "marker" (first partition), 3 "marker" (second), 4 "completed"
@pytest.mark.parametrize("action,kill_at", [
    ("commit", 1), ("commit", 2), ("commit", 3), ("commit", 4),
    ("abort", 1), ("abort", 2),
    ("prepare-commit", 2), ("prepare-abort", 2)])
def test_a_crash_after_the_decision_is_rolled_forward(tmp_path, action, kill_at):
    lines = run_child(tmp_path, {"mode": "step", "action": action, "kill_at": kill_at})
    assert "DONE" not in lines
    with open_store(tmp_path / "store", transaction_check_interval_ms=0) as s:
        assert s.transaction_state("t").state in ("CompleteCommit", "CompleteAbort")
        want = TXN_VALUE if action.endswith("commit") else PLAIN_VALUE
        assert both(s) == (want, want)
        assert s.fetch("g", require_stable=True) and s.fetch("h", require_stable=True)


@pytest.mark.parametrize("kill_at", [1, 2, 3])
def test_a_crash_in_a_fencing_timeout_abort_is_rolled_forward_still_fenced(tmp_path, kill_at):
    """The store aborts a timed-out transaction with the producer epoch bumped (a store
    opened with ``fence_on_transaction_timeout``); killed after that decision, reopen
    completes the abort and the bump stands: the old epoch stays fenced."""
    lines = run_child(tmp_path, {"mode": "step", "action": "timeout", "kill_at": kill_at})
    assert "DONE" not in lines
    with open_store(tmp_path / "store", transaction_check_interval_ms=0) as s:
        state = s.transaction_state("t")
        assert (state.state, state.producer_epoch) == ("CompleteAbort", 1)  # init gave 0
        assert both(s) == (PLAIN_VALUE, PLAIN_VALUE)
        assert s.fetch("g", require_stable=True) and s.fetch("h", require_stable=True)
        assert s.resume_transaction("t").producer_epoch == 1


def test_a_prepared_transaction_stays_prepared_across_crashes(tmp_path):
    lines = run_child(tmp_path, {"mode": "step", "action": "prepare", "kill_at": 0})
    assert "PREPARED" in lines
    with open_store(tmp_path / "store", transaction_check_interval_ms=0) as s:
        assert s.transaction_state("t").state == "Prepared"
        assert both(s) == (PLAIN_VALUE, PLAIN_VALUE)
        with pytest.raises(UnstableOffsetCommitError):
            s.fetch("g", require_stable=True)
    with open_store(tmp_path / "store", transaction_check_interval_ms=0) as s:  # still so
        kept = s.init_transactions("t", keep_prepared=True)
        assert kept.prepared
        kept.commit()
        assert both(s) == (TXN_VALUE, TXN_VALUE)


def test_a_crash_in_an_open_transaction_leaves_it_pending_until_init_aborts_it(tmp_path):
    run_child(tmp_path, {"mode": "step", "action": "open", "kill_at": 0})
    with open_store(tmp_path / "store", transaction_check_interval_ms=0) as s:
        assert s.transaction_state("t").state == "Ongoing"
        assert both(s) == (PLAIN_VALUE, PLAIN_VALUE)
        with pytest.raises(UnstableOffsetCommitError):
            s.fetch("h", require_stable=True)
        assert not s.init_transactions("t", keep_prepared=True).prepared
        assert both(s) == (PLAIN_VALUE, PLAIN_VALUE)
        assert s.fetch("h", require_stable=True)


def test_random_kills_show_exactly_the_durable_outcome(tmp_path):
    rng = Seeded()
    start, last = 1, (0, 0)
    cycles = 8
    for k in range(cycles):
        lines = run_child(tmp_path, {"mode": "loop", "start": start},
                          kill_after_s=rng.uniform(0.0, 0.4))
        decided = [int(x.split()[1]) for x in lines if x.startswith("D ")]
        committed = [int(x.split()[1]) for x in lines if x.startswith("C ")]
        with open_store(tmp_path / "store", partitions=PARTITIONS,
                        transaction_check_interval_ms=0) as s:
            g, h = both(s) if s.committed("g", KEY_G) else (0, 0)
            assert g == h, rng.why(f"cycle {k}: a transaction was half applied: {g} != {h}")
            # "D i" is written just after i's decision became durable, "C i" after commit()
            # returned: the state is the last decided transaction, or the one after it when
            # the kill fell between its durable decision and the line.
            floor = max(decided + committed, default=last[0])
            started = (committed[-1] if committed else start - 1) + 1
            assert floor <= g <= max(started, last[0]), rng.why(
                f"cycle {k}: shows {g}; decided up to {floor}, started up to {started}")
            assert (g, h) >= last, rng.why("values went backwards")
            last = (g, h)
            start = max(g, start) + 1
            # the next run's init_transactions aborts whatever was left open
