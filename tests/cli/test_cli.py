import json
import os

from offsetlog import OffsetStore, TopicPartition
from offsetlog.cli import main
from offsetlog.log.framing import BatchReader
from offsetlog.log.naming import list_segments, partition_dir
from offsetlog.log.records import commit_entry, commit_key


def records(text: str) -> list[str]:
    """The record lines of a dump (its other lines are segment and batch headers)."""
    return [line for line in text.splitlines() if line.startswith("| offset: ")]


def test_dump_prints_every_record_with_tombstones(populated, capsys):
    assert main(["dump", populated]) == 0
    out = records(capsys.readouterr().out)
    assert len(out) == 4
    assert any("group=alpha,topic=orders,partition=1" in l and "metadata=note" in l for l in out)
    assert sum("<DELETE>" in l for l in out) == 1


def test_dump_json(populated, capsys):
    assert main(["dump", populated, "--json"]) == 0
    rows = [json.loads(l) for l in capsys.readouterr().out.splitlines()]
    assert {r["key"]["group"] for r in rows} == {"alpha", "beta"}
    assert [r["value"] for r in rows if r["key"]["group"] == "beta"][-1] is None


def test_describe(populated, capsys, monkeypatch):
    monkeypatch.delenv("COLUMNS", raising=False)  # as when piped: no terminal width at all
    assert main(["describe", populated, "--group", "alpha"]) == 0
    out = capsys.readouterr().out
    assert "orders" in out and "note" in out and "9" in out
    # whole headers and timestamps, as kafka-consumer-groups prints them, never cut to "…"
    for header in ("GROUP", "TOPIC", "PARTITION", "CURRENT-OFFSET", "METADATA",
                   "COMMITTED-AT"):
        assert header in out
    assert "…" not in out
    assert main(["describe", populated, "--group", "beta"]) == 1  # deleted: nothing left


def test_verify_clean_then_corrupt(populated, capsys):
    assert main(["verify", populated]) == 0
    assert "ok" in capsys.readouterr().out
    # Flip a byte inside the first batch of a segment that has two batches: corruption
    # before the tail, which verify must report (a torn tail alone would not fail it).
    path = None
    for p in range(3):
        for _, seg in list_segments(partition_dir(populated, p)):
            with open(seg, "rb") as f:
                if len(list(BatchReader(f.read()))) >= 2:
                    path = seg
    assert path is not None
    with open(path, "r+b") as f:
        f.seek(50)
        b = f.read(1)
        f.seek(50)
        f.write(bytes([b[0] ^ 0xFF]))
    assert main(["verify", populated]) == 1
    out = capsys.readouterr().out
    assert "CORRUPT" in out and os.path.basename(path) in out


def test_missing_directory(tmp_path, capsys):
    assert main(["verify", str(tmp_path / "nope")]) == 2


def test_compact_cleans_closed_segments_and_keeps_state(store_dir, capsys):
    with OffsetStore.open(store_dir, partitions=1, segment_bytes=1024) as s:
        for i in range(200):
            s.commit_sync("g", {TopicPartition("t", i % 4): i})
        before = s.fetch("g")
    assert main(["compact", store_dir]) == 0
    out = capsys.readouterr().out
    assert "kept" in out
    with OffsetStore.open(store_dir) as s:
        assert s.fetch("g") == before
        assert sum(p["bytes"] for p in s.stats()) < 200 * 100


def test_compact_refuses_a_store_that_is_open(store_dir, capsys):
    with OffsetStore.open(store_dir, partitions=1) as s:
        s.commit_sync("g", {TopicPartition("t", 0): 1})
        assert main(["compact", store_dir]) == 1
    assert "open" in capsys.readouterr().err


def test_bench_options_reach_the_runner(capsys):
    assert main(["bench", "--help"]) == 0
    assert "--quick" in capsys.readouterr().out


def test_dump_says_what_it_could_not_read(store_dir, capsys):
    """dump prints every readable record, names every range it skipped on stderr, and fails
    on corruption (as verify does); a torn tail alone is noted, not a failure; the active
    segment's zero reserve (a store left by a crash) is neither."""
    with OffsetStore.open(store_dir, partitions=1, snapshot_on_close=False) as s:
        for i in range(4):
            s.commit_sync("g", {TopicPartition("t", i): i})
        [(_, seg)] = list_segments(partition_dir(store_dir, 0))
        with open(seg, "rb") as f:
            data = f.read()
        assert len(data) > (end := sum(b.size for b in BatchReader(data)))  # the reserve
        assert main(["dump", store_dir]) == 0
        out, err = capsys.readouterr()
        assert len(records(out)) == 4 and err == ""
    second = [b for b in BatchReader(data)][1]
    with open(seg, "r+b") as f:  # the store is closed: the file is its batches
        f.truncate(end - 1)  # the last batch torn
    assert main(["dump", store_dir]) == 0
    out, err = capsys.readouterr()
    assert len(records(out)) == 3 and "torn tail" in err and os.path.basename(seg) in err
    with open(seg, "r+b") as f:
        f.seek(second.position + 20)
        f.write(b"\xff")
    assert main(["dump", store_dir]) == 1
    out, err = capsys.readouterr()
    assert len(records(out)) == 2
    assert f"@ {second.position}: dropped {second.size} bytes" in err, err


def small_segments(store_dir):
    """A closed one-partition store of several 1 KiB segments: (its directory, segments)."""
    with OffsetStore.open(store_dir, partitions=1, segment_bytes=1024, cleaner_backoff_ms=0,
                          snapshot_on_close=False) as s:
        for i in range(60):
            s.commit_sync("g", {TopicPartition("t", i % 3): i})
    directory = partition_dir(store_dir, 0)
    return directory, list_segments(directory)


def test_verify_reads_again_what_a_cleaner_swapped_under_it(store_dir, monkeypatch):
    """The read-only commands may run beside a store that is open, whose cleaner can swap
    segments between their listing of a partition and their reads of it: a segment they
    listed is gone. They read that partition again instead of failing with a traceback."""
    from offsetlog.compaction.cleaner import clean_partition
    from offsetlog.log import segment
    from offsetlog.recovery.tools.inspect import scan

    directory, segments = small_segments(store_dir)
    assert len(segments) >= 4
    _, before = scan(store_dir, tables=True)
    real = segment.read_file
    swapped = []

    def racing_read(path, start=0):
        # The first read of the second segment comes after the cleaner's swap of them all.
        if not swapped and path == segments[1][1]:
            swapped.append(None)
            swapped[0] = clean_partition(directory, 0, active_base=segments[-1][0], now_ms=0,
                                         delete_retention_ms=0, segment_bytes=1 << 20)
        return real(path, start)

    monkeypatch.setattr(segment, "read_file", racing_read)
    report, after = scan(store_dir, tables=True)
    assert swapped[0].swapped and not os.path.exists(segments[1][1])
    assert report.clean and after[0].as_dict() == before[0].as_dict()


def test_dump_goes_on_after_what_a_cleaner_swapped_under_it(store_dir, monkeypatch):
    """The same race for dump: it lists the partition again and goes on after the last
    record it printed (cleaning keeps offsets), so no record is printed twice or out of
    order and the latest record of every key is there."""
    from offsetlog.compaction.cleaner import clean_partition
    from offsetlog.recovery.tools import inspect
    directory, segments = small_segments(store_dir)
    real = inspect.read_file
    swapped = []

    def racing_read(path, start=0):
        if not swapped and path == segments[1][1]:
            swapped.append(clean_partition(directory, 0, active_base=segments[-1][0], now_ms=0,
                                           delete_retention_ms=0, segment_bytes=1 << 20))
        return real(path, start)

    monkeypatch.setattr(inspect, "read_file", racing_read)
    skipped = []
    rows = [(offset, record) for _, _, _, offset, record in inspect.iter_records(
        store_dir, skipped=skipped)]
    assert swapped and not skipped
    offsets = [o for o, _ in rows]
    assert offsets == sorted(set(offsets))
    latest = {}
    for _, record in rows:
        latest[commit_key(record[2], record[3])[2]] = commit_entry(record[2], record[4])[0]
    assert latest == {0: 57, 1: 58, 2: 59}
