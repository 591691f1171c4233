"""Real crash tests, through the shipped harness (recovery/crashtest/harness.py): a child process
commits from several threads and is SIGKILLed at seeded random moments, again and again on the
same directory; after every kill the store is reopened and every invariant checked (no
acknowledged commit lost, calls whole and in order, nothing goes backwards, the reopened
tables equal a full replay of the log). See docs/CRASHTEST.md.

Cycle counts here are small to keep the suite fast; the long run (>= 200 cycles) is
``offsetlog crashtest`` by hand, reported in bench/RESULTS.md.
"""

from __future__ import annotations

import pytest

from offsetlog.cli import main as cli_main
from offsetlog.compaction.cleaner import STEPS
from offsetlog.log import segment
from offsetlog.recovery.crashtest.harness import CrashTestConfig, run_crashtest
from support.durability_helpers import Seeded


def run(tmp_path, rng: Seeded, **settings):
    config = CrashTestConfig(seed=rng.seed_value, **settings)
    result = run_crashtest(tmp_path / "ct", config)
    print(result.summary())
    assert result.ok, rng.why(result.summary())
    assert result.applied > 0, rng.why(f"no commit ever landed: {result.summary()}")
    return result


@pytest.mark.slow
def test_kill9_during_sync_commits_loses_nothing_acknowledged(tmp_path):
    rng = Seeded()
    result = run(tmp_path, rng, cycles=20, threads=6, groups=4, partitions=3,
                 async_fraction=0.0, segment_bytes=16 * 1024, time_budget_s=25)
    assert result.acknowledged > 0, rng.why(result.summary())


@pytest.mark.slow
def test_kill9_during_mixed_async_and_sync_commits_keeps_calls_whole_and_in_order(tmp_path):
    rng = Seeded()
    result = run(tmp_path, rng, cycles=16, threads=6, groups=3, partitions=50,
                 async_fraction=0.6, segment_bytes=8 * 1024, time_budget_s=20)
    assert result.acknowledged > 0, rng.why(result.summary())


@pytest.mark.slow
def test_power_loss_after_kill_drops_only_unsynced_bytes(tmp_path):
    """SIGKILL, then drop a random part of every partition's unsynced tail (a power cut)."""
    rng = Seeded()
    result = run(tmp_path, rng, cycles=16, threads=6, groups=4, partitions=3,
                 async_fraction=0.6, segment_bytes=16 * 1024, power_loss=True,
                 early_kill_probability=0.0, time_budget_s=20)
    assert result.bytes_cut > 0, rng.why(f"no unsynced bytes were ever dropped: {result}")
    assert result.torn_tails_repaired > 0, rng.why(f"no torn tail was ever repaired: {result}")


@pytest.mark.slow
def test_power_loss_that_persists_a_round_out_of_order_reopens_without_it(tmp_path):
    """Rounds of several batches (plain commits beside transactions, one log partition),
    each written by one write; a third of the harness's power cuts are holes with the rest
    of the unsynced bytes kept, so a hole can be followed by valid batches that were never
    acknowledged. Recovery must cut from the hole on (it lies past the recovery point), not
    refuse the store as corrupt. Without the recovery point the store fails to reopen within
    a few cycles in most runs; the recovery tests pin the rule itself."""
    rng = Seeded()
    result = _power_cuts_in_one_partition(tmp_path, rng, "rounds_of_several_batches",
                                          cycles=24, threads=8)
    assert result.holes > 0 and result.acknowledged > 0, rng.why(result.summary())


def _power_cuts_in_one_partition(tmp_path, rng, workload: str, *, write_ahead: bool = True,
                                 **config):
    """A crash test of ``workload`` (in support.crash_workloads) on a store of one log
    partition under ``fsync="always"`` (with its write-ahead file or without), a power cut
    after every kill; its result, which must be ok."""
    config = CrashTestConfig(seed=rng.seed_value, partitions=1, power_loss=True,
                             early_kill_probability=0.0, segment_bytes=1 << 20,
                             time_budget_s=30,
                             store_options={"fsync": "always", "write_ahead": write_ahead},
                             **config)
    result = run_crashtest(tmp_path / "ct", config,
                           workload=f"support.crash_workloads:{workload}")
    print(result.summary())
    assert result.ok, rng.why(result.summary())
    return result


@pytest.mark.slow
def test_power_loss_keeps_a_followers_durable_write_and_cuts_the_hole_before_it(tmp_path):
    """Two threads in one log partition, so a commit often follows the other's lone write
    and writes beside it; their writes end in a random order. A kill while the first is
    still writing leaves the follower's batch durable past unsynced bytes: the power cut may
    lose only the unsynced ones (a hole before a durable batch), and recovery must cut from
    the hole on, taking back nothing acknowledged. With the sync log read as a prefix (the
    harness before followers), the follower's durable line covered its predecessor's bytes
    too and no such hole was ever cut. (Each batch synced in its segment: without the
    write-ahead file, whose rounds make both durable at once.)"""
    from support.crash_workloads import FOLLOWERS_FIRST

    rng = Seeded()
    result = _power_cuts_in_one_partition(tmp_path, rng, "followers_ending_first",
                                          write_ahead=False, cycles=16, threads=2,
                                          sync_delay_ms=0)
    firsts = tmp_path / "ct" / FOLLOWERS_FIRST
    assert firsts.exists() and firsts.read_text().count("first") >= 2, rng.why(result.summary())
    assert result.cut_before_durable > 0 and result.acknowledged > 0, rng.why(result.summary())


def test_verify_foresees_the_markers_open_writes_for_a_decided_transaction(tmp_path):
    """Children killed between a transaction's decision and its markers, its transactional
    id's log partition not its group's: the read-only scan of each crashed store, with the
    markers that open will write, is exactly the state open produces (the verify
    invariant), in the group's partition as in the transaction's own."""
    from support.crash_workloads import DECIDED_KILLS

    rng = Seeded()
    config = CrashTestConfig(seed=rng.seed_value, cycles=10, threads=2, partitions=3,
                             early_kill_probability=0.0, time_budget_s=30)
    result = run_crashtest(tmp_path / "ct", config,
                           workload="support.crash_workloads:transactions_killed_once_decided")
    print(result.summary())
    assert result.ok, rng.why(result.summary())
    kills = tmp_path / "ct" / DECIDED_KILLS
    assert kills.exists() and kills.read_text().count("kill") >= 2, rng.why(result.summary())


@pytest.mark.slow
def test_kill9_mid_compaction_and_at_every_swap_step(tmp_path):
    """A compaction loop runs beside the commits; every other cycle the child kills itself
    at the next step of a cleaner swap; tails are torn now and then."""
    rng = Seeded()
    result = run(tmp_path, rng, cycles=2 * len(STEPS) + 2, threads=4, groups=3, partitions=2,
                 compaction=True, tear_tail=0.5, early_kill_probability=0.0)
    # Every step is reached: the later ones wait for the partition's writer
    # (GroupCommitter.exclusive), which no longer starts new rounds while a swap waits.
    assert set(STEPS) <= set(result.killed_at_step), rng.why(result.summary())


def test_the_harness_reports_an_acknowledged_commit_that_is_not_there(tmp_path):
    result = run_crashtest(tmp_path / "ct", CrashTestConfig(cycles=3, threads=2,
                                                            early_kill_probability=0.0),
                           workload="support.crash_workloads:acks_what_it_never_commits")
    assert not result.ok and result.cycles == 1  # stops at the first violation
    assert {v.invariant for v in result.violations} == {"acknowledged"}, result.summary()
    assert "liar" in str(result.violations[0])


@pytest.mark.slow
@pytest.mark.parametrize("fsync", ["interval", "never"])
def test_power_loss_under_the_lax_policies_always_reopens_as_a_prefix(tmp_path, fsync):
    """Under "interval" and "never" a power cut may take back acknowledged commits, and the
    unsynced tail holds many writes, which a power cut can leave with holes between them
    (a third of the harness's cuts). The store must still reopen by itself, each thread's
    keys the state after a prefix of its calls (``atomic``): recovery cuts from the first
    hole past the recovery point. Without the recovery points it refused to reopen in the
    first cycle of every run tried."""
    rng = Seeded()
    config = CrashTestConfig(seed=rng.seed_value, cycles=10, threads=6, groups=3, partitions=3,
                             power_loss=True, early_kill_probability=0.0,
                             segment_bytes=1 << 20, time_budget_s=20,
                             store_options={"fsync": fsync, "fsync_interval_ms": 50})
    assert not config.checks_acknowledged
    result = run_crashtest(tmp_path / "ct", config)
    print(result.summary())
    assert result.ok, rng.why(result.summary())
    assert result.applied > 0 and result.holes > 0, rng.why(result.summary())


def test_a_power_cut_before_the_store_exists_cuts_nothing(tmp_path):
    """Every child killed as it starts: the first may die before it created the store,
    and the simulated power cut then has nothing to cut (it used to raise
    FileNotFoundError). (A child can be quick enough to finish its start-up before the kill
    lands: seen once in a CI run, 1 of 2 killed during start-up; so at least one.)"""
    rng = Seeded()
    result = run_crashtest(tmp_path / "ct", CrashTestConfig(
        seed=rng.seed_value, cycles=2, threads=2, partitions=3, power_loss=True,
        early_kill_probability=1.0, kill_delay_s=(0.0, 0.0)))
    assert result.ok and result.killed_during_startup >= 1, rng.why(result.summary())


def test_pytest_fixture_crash_tests_a_service_workload(offsetlog_crashtest):
    """What a service embedding offsetlog writes in its own suite (docs/CRASHTEST.md)."""
    result = offsetlog_crashtest(workload="support.crash_workloads:consumer_loop", cycles=6, threads=3,
                                 early_kill_probability=0.0,
                                 store_options={"partitions": 5, "fsync": "always"})
    assert result.cycles == 6 and result.acknowledged > 0


def test_cli_crashtest_exit_status(tmp_path, capsys):
    assert cli_main(["crashtest", str(tmp_path / "ok"), "--cycles", "3", "--threads", "2",
                     "--seed", "7", "--compaction", "--tear-tail", "0.5",
                     "--option", "partitions=2"]) == 0
    out = capsys.readouterr().out
    assert "0 violations" in out or "violations: 0" in out, out
    # Several cycles: one whose child is killed before its first acknowledgement (start-up
    # kills, or a loaded machine) finds nothing, and the run must still catch the liar.
    assert cli_main(["crashtest", str(tmp_path / "bad"), "--cycles", "6", "--threads", "1",
                     "--workload", "support.crash_workloads:acks_what_it_never_commits"]) == 1
    assert "acknowledged" in capsys.readouterr().out


@pytest.mark.slow
@pytest.mark.parametrize("workload, threads", [
    # Back-to-back commit_async calls share one batch and one future, resolved once the round
    # carrying them is durable: bursts of them between sync calls, each acknowledged when its
    # future resolved.
    pytest.param("async_bursts_acked_by_futures", 3, id="shared-futures"),
    # The child's rounds written by the combined write + sync (the workload checks it is in
    # use and logged), the store without its write-ahead file: every byte it wrote is
    # durable when it returns.
    pytest.param("committer_on_the_combined_write", 4, id="pwritev-rwf-dsync",
                 marks=pytest.mark.skipif(segment._write_dsync is None,
                                          reason="no pwritev/RWF_DSYNC here")),
    # The usual writes made durable in the store's write-ahead file (the workload checks it
    # holds entries): the power cut takes their bytes from the segments, and every reopen
    # must write back those acknowledged.
    pytest.param("committer_through_the_write_ahead_file", 4, id="write-ahead",
                 marks=pytest.mark.skipif(segment._write_dsync is None,
                                          reason="no pwritev/RWF_DSYNC here")),
])
def test_kill9_and_power_loss_take_back_nothing_acknowledged(tmp_path, workload, threads):
    """SIGKILL and a power cut (half the time zeroing the lost bytes inside the preallocated
    reserve) after each cycle must not take back anything acknowledged; anything a kill left
    unsynced may be cut."""
    rng = Seeded()
    # (10 cycles: a CI run on a loaded machine once tore nothing in 6, its kills all landing
    # outside the unsynced windows; the tear asserted below shows the run tested something)
    config = CrashTestConfig(seed=rng.seed_value, cycles=10, threads=threads, partitions=2,
                             power_loss=True, early_kill_probability=0.0, segment_bytes=4096,
                             time_budget_s=12,
                             store_options={"fsync": "always",
                                            "write_ahead": workload != "committer_on_the_combined_write"})
    result = run_crashtest(tmp_path / "ct", config, workload=f"support.crash_workloads:{workload}")
    print(result.summary())
    assert result.ok, rng.why(result.summary())
    assert result.acknowledged > 0 and result.tails_torn > 0, rng.why(result.summary())
