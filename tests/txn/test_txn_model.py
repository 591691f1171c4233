"""Store + transactions against a plain-dict model: a hypothesis state machine.

The model follows Kafka's rule with a global write counter: every record the store writes
gets the next sequence number; a transactional offset, on commit, replaces the stored value
of its key only if its sequence is later than that of the last plain commit, tombstone or
committed transactional offset of the key. A tombstone drops the key's pending offsets.
After every step ``fetch`` of every group equals the model, and ``require_stable`` raises
exactly for groups with pending offsets. Reopen (with transactions open and prepared) and
compaction must change nothing.
"""

from __future__ import annotations

import contextlib
import shutil
import tempfile

import pytest
from hypothesis import HealthCheck, event, settings
from hypothesis import strategies as st
from hypothesis.stateful import RuleBasedStateMachine, initialize, invariant, precondition, rule

from offsetlog.errors import UnstableOffsetCommitError
from offsetlog.group.errors import GroupIdNotFoundError
from support.durability_helpers import OAM, TP, ManualClock, open_store

GROUPS = ["g", "billing"]
TIDS = ["t0", "t1"]
tps = st.builds(TP, st.just("in"), st.integers(0, 1))
offset_maps = st.dictionaries(tps, st.integers(0, 1000), min_size=1, max_size=2)


class _Fixed:
    """Stands in for ``st.data()`` when one rule calls another with a known choice."""

    def __init__(self, value) -> None:
        self.value = value

    def draw(self, strategy, label=None):
        return self.value


class TxnMachine(RuleBasedStateMachine):
    def __init__(self) -> None:
        super().__init__()
        self.dir = tempfile.mkdtemp(prefix="offsetlog-txn-model-")
        self.clock = ManualClock()
        self.store = None
        self.seq = 0
        #: (group, tp) -> (offset or None for deleted, seq of the record that set it)
        self.stored: dict[tuple, tuple] = {}
        #: tid -> {(group, tp): (offset, seq)} of its open transaction
        self.pending: dict[str, dict] = {t: {} for t in TIDS}
        #: tid -> "ready" | "open" | "prepared"; None: no live handle (after reopen)
        self.mode: dict[str, str | None] = {t: None for t in TIDS}
        self.durable: dict[str, str] = {t: "none" for t in TIDS}  # "open"/"prepared"/"none"
        self.handles: dict[str, object] = {}

    @initialize(partitions=st.sampled_from([1, 2, 5]))
    def open(self, partitions):
        self.partitions = partitions
        self.store = self._open()
        for tid in TIDS:
            self.init(tid, False)

    def _open(self):
        return open_store(self.dir, partitions=self.partitions, segment_bytes=1024,
                          clock=self.clock, transaction_check_interval_ms=0)

    def teardown(self):
        if self.store is not None:
            self.store.close()
        shutil.rmtree(self.dir, ignore_errors=True)

    def _next(self) -> int:
        self.seq += 1
        return self.seq

    def _finish(self, tid, commit):
        if commit and any(seq < self.stored.get(k, (None, 0))[1]
                          for k, (_, seq) in self.pending[tid].items()):
            event("commit of a superseded pending offset")
        for key, (offset, seq) in sorted(self.pending[tid].items(), key=lambda kv: kv[1][1]):
            if commit and seq > self.stored.get(key, (None, 0))[1]:
                self.stored[key] = (offset, seq)
        self.pending[tid] = {}
        self.durable[tid] = "none"

    # -- plain operations ----------------------------------------------------------------

    @rule(group=st.sampled_from(GROUPS), offsets=offset_maps)
    def commit_sync(self, group, offsets):
        self.store.commit_sync(group, offsets)
        seq = self._next()
        for tp, v in offsets.items():
            self.stored[(group, tp)] = (v, seq)

    @precondition(lambda self: any(m == "ready" for m in self.mode.values()))
    @rule(data=st.data(),
          writes=st.lists(st.tuples(st.sampled_from(GROUPS), offset_maps,
                                    st.sampled_from([None, "before", "after"]),
                                    st.integers(0, 1000)), min_size=1, max_size=3),
          outcome=st.sampled_from(["commit", "abort", "prepare-commit", "leave-open"]))
    def whole_transaction(self, data, writes, outcome):
        """A transaction in one step (the step-wise rules interleave more, but rarely get a
        transaction to its end): offsets, each maybe with a plain commit of one of its keys
        just before or after, then an outcome."""
        tid = data.draw(st.sampled_from([t for t in TIDS if self.mode[t] == "ready"]))
        self.handles[tid].begin()
        self.mode[tid] = "open"
        for group, offsets, plain, value in writes:
            if plain == "before":
                self.commit_sync(group, {min(offsets): value})
            self.txn_commit_offsets(_Fixed(tid), group, offsets)
            if plain == "after":
                self.commit_sync(group, {min(offsets): value})
        if outcome == "leave-open":
            return
        if outcome == "prepare-commit":
            self.handles[tid].prepare()
        if outcome == "abort":
            self.handles[tid].abort()
        else:
            self.handles[tid].commit()
        self._finish(tid, outcome != "abort")
        self.mode[tid] = "ready"

    @precondition(lambda self: any(self.pending.values()))
    @rule(data=st.data(), value=st.integers(0, 1000))
    def commit_sync_over_pending(self, data, value):
        """A plain commit of a key with pending offsets (Kafka's ordering rule decides)."""
        keys = sorted({k for p in self.pending.values() for k in p})
        group, tp = data.draw(st.sampled_from(keys))
        self.commit_sync(group, {tp: value})

    @rule(group=st.sampled_from(GROUPS))
    def delete_group(self, group):
        with contextlib.suppress(GroupIdNotFoundError):  # raised only when none is left
            self.store.delete_group(group)
        seq = self._next()
        keys = {k for k, (v, _) in self.stored.items() if k[0] == group and v is not None}
        keys |= {k for p in self.pending.values() for k in p if k[0] == group}
        for k in keys:
            self.stored[k] = (None, seq)
            for p in self.pending.values():
                p.pop(k, None)

    @rule()
    def compact(self):
        self.store.compact()

    @rule()
    def roll_segments(self):
        """Plain commits of another group until the active segments roll: what came before
        becomes cleanable."""
        for i in range(12):
            self.store.commit_sync("filler", {TP("f", 0): i})

    @rule()
    def snapshot(self):
        """Snapshot every table now, open and prepared transactions included: later reopens
        load it and replay only the log after it, so pending offsets must ride in it, and
        compaction must keep every marker such a replay still needs."""
        self.store.snapshot()

    @rule()
    def compact_and_reopen(self):
        """What compaction kept must replay to the same state."""
        self.store.compact()
        self.reopen()

    @rule()
    def reopen(self):
        self.store.close()
        self.store = self._open()
        self.handles.clear()
        self.mode = {t: None for t in TIDS}

    # -- transactions --------------------------------------------------------------------

    @rule(tid=st.sampled_from(TIDS), keep=st.booleans())
    def init(self, tid, keep):
        h = self.store.init_transactions(tid, keep_prepared=keep)
        self.handles[tid] = h
        if self.durable[tid] == "prepared" and keep:
            assert h.prepared
            self.mode[tid] = "prepared"
        else:
            assert not h.prepared
            self._finish(tid, False)
            self.mode[tid] = "ready"

    @precondition(lambda self: any(m == "ready" for m in self.mode.values()))
    @rule(data=st.data())
    def begin(self, data):
        tid = data.draw(st.sampled_from([t for t in TIDS if self.mode[t] == "ready"]))
        self.handles[tid].begin()
        self.mode[tid] = "open"

    @precondition(lambda self: any(m == "open" for m in self.mode.values()))
    @rule(data=st.data(), group=st.sampled_from(GROUPS), offsets=offset_maps)
    def txn_commit_offsets(self, data, group, offsets):
        tid = data.draw(st.sampled_from([t for t in TIDS if self.mode[t] == "open"]))
        self.handles[tid].commit_offsets(group, offsets)
        seq = self._next()
        for tp, v in offsets.items():
            self.pending[tid][(group, tp)] = (v, seq)
        self.durable[tid] = "open"

    @precondition(lambda self: any(m == "open" for m in self.mode.values()))
    @rule(data=st.data())
    def prepare(self, data):
        tid = data.draw(st.sampled_from([t for t in TIDS if self.mode[t] == "open"]))
        self.handles[tid].prepare()
        self.mode[tid] = "prepared"
        if self.durable[tid] == "open":
            self.durable[tid] = "prepared"

    @precondition(lambda self: any(m in ("open", "prepared") for m in self.mode.values()))
    @rule(data=st.data(), commit=st.booleans())
    def finish(self, data, commit):
        tid = data.draw(st.sampled_from([t for t in TIDS
                                         if self.mode[t] in ("open", "prepared")]))
        if commit:
            self.handles[tid].commit()
        else:
            self.handles[tid].abort()
        self._finish(tid, commit)
        self.mode[tid] = "ready"

    # -- the invariant -------------------------------------------------------------------

    @invariant()
    def fetch_equals_model(self):
        if self.store is None:
            return
        for group in GROUPS:
            want = {tp: OAM(v) for (g, tp), (v, _) in sorted(self.stored.items())
                    if g == group and v is not None}
            assert self.store.fetch(group) == want, group
            unstable = sorted({tp for p in self.pending.values() for (g, tp) in p
                               if g == group})
            if unstable:
                with pytest.raises(UnstableOffsetCommitError) as e:
                    self.store.fetch(group, require_stable=True)
                assert e.value.partitions == unstable
            else:
                assert self.store.fetch(group, require_stable=True) == want


TxnMachine.TestCase.settings = settings(
    max_examples=60, stateful_step_count=30, deadline=None, database=None,
    suppress_health_check=[HealthCheck.too_slow], print_blob=True)
TestTxnModel = TxnMachine.TestCase
