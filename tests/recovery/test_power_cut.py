"""The crash harness's simulated power cut (``offsetlog.recovery.crashtest.power_cut``): it
loses only bytes no logged sync covered, and durable bytes past unsynced ones (a follower's
write that ended before the one it follows) are kept."""

from __future__ import annotations

import os
import random

from hypothesis import given, settings
from hypothesis import strategies as st

from offsetlog import OffsetStore, TopicPartition
from offsetlog.log import naming
from offsetlog.recovery.crashtest import power_cut


@st.composite
def segments(draw):
    """``(data, durable, size, kept)``: a file of ``size`` data bytes and a reserve of zeros
    after them, durable before ``durable`` and in the ``kept`` ranges past it."""
    size = draw(st.integers(2, 300))
    data = draw(st.binary(min_size=size, max_size=size)) + bytes(draw(st.integers(0, 64)))
    durable = draw(st.integers(0, size - 1))
    # cut points past the durable size; every other span between them is durable
    points = sorted(set(draw(st.lists(st.integers(durable + 1, size), max_size=8))))
    kept = [(s, e) for s, e in zip(points[::2], points[1::2])]
    return data, durable, size, kept


@settings(max_examples=300, deadline=None)
@given(segments(), st.integers(0, 2**32))
def test_a_cut_changes_only_unsynced_bytes(tmp_path_factory, segment, seed):
    data, durable, size, kept = segment
    path = tmp_path_factory.mktemp("cut") / "segment.log"
    path.write_bytes(data)
    shape, lost = power_cut.cut(str(path), durable, size, random.Random(seed), kept)
    after = path.read_bytes()
    synced = [(0, durable)] + kept
    for start, end in synced:
        assert after[start:end] == data[start:end], (shape, start, end)
    changed = [i for i in range(len(data))
               if i >= len(after) or after[i] != data[i]]
    assert all(not any(s <= i < e for s, e in synced) for i in changed)
    assert 0 < lost <= size - durable
    if shape == power_cut.TRUNCATED:
        assert len(after) >= durable and not [k for k in kept if k[1] > len(after)]
    if shape == power_cut.HOLE_BEFORE_DURABLE:
        assert kept and len(after) == len(data)


def test_a_cut_before_durable_bytes_is_a_hole_that_ends_before_them(tmp_path):
    path = tmp_path / "segment.log"
    data = bytes(range(1, 101))
    shapes = set()
    for seed in range(200):
        path.write_bytes(data)
        # unsynced: [10, 40) and [60, 100); durable: before 10 and [40, 60)
        shape, lost = power_cut.cut(str(path), 10, 100, random.Random(seed), [(40, 60)])
        after = path.read_bytes()
        assert after[:10] == data[:10] and after[40:60] == data[40:60]
        if shape == power_cut.HOLE_BEFORE_DURABLE:
            zeroed = [i for i in range(100) if after[i] == 0]
            assert zeroed and 10 <= zeroed[0] and zeroed[-1] < 40 and len(after) == 100
        shapes.add(shape)
    # both sides of the durable range are cut, over the seeds
    assert power_cut.HOLE_BEFORE_DURABLE in shapes and power_cut.TRUNCATED in shapes


def test_the_sync_log_s_ranges_are_durable_only_where_they_lie(tmp_path):
    """``SYNC`` lines say every byte before their size is durable, ``DSYNC`` lines only
    their own range: a range past unsynced bytes is ``kept``, one that reaches the durable
    size extends it."""
    store_dir = str(tmp_path / "store")
    with OffsetStore.open(store_dir, partitions=1, snapshots=False) as store:
        for i in range(6):
            store.commit_sync("g", {TopicPartition("t", 0): i})
    [(_, directory)] = naming.list_partition_dirs(store_dir)
    segment = naming.list_segments(directory)[-1][1]
    size = power_cut.durable_sizes(store_dir)[segment]
    assert size > 60
    log = tmp_path / "sync-log"

    def found(*lines: str):
        log.write_text("".join(line + "\n" for line in lines))
        return power_cut.unsynced(store_dir, str(log), {segment: 10})

    assert found() == [(segment, 10, size, [])]
    assert found(f"SYNC {segment} {size}") == []
    assert found(f"DSYNC {segment} 30 50") == [(segment, 10, size, [(30, 50)])]
    assert found(f"DSYNC {segment} 30 50", f"DSYNC {segment} 10 30") == [
        (segment, 50, size, [])]
    assert found(f"DSYNC {segment} 30 40", f"DSYNC {segment} 40 50",
                 f"SYNC {segment} 20", f"DSYNC {segment} 55 {size}") == [
        (segment, 20, size, [(30, 50), (55, size)])]
    # a line cut short by the kill is not read
    log.write_text(f"DSYNC {segment} 10 {size}")
    assert power_cut.unsynced(store_dir, str(log), {segment: 10}) == [(segment, 10, size, [])]
    assert os.path.getsize(segment) >= size
