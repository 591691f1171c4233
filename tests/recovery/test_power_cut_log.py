"""The crash harness's reading of the child's sync log (recovery/crashtest/power_cut.py):
which bytes of an active segment a simulated power cut may take. A write that returned
behind one still in flight (pipelined commits) is durable itself, but the bytes before it
are not until that one returns: the durable prefix stops at the gap."""

from __future__ import annotations

from offsetlog import OffsetStore
from offsetlog import TopicPartition as TP
from offsetlog.recovery.crashtest.power_cut import durable_prefix, unsynced


def test_a_span_counts_once_everything_before_it_is_durable():
    assert durable_prefix(100, [(150, 200)]) == 100
    assert durable_prefix(100, [(150, 200), (100, 150)]) == 200
    assert durable_prefix(100, [(40, 120), (120, 130), (131, 140)]) == 130
    assert durable_prefix(0, []) == 0
    assert durable_prefix(500, [(0, 200)]) == 500  # (a sync never makes it less durable)


def test_unsynced_reads_prefix_syncs_and_written_spans(tmp_path):
    root = tmp_path / "store"
    with OffsetStore.open(str(root), partitions=1, fsync="never") as store:
        for n in range(3):
            store.commit_sync("g", {TP("t", 0): n})
        active = store._writer.partitions[0].log._active
        path, size = active.path, active.size
    third = size // 3
    log = tmp_path / "sync.log"

    def durable_after(*lines: str) -> int:
        log.write_text("".join(f"{line}\n" for line in lines))
        found = {p: d for p, d, _ in unsynced(str(root), str(log), {})}
        return found.get(path, size)

    assert durable_after() == 0
    assert durable_after(f"SYNC {path} {third}") == third
    # a span past a gap: the prefix stays where the gap begins
    assert durable_after(f"SYNC {path} {third}", f"SYNC {path} {size} {2 * third}") == third
    # the gap's own write returned too: all of it is durable (not listed as unsynced)
    assert durable_after(f"SYNC {path} {third}", f"SYNC {path} {size} {2 * third}",
                         f"SYNC {path} {2 * third} {third}") == size
    assert durable_after(f"SYNC {path} {size}") == size
