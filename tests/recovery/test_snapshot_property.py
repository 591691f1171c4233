"""Live state == full replay == snapshot + tail (item 6), for random histories.

A hypothesis state machine commits, deletes, expires, snapshots, compacts (small segments,
``delete_retention_ms=0`` on a manual clock, so tombstones really are dropped) and reopens,
with or without a snapshot on close. At every reopen the three must agree:

* the live tables just before ``close()``;
* a full replay of the log by the read-only scanner (no snapshots);
* the reopened store's tables, loaded from the snapshots on disk plus the log after them.

A cleaner that drops a tombstone above a snapshot's offset resurrects the key on the third
(found by this test with the tombstone floor turned off).
"""

from __future__ import annotations

import contextlib
import shutil
import tempfile

import pytest
from hypothesis import HealthCheck, event, settings
from hypothesis import strategies as st
from hypothesis.stateful import RuleBasedStateMachine, initialize, invariant, rule

from offsetlog import OffsetStore
from offsetlog.log import segment
from offsetlog.recovery.tools import inspect
from offsetlog.group.errors import GroupIdNotFoundError
from offsetlog.table import OffsetTable
from support.durability_helpers import OAM, TP, ManualClock

PARTITIONS = 2
GROUPS = ["orders", "billing", "g", "audit"]
tps = st.builds(TP, st.sampled_from(["a", "b"]), st.integers(0, 3))
offset_maps = st.dictionaries(
    tps, st.builds(OAM, st.integers(0, 10**6), st.sampled_from(["", "meta"]),
                   st.sampled_from([None, 3])), min_size=1, max_size=4)


class SnapshotMachine(RuleBasedStateMachine):
    def __init__(self) -> None:
        super().__init__()
        self.dir = tempfile.mkdtemp(prefix="offsetlog-snap-")
        self.clock = ManualClock()
        self.store = None
        self.next_offset = 0  # offsets given so far (fills commit offsets that always grow)

    def _open(self, snapshot_on_close: bool) -> OffsetStore:
        # fsync="never": durability is not the subject here, and fsyncs would be most of the
        # run time (close() and snapshots still sync the log)
        return OffsetStore.open(self.dir, partitions=PARTITIONS, segment_bytes=1024, fsync="never",
                                delete_retention_ms=0, retention_ms=1000, clock=self.clock,
                                retention_check_interval_ms=0, cleaner_backoff_ms=0,
                                snapshot_interval_records=0, snapshot_interval_ms=0,
                                snapshot_on_close=snapshot_on_close)

    @initialize(snapshot_on_close=st.booleans())
    def open(self, snapshot_on_close):
        self.store = self._open(snapshot_on_close)

    def teardown(self) -> None:
        if self.store is not None:
            self.store.close()
        shutil.rmtree(self.dir, ignore_errors=True)

    def tables(self) -> dict[int, dict]:
        return {part.index: part.table.as_dict() for part in self.store._parts}

    # -- history ----------------------------------------------------------------------------

    @rule(group=st.sampled_from(GROUPS), offsets=offset_maps)
    def commit(self, group, offsets):
        self.clock.advance(10)
        self.store.commit_sync(group, offsets)

    @rule(group=st.sampled_from(GROUPS), n=st.integers(5, 15))
    def burst(self, group, n):
        """Enough commits to roll a segment or two."""
        for i in range(n):
            self.clock.advance(1)
            self.store.commit_sync(group, {TP("burst", i % 3): i, TP("burst", 3): i})

    @rule(data=st.data())
    def delete_offsets(self, data):
        """Tombstones for keys that exist (random ones would mostly write nothing)."""
        keys = sorted((g, TP(t, p)) for part in self.store._parts
                      for (g, t, p) in part.table.as_dict()["offsets"])
        if not keys:
            return
        picked = data.draw(st.lists(st.sampled_from(keys), min_size=1, max_size=3))
        for group in {g for g, _ in picked}:
            self.store.delete_offsets(group, [tp for g, tp in picked if g == group])

    @rule(group=st.sampled_from(GROUPS))
    def delete_group(self, group):
        with contextlib.suppress(GroupIdNotFoundError):  # raised only when none is left
            self.store.delete_group(group)

    @rule(group=st.sampled_from(GROUPS), n=st.integers(10, 20), clean=st.booleans())
    def snapshot_then_delete_group(self, group, n, clean):
        """The history that needs the cleaner's tombstone floor: tombstones just above a
        snapshot, pushed into closed segments by more commits."""
        self.store.commit_sync(group, {TP("a", 0): n, TP("b", 1): n})
        self.store.snapshot()
        self.store.delete_group(group)
        self.burst(group=group, n=n)  # same partition; other keys than those deleted
        if clean:
            self.compact()

    @rule(ms=st.sampled_from([100, 1000, 5000]))
    def expire(self, ms):
        self.clock.advance(ms)
        if self.store.expire_offsets():
            event("offsets expired")

    @rule()
    def snapshot(self):
        if self.store.snapshot():
            event("snapshot taken")

    @rule()
    def compact(self, times=2):
        """Twice: the first cleaning stamps tombstones with a delete horizon, the second (past
        it: delete_retention_ms=0) drops them."""
        for _ in range(times):
            self.clock.advance(1)
            if sum(r.tombstones_dropped for r in self.store.compact()):
                event("tombstones dropped")

    @rule(next_snapshot_on_close=st.booleans())
    def reopen(self, next_snapshot_on_close):
        live = self.tables()
        on_disk = {i: st_["snapshot_offset"] for i, st_ in enumerate(self.store.stats())
                   if st_["snapshot_offset"] is not None}
        if self.store.config.snapshot_on_close:
            on_disk.update({part.index: part.table.next_offset for part in self.store._parts
                            if part.table.next_offset})
        self.store.close()
        self.store = None
        _, full = inspect.scan(self.dir, salvage=False, tables=True)
        replayed = {p: full[p].as_dict() if p in full else OffsetTable().as_dict()
                    for p in range(PARTITIONS)}
        assert replayed == live, "full replay differs from the live state"
        self.store = self._open(next_snapshot_on_close)
        report = self.store.recovery_report
        assert report.snapshots_loaded == on_disk and not report.snapshots_discarded, report
        if any(report.partitions[p].records for p in on_disk if p in report.partitions):
            event("reopened from a snapshot plus a tail")
        assert self.tables() == live, "snapshot + tail differs from the live state"

    @invariant()
    def live_state_is_the_replay_of_the_log(self):
        # cheap check every step: every partition's table is consistent with fetch
        if self.store is not None:
            for group in self.store.groups():
                self.store.fetch(group)


SnapshotMachine.TestCase.settings = settings(
    max_examples=60, stateful_step_count=40, deadline=None, database=None,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.filter_too_much])
TestSnapshotMachine = SnapshotMachine.TestCase


@pytest.fixture(autouse=True)
def _no_log_fsync(monkeypatch):
    """The log's fsyncs are not the subject here and were most of the run time on a busy
    disk; what reaches the files is the same without them (no crash is simulated)."""
    monkeypatch.setattr(segment, "_sync", lambda fd: None)
    monkeypatch.setattr(segment, "_write_dsync", None)  # its sync half is a real one
    monkeypatch.setattr(segment, "_fsync", lambda fd: None)
