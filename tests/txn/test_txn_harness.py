"""The shipped exactly-once harness (recovery/crashtest/exactly_once.py) with a few kill cycles; the
100-cycle run is by hand: ``python -m offsetlog.recovery.crashtest.exactly_once --dir DIR --cycles 100``."""

import sqlite3

import pytest

from offsetlog.recovery.crashtest import exactly_once as txn_harness
from offsetlog.recovery.crashtest.exactly_once import (
    ExactlyOnceViolation,
    run_harness,
    verify_ledger,
)


def test_few_kill_cycles_leave_every_record_exactly_once(tmp_path, seeded_random):
    report = run_harness(str(tmp_path / "eo"), cycles=6, records=150, batch=7,
                         seed=seeded_random.seed_value, max_kill_delay_s=0.4)
    assert report.cycles == 6
    conn = sqlite3.connect(str(tmp_path / "eo" / "service.db"))
    assert conn.execute("SELECT COUNT(*), COUNT(DISTINCT number) FROM derived").fetchone() \
        == (150, 150)


def test_the_ledger_check_catches_a_duplicate(tmp_path):
    conn = txn_harness.open_db(str(tmp_path / "db"))
    conn.execute("UPDATE offsetlog_progress SET next_offset = 2")
    conn.executemany("INSERT INTO offsetlog_ledger VALUES (?)", [(0,), (1,), (1,)])
    conn.close()
    with pytest.raises(ExactlyOnceViolation, match="duplicates: \\[1\\]"):
        verify_ledger(str(tmp_path / "db"))


def test_a_database_the_service_never_set_up_counts_as_no_progress(tmp_path):
    assert verify_ledger(str(tmp_path / "empty.db")) == 0
    with pytest.raises(ExactlyOnceViolation):
        verify_ledger(str(tmp_path / "empty.db"), complete_at=5)
