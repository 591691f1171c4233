"""The store against a plain-dict model: a hypothesis state machine.

Every rule does one public operation on both; after every step ``fetch`` of every group (and
``groups()``) must equal the model. Reopening, with or without a torn tail appended to a log,
and compacting must not change anything. Expiry runs on an injected manual clock, so the
model knows exactly which offsets expire (KIP-211 for standalone groups: commit time +
``retention_ms``).
"""

from __future__ import annotations

import contextlib
import os
import shutil
import tempfile
import threading

from hypothesis import HealthCheck, event, settings
from hypothesis import strategies as st
from hypothesis.stateful import RuleBasedStateMachine, initialize, invariant, rule

from offsetlog.log import records as rec
from offsetlog.log.framing import encode_batch
from offsetlog.group.errors import GroupIdNotFoundError
from support.durability_helpers import OAM, TP, ManualClock, open_store, segment_files

GROUPS = ["orders-service", "billing", "g", "γ-unicode", "audit-7", "x" * 40]
TOPICS = ["orders", "payments"]
RETENTION_MS = 60_000

tps = st.builds(TP, st.sampled_from(TOPICS), st.integers(0, 3))
values = st.one_of(
    st.integers(0, 2**40),
    st.builds(OAM, st.integers(0, 2**40), st.sampled_from(["", "m", "ünï", "x" * 100]),
              st.sampled_from([None, -1, 0, 7])))
offset_maps = st.dictionaries(tps, values, min_size=1, max_size=4)


def normalise(v) -> OAM:
    """What fetch returns for a committed value (Kafka's -1 epoch means "none")."""
    if isinstance(v, int):
        return OAM(v)
    return OAM(v.offset, v.metadata or "", None if v.leader_epoch == -1 else v.leader_epoch)


class StoreMachine(RuleBasedStateMachine):
    def __init__(self) -> None:
        super().__init__()
        self.dir = tempfile.mkdtemp(prefix="offsetlog-model-")
        self.clock = ManualClock()
        self.store = None
        #: group -> tp -> (OffsetAndMetadata, commit timestamp)
        self.model: dict[str, dict[TP, tuple[OAM, int]]] = {}

    # -- lifecycle -----------------------------------------------------------------------

    @initialize(partitions=st.sampled_from([1, 3, 50]),
                segment_bytes=st.sampled_from([1024, 2048, 1 << 20]))
    def open(self, partitions, segment_bytes):
        self.partitions = partitions
        self.segment_bytes = segment_bytes
        self.store = self._open(partitions=partitions)

    def _open(self, **kw):
        return open_store(self.dir, segment_bytes=self.segment_bytes, clock=self.clock,
                          retention_ms=RETENTION_MS, **kw)

    def teardown(self):
        if self.store is not None:
            self.store.close()
        shutil.rmtree(self.dir, ignore_errors=True)

    # -- model helpers -------------------------------------------------------------------

    def _apply(self, group, offsets):
        g = self.model.setdefault(group, {})
        for tp, v in offsets.items():
            g[tp] = (normalise(v), self.clock.now)

    def _view(self, group) -> dict:
        return {tp: v for tp, (v, _) in sorted(self.model.get(group, {}).items())}

    # -- rules ---------------------------------------------------------------------------

    @rule(group=st.sampled_from(GROUPS), offsets=offset_maps)
    def commit_sync(self, group, offsets):
        self.store.commit_sync(group, offsets)
        self._apply(group, offsets)

    @rule(group=st.sampled_from(GROUPS), offsets=offset_maps)
    def commit_async(self, group, offsets):
        calls = []
        done = threading.Event()

        def callback(arg, exc):
            calls.append((arg, exc))
            done.set()

        fut = self.store.commit_async(group, offsets, callback=callback)
        assert fut.result(timeout=30) is None
        assert done.wait(30), "the callback never ran"
        self._apply(group, offsets)
        assert calls == [(offsets, None)]

    @rule(commits=st.lists(st.tuples(st.sampled_from(GROUPS), offset_maps), min_size=2,
                           max_size=6),
          sync_last=st.booleans())
    def commit_async_burst(self, commits, sync_last):
        """Several async commits in flight at once: later ones win, in call order."""
        futures = []
        for i, (group, offsets) in enumerate(commits):
            if sync_last and i == len(commits) - 1:
                self.store.commit_sync(group, offsets)
            else:
                futures.append(self.store.commit_async(group, offsets))
            self._apply(group, offsets)
        for f in futures:
            assert f.result(timeout=30) is None

    @rule(group=st.sampled_from(GROUPS), partitions=st.lists(tps, max_size=4))
    def delete_offsets(self, group, partitions):
        self.store.delete_offsets(group, partitions)
        g = self.model.get(group, {})
        for tp in partitions:
            g.pop(tp, None)

    @rule(group=st.sampled_from(GROUPS))
    def delete_group(self, group):
        with contextlib.suppress(GroupIdNotFoundError):  # raised only when none is left
            self.store.delete_group(group)
        self.model.pop(group, None)

    @rule(ms=st.one_of(st.integers(0, 2 * RETENTION_MS),
                       st.sampled_from([1, RETENTION_MS - 1, RETENTION_MS])))
    def advance_clock(self, ms):
        self.clock.advance(ms)

    @rule()
    def expire_offsets(self):
        now = self.clock.now
        expected = 0
        for g in self.model.values():
            for tp in [tp for tp, (_, ts) in g.items() if now >= ts + RETENTION_MS]:
                del g[tp]
                expected += 1
        assert self.store.expire_offsets() == expected

    @rule()
    def compact(self):
        """Guarantee 6: compaction never changes what fetch returns (checked by the invariant)."""
        if hasattr(self.store, "compact"):
            results = self.store.compact()
            event("compact: cleaned" if any(getattr(r, "segments_before", 0) for r in results)
                  else "compact: nothing closed")

    @rule()
    def reopen(self):
        self.store.close()
        self.store.close()  # idempotent
        self.store = None
        self.store = self._open()  # partitions=None: the stored count
        assert self.store.partitions == self.partitions
        assert self.store.recovery_report.truncations == []

    @rule(data=st.data())
    def reopen_after_torn_write(self, data):
        """A crash in the middle of writing a batch: reopening drops exactly that batch."""
        stats = {s["partition"]: s["next_offset"] for s in self.store.stats()}
        self.store.close()
        self.store = None
        segments = {p: paths for p, paths in segment_files(self.dir).items() if paths}
        if not segments:
            self.store = self._open()
            return
        p = data.draw(st.sampled_from(sorted(segments)), label="partition")
        path = segments[p][-1]
        size = os.path.getsize(path)
        batch = encode_batch(stats[p], (rec.offset_commit(0, GROUPS[0], "orders", 0, 1,
                                                          commit_timestamp=self.clock.now),),
                             timestamp=self.clock.now)
        cut = data.draw(st.integers(1, len(batch) - 1), label="cut")
        with open(path, "ab") as f:
            f.write(batch[:cut])
        self.store = self._open()
        [t] = self.store.recovery_report.truncations
        assert (t.path, t.position, t.bytes_dropped) == (path, size, cut)

    # -- the invariant -------------------------------------------------------------------

    @invariant()
    def fetch_equals_model(self):
        if self.store is None:
            return
        for group in GROUPS:
            assert self.store.fetch(group) == self._view(group), group
        assert self.store.groups() == sorted(g for g in GROUPS if self.model.get(g))
        some = TP(TOPICS[0], 0)
        assert self.store.committed(GROUPS[0], some) == self._view(GROUPS[0]).get(some)


StoreMachine.TestCase.settings = settings(
    max_examples=100, stateful_step_count=40, deadline=None, database=None,
    suppress_health_check=[HealthCheck.too_slow], print_blob=True)
TestStoreModel = StoreMachine.TestCase
