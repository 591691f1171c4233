"""``offsetlog recover [--salvage]`` and ``offsetlog.recovery.tools.salvage``: corruption before the tail is an
error unless salvage is asked for; salvage cuts out exactly the corrupt bytes, keeps every
other batch at its offset, reports every dropped range, survives a crash at any swap step,
and drops stale snapshots."""

from __future__ import annotations

import os

import pytest

import offsetlog.recovery.tools.salvage as salvage_mod
from offsetlog.cli import main as cli_main
from offsetlog.compaction.cleaner import STEPS
from offsetlog.errors import CorruptLogError, StoreLockedError
from offsetlog.log import write_ahead
from offsetlog.recovery.tools.inspect import iter_records
from offsetlog.recovery.tools.salvage import recover_store, salvage_store
from support.durability_helpers import (
    TP,
    CommitLog,
    copy_store,
    file_sizes,
    flip_byte,
    open_store,
    rebase,
    segment_files,
    store_state,
    truncate,
)


def build(path, n=60) -> CommitLog:
    store = open_store(path, partitions=1, segment_bytes=2048)
    log = CommitLog(store)
    for i in range(n):
        log.commit("g", {TP("t", i % 5): i, TP("u", 0): i})
    store.close()
    return log


def offsets_of(path) -> dict[int, list]:
    return {off: rec for _, _, _, off, rec in iter_records(str(path))}


@pytest.mark.parametrize("where", [0, 4, 9, 30, -1])  # length, header CRC, CRC, fields, payload
def test_salvage_cuts_out_exactly_the_corrupt_batch_and_keeps_every_other_offset(
        tmp_path, where):
    log = build(tmp_path / "s")
    before = offsets_of(tmp_path / "s")
    victim = 7
    path, start, end = log.spans[victim]
    flip_byte(path, start + where if where >= 0 else end - 1)
    with pytest.raises(CorruptLogError) as err:
        recover_store(tmp_path / "s")
    assert (err.value.path, err.value.position) == (path, start)
    report = salvage_store(tmp_path / "s")
    [region] = report.regions
    assert (region.path, region.position, region.bytes_dropped) == (path, start, end - start)
    assert region.action == "dropped" and region.reason
    assert region.offsets_lost == (2 * victim, 2 * victim + 1)  # two records a commit
    assert report.rewritten == [path]
    after = offsets_of(tmp_path / "s")
    assert after == {o: r for o, r in before.items() if o not in (14, 15)}
    with open_store(tmp_path / "s") as store:
        assert store.recovery_report.clean
        assert store_state(store) == log.model(keep=lambda i: i != victim)
    assert salvage_store(tmp_path / "s").regions == []  # nothing left to do


def test_salvage_of_the_active_segment_with_a_torn_tail_reports_both(tmp_path):
    log = build(tmp_path / "s")
    last = segment_files(tmp_path / "s")[0][-1]
    spans = [(i, s) for i, s in enumerate(log.spans) if s[0] == last]
    (i1, (_, a1, b1)), (i_last, (_, a2, b2)) = spans[1], spans[-1]
    flip_byte(last, a1 + 20)
    truncate(last, b2 - 3)  # the last commit is torn
    report = salvage_store(tmp_path / "s")
    got = sorted((r.position, r.bytes_dropped) for r in report.regions)
    assert got == [(a1, b1 - a1), (a2, b2 - 3 - a2)], report
    with open_store(tmp_path / "s") as store:
        assert store.recovery_report.clean
        assert store_state(store) == log.model(upto=i_last, keep=lambda i: i != i1)


def test_recover_without_salvage_truncates_a_torn_tail_and_rewrites_nothing(tmp_path):
    log = build(tmp_path / "s")
    path, a, b = log.spans[-1]
    truncate(path, b - 1)
    report = recover_store(tmp_path / "s")
    [region] = report.regions
    assert (region.path, region.position, region.action) == (path, a, "truncated")
    assert report.rewritten == [] and os.path.getsize(path) == a
    with open_store(tmp_path / "s") as store:
        assert store_state(store) == log.model(upto=len(log.commits) - 1)


def test_a_store_that_is_open_is_refused(tmp_path):
    build(tmp_path / "s")
    with open_store(tmp_path / "s"):
        with pytest.raises(StoreLockedError):
            salvage_store(tmp_path / "s")


def test_salvage_removes_stale_snapshots_only_when_it_rewrote_something(tmp_path):
    log = build(tmp_path / "s")
    snaps = tmp_path / "s" / "snapshots"
    snaps.mkdir(exist_ok=True)  # the store may have made it already
    (snaps / "p0").write_bytes(b"x")
    assert salvage_store(tmp_path / "s").snapshots_removed is None and snaps.exists()
    path, a, _ = log.spans[3]
    flip_byte(path, a + 20)
    assert salvage_store(tmp_path / "s").snapshots_removed == str(snaps)
    assert not snaps.exists()


def crashed_with_reserve(tmp_path, n=8):
    """A store whose active segment holds a reserve, as a SIGKILL leaves it (docs/FORMAT.md,
    "Preallocated space"), with a snapshot; and the commits made."""
    src = tmp_path / "live"
    store = open_store(src, partitions=1)
    log = CommitLog(store)
    for i in range(n):
        log.commit("g", {TP("t", i % 3): i})
    store.snapshot()
    crashed = copy_store(src, tmp_path / "crashed")  # before close() gives the reserve back
    store.close()
    # (its write-ahead file holds the last batches whole and would write them back over any
    # damage: these tests are about what the segment's own bytes say)
    os.unlink(write_ahead.path_of(str(crashed)))
    [seg] = segment_files(crashed)[0]
    assert os.path.getsize(seg) > file_sizes(crashed)[seg], "no reserve to test with"
    return crashed, seg, log


def test_salvage_takes_the_reserve_of_the_active_segment_for_what_it_is(tmp_path):
    """The zeros after the last batch are unused space, not 1 MiB of "unreadable bytes": no
    region, no rewrite, snapshots kept; the reserve is cut as on open."""
    crashed, seg, log = crashed_with_reserve(tmp_path)
    data = file_sizes(crashed)[seg]
    report = salvage_store(crashed)
    assert report.regions == [] and report.rewritten == [], report
    assert report.snapshots_removed is None and os.path.isdir(os.path.join(crashed, "snapshots"))
    assert os.path.getsize(seg) == data
    with open_store(crashed) as store:
        assert store.recovery_report.clean
        assert store_state(store) == log.model()


def test_salvage_of_an_active_segment_with_a_reserve_drops_only_the_corrupt_batch(tmp_path):
    crashed, seg, log = crashed_with_reserve(tmp_path)
    _, a, b = log.spans[3]
    flip_byte(rebase(seg, crashed, crashed), a + 20)
    report = salvage_store(crashed)
    assert [(r.position, r.bytes_dropped) for r in report.regions] == [(a, b - a)], report
    with open_store(crashed) as store:
        assert store.recovery_report.clean
        assert store_state(store) == log.model(keep=lambda i: i != 3)


def test_a_crash_before_the_salvage_swap_commits_leaves_the_old_segment(tmp_path, monkeypatch):
    log = build(tmp_path / "s")
    path, a, _ = log.spans[9]
    flip_byte(path, a + 20)
    real = salvage_mod.commit_swap
    monkeypatch.setattr(salvage_mod, "commit_swap", lambda *a, **k: (_ for _ in ()).throw(
        SystemExit("simulated crash after the .cleaned file was written")))
    with pytest.raises(SystemExit):
        salvage_store(tmp_path / "s")
    monkeypatch.setattr(salvage_mod, "commit_swap", real)
    with pytest.raises(CorruptLogError):  # the .cleaned file is discarded: still corrupt
        open_store(tmp_path / "s")
    salvage_store(tmp_path / "s")
    with open_store(tmp_path / "s") as store:
        assert store_state(store) == log.model(keep=lambda i: i != 9)


@pytest.mark.parametrize("step", STEPS[1:])  # the steps after the commit point
def test_a_crash_at_any_salvage_swap_step_leaves_the_new_segment(
        tmp_path, monkeypatch, step):
    log = build(tmp_path / "base")
    path, a, _ = log.spans[9]
    flip_byte(path, a + 20)
    work = copy_store(tmp_path / "base", tmp_path / "work")

    def crash(name):
        if name == step:
            raise SystemExit("simulated crash")

    monkeypatch.setattr(salvage_mod, "_fault_hook", crash)
    with pytest.raises(SystemExit):
        salvage_store(work)
    monkeypatch.undo()
    expected = log.model(keep=lambda i: i != 9)
    with open_store(work) as store:  # every step is past the commit point: open finishes it
        assert store_state(store) == expected
    salvage_store(work)
    with open_store(work) as store:
        assert store_state(store) == expected
        assert store.recovery_report.clean
    assert not [n for n in os.listdir(os.path.dirname(rebase(path, tmp_path / "base", work)))
                if n.endswith((".swap", ".cleaned"))]


def test_cli_recover(tmp_path, capsys):
    log = build(tmp_path / "s")
    path, a, b = log.spans[4]
    flip_byte(path, a + 20)
    assert cli_main(["recover", str(tmp_path / "s")]) == 1
    err = capsys.readouterr().err  # an error: on stderr
    assert "corrupt record batch" in err and str(a) in err
    sizes = file_sizes(tmp_path / "s")
    assert cli_main(["recover", str(tmp_path / "s"), "--salvage"]) == 0
    out = capsys.readouterr().out
    assert str(b - a) in out and "8..9" in out and "rewrote" in out
    assert file_sizes(tmp_path / "s")[path] == sizes[path] - (b - a)
    assert cli_main(["recover", str(tmp_path / "s")]) == 0


def test_salvage_of_a_closed_segment_cut_short_drops_its_tail_and_names_the_lost_offsets(
        tmp_path):
    log = build(tmp_path / "s")
    first = segment_files(tmp_path / "s")[0][0]
    mine = [(i, s) for i, s in enumerate(log.spans) if s[0] == first]
    i_last, (_, a, b) = mine[-1]
    truncate(first, b - 5)  # a closed segment may not end in a torn batch: corruption
    with pytest.raises(CorruptLogError) as err:
        recover_store(tmp_path / "s")
    assert (err.value.path, err.value.position) == (first, a)
    [region] = salvage_store(tmp_path / "s").regions
    assert (region.path, region.position, region.bytes_dropped) == (first, a, b - 5 - a)
    assert region.offsets_lost == (2 * i_last, 2 * i_last + 1)  # up to the next segment's base
    with open_store(tmp_path / "s") as store:
        assert store_state(store) == log.model(keep=lambda i: i != i_last)


@pytest.mark.parametrize("trial", range(8))
def test_salvage_after_random_damage_keeps_exactly_the_undamaged_commits(tmp_path, trial):
    """Flip a random byte in each of a few random batches (anywhere in the log): salvage keeps
    every other commit, at its offset, and the store opens with exactly their state."""
    from support.durability_helpers import Seeded

    rng = Seeded()
    log = build(tmp_path / "s", n=80)
    before = offsets_of(tmp_path / "s")
    damaged = set(rng.sample(range(len(log.spans)), rng.randint(1, 6)))
    for i in damaged:
        path, a, b = log.spans[i]
        flip_byte(path, rng.randrange(a, b), mask=rng.randint(1, 255))
    report = salvage_store(tmp_path / "s")
    assert sum(r.bytes_dropped for r in report.regions) == sum(
        log.spans[i][2] - log.spans[i][1] for i in damaged), rng.why(str(report))
    lost = {o for i in damaged for o in (2 * i, 2 * i + 1)}
    assert offsets_of(tmp_path / "s") == {o: r for o, r in before.items() if o not in lost}, \
        rng.why()
    with open_store(tmp_path / "s") as store:
        assert store.recovery_report.clean
        assert store_state(store) == log.model(keep=lambda i: i not in damaged), rng.why()


def test_a_batch_that_passes_its_crc_but_does_not_decode_fails_recover_and_verify_as_open(
        tmp_path):
    """Open refuses a batch whose payload passes its CRC but is not msgpack (a writer bug, a
    foreign writer). ``offsetlog recover`` says why a service cannot open a store and
    ``offsetlog verify`` finds what open would refuse, so both must see it too; salvage drops
    it, and then the store opens."""
    from offsetlog.log import records
    from offsetlog.log.framing import encode_batch, frame_payload
    from offsetlog.recovery.tools.inspect import scan

    log = build(tmp_path / "s", n=6)
    path, _, end = log.spans[-1]
    bad = frame_payload(1000, b"\xc1\xc1", record_count=1, last_offset_delta=0, timestamp=0)
    recs = [records.offset_commit(0, "g", "t", 0, 1001, commit_timestamp=0)]
    good = encode_batch(1001, recs, timestamp=0)  # a valid batch after it: not a torn tail
    with open(path, "ab") as f:
        f.write(bad + good)
    with pytest.raises(CorruptLogError) as opened:
        open_store(tmp_path / "s")
    with pytest.raises(CorruptLogError) as recovered:
        recover_store(tmp_path / "s")
    assert ((recovered.value.path, recovered.value.position)
            == (opened.value.path, opened.value.position) == (path, end))
    report, _ = scan(str(tmp_path / "s"))
    assert [(r.path, r.position, r.bytes_dropped) for r in report.skipped] == [
        (path, end, len(bad))]
    assert cli_main(["verify", str(tmp_path / "s")]) == 1
    salvage_store(tmp_path / "s")
    with open_store(tmp_path / "s") as store:
        assert store.committed("g", TP("t", 0)).offset == 1001


def test_a_record_short_of_a_field_is_corruption_for_open_and_recover(tmp_path):
    """A batch that passes its CRC and decodes, but holds an OFFSET_COMMIT record without its
    topic: open raised a bare KeyError (no file, no position) and ``offsetlog recover``
    said all was well. Both now refuse it with CorruptLogError naming the segment."""
    from offsetlog.log.framing import encode_batch

    log = build(tmp_path / "s", n=6)
    path, _, _ = log.spans[-1]
    with open(path, "ab") as f:
        f.write(encode_batch(1000, [[0, 1, 0, {"group": "g"}, {"offset": 5,
                                                                "commit_timestamp": 0}]],
                             timestamp=0))
    with pytest.raises(CorruptLogError) as opened:
        open_store(tmp_path / "s")
    assert opened.value.path == path and "KeyError" in str(opened.value)
    with pytest.raises(CorruptLogError) as recovered:
        recover_store(tmp_path / "s")
    assert recovered.value.path == path
    assert cli_main(["recover", str(tmp_path / "s")]) == 1
    assert cli_main(["verify", str(tmp_path / "s")]) == 1  # verify replays as open does
