"""Producer ids and epochs against a plain-dict model: a hypothesis state machine.

Who holds a transactional id after any sequence of ``init_transactions`` calls (a new
producer instance, or one giving its own id and epoch, KIP-360: current, the one before its
last bump, or stale), transactions left open, timeouts that fence, and reopens. The model
is Kafka's rule written out per id: the current (producer id, epoch), the epoch before the
last bump a producer asked for, the id before the last rotation; the epoch is kept small so
that rotations to a new producer id happen. After every step the store's durable state
equals the model, and a refused call changes nothing.
"""

from __future__ import annotations

import shutil
import tempfile

import pytest
from hypothesis import HealthCheck, event, settings
from hypothesis import strategies as st
from hypothesis.stateful import RuleBasedStateMachine, initialize, invariant, precondition, rule

from offsetlog.errors import ProducerFencedError, TransactionTimeoutError
from support.durability_helpers import TP, ManualClock, open_store

TIDS = ["t0", "t1"]
MAX_EPOCH = 3  # Kafka's is 32767; small, so rotations happen
TIMEOUT_MS = 1_000


class Model:
    """One transactional id, as Kafka's coordinator keeps it."""

    def __init__(self) -> None:
        self.pid = self.epoch = None
        self.last_epoch = self.last_pid = -1
        self.open = False  # a transaction has written offsets
        self.seen: set[tuple[int, int]] = set()  # every pair ever handed out

    def check(self, expected) -> str:
        """'bump', 'retry' or 'fenced' for InitProducerId with ``expected``."""
        if expected is None or self.pid is None or expected == (self.pid, self.epoch):
            return "bump"
        pid, epoch = expected
        if not self.open and self.last_epoch >= 0 and epoch == self.last_epoch and (
                pid == self.pid or (pid == self.last_pid and epoch >= MAX_EPOCH)):
            return "retry"
        return "fenced"

    def bump(self, expected, new_pid: int) -> None:
        """The state after a granted bump (``new_pid``: what the store handed out, checked
        to be fresh when the model rotates)."""
        if self.pid is None:
            self.pid, self.epoch, self.last_epoch, self.last_pid = new_pid, 0, -1, -1
            return
        if self.open and self.epoch < MAX_EPOCH:
            # the fencing abort writes the bumped epoch; the new producer keeps it
            self.open, self.epoch, self.last_epoch = False, self.epoch + 1, -1
            return
        self.open = False
        last = self.epoch if expected is not None else -1
        if self.epoch >= MAX_EPOCH:
            self.last_pid, self.pid, self.epoch = self.pid, new_pid, 0
        else:
            self.epoch += 1
        self.last_epoch = last


class EpochMachine(RuleBasedStateMachine):
    def __init__(self) -> None:
        super().__init__()
        self.dir = tempfile.mkdtemp(prefix="offsetlog-epoch-model-")
        self.clock = ManualClock()
        self.store = None
        self.model = {t: Model() for t in TIDS}
        self.handles: dict[str, object] = {}
        self.patch = pytest.MonkeyPatch()
        self.patch.setattr("offsetlog.txn.state.MAX_EPOCH", MAX_EPOCH)
        self.patch.setattr("offsetlog.store.transactions.MAX_EPOCH", MAX_EPOCH)

    @initialize()
    def open(self):
        self.store = self._open()

    def _open(self):
        return open_store(self.dir, partitions=3, clock=self.clock,
                          transaction_check_interval_ms=0, fence_on_transaction_timeout=True,
                          transaction_timeout_ms=TIMEOUT_MS)

    def teardown(self):
        if self.store is not None:
            self.store.close()
        self.patch.undo()
        shutil.rmtree(self.dir, ignore_errors=True)

    @rule(tid=st.sampled_from(TIDS), data=st.data())
    def init_transactions(self, tid, data):
        m = self.model[tid]
        choices = [None]
        if m.pid is not None:
            choices += [(m.pid, m.epoch), (m.pid, m.last_epoch), (m.last_pid, m.last_epoch),
                        (m.pid + 50, m.epoch)]
        choices += sorted(m.seen)
        expected = data.draw(st.sampled_from(
            [e for e in choices if e is None or (e[0] >= 0 and 0 <= e[1] <= MAX_EPOCH)]))
        outcome = m.check(expected)
        event(f"init: {outcome}" + (" (own)" if expected is not None else "")
              + (" across a rotation" if outcome == "retry" and expected[0] != m.pid else ""))
        before = self.store.transaction_state(tid)
        if outcome == "fenced":
            with pytest.raises(ProducerFencedError):
                self.store.init_transactions(tid, expected_producer=expected)
            assert self.store.transaction_state(tid) == before
            return
        txn = self.store.init_transactions(tid, expected_producer=expected)
        if outcome == "retry":
            assert (txn.producer_id, txn.producer_epoch) == (m.pid, m.epoch)
            assert self.store.transaction_state(tid) == before
        else:
            rotates = m.pid is None or m.epoch >= MAX_EPOCH and not (
                m.open and m.epoch < MAX_EPOCH)
            if rotates:
                assert txn.producer_id not in {p for p, _ in m.seen}, "a producer id reused"
            m.bump(expected, txn.producer_id)
            assert (txn.producer_id, txn.producer_epoch) == (m.pid, m.epoch)
        m.seen.add((m.pid, m.epoch))
        self.handles[tid] = txn

    @precondition(lambda self: any(m.pid is not None and not m.open
                                   for m in self.model.values()))
    @rule(data=st.data(), offset=st.integers(0, 100))
    def open_a_transaction(self, data, offset):
        tid = data.draw(st.sampled_from([t for t, m in self.model.items()
                                         if m.pid is not None and not m.open]))
        txn = self._current_handle(tid)
        txn.begin()
        txn.commit_offsets("g", {TP("in", 0): offset})
        self.model[tid].open = True

    @precondition(lambda self: any(m.open for m in self.model.values()))
    @rule(data=st.data(), commit=st.booleans())
    def end_a_transaction(self, data, commit):
        tid = data.draw(st.sampled_from([t for t, m in self.model.items() if m.open]))
        txn = self._current_handle(tid)
        txn.commit() if commit else txn.abort()
        self.model[tid].open = False

    @precondition(lambda self: any(m.open for m in self.model.values()))
    @rule()
    def time_out_open_transactions(self):
        """The store aborts them with the epoch bumped (not at the last epoch)."""
        self.clock.advance(TIMEOUT_MS)
        self.store.poll_transactions()
        for m in self.model.values():
            if m.open:
                m.open = False
                if m.epoch < MAX_EPOCH:
                    m.epoch, m.last_epoch = m.epoch + 1, -1
                    m.seen.add((m.pid, m.epoch))

    @rule()
    def reopen(self):
        self.store.close()
        self.store = self._open()
        self.handles.clear()

    def _current_handle(self, tid):
        """The handle of the id's current producer (taken up again after a reopen, or
        after a timeout moved the epoch past the handle's)."""
        m = self.model[tid]
        txn = self.handles.get(tid)
        if txn is None or (txn.producer_id, txn.producer_epoch) != (m.pid, m.epoch):
            txn = self.handles[tid] = self.store.resume_transaction(tid)
        try:
            txn.ensure_current()
        except TransactionTimeoutError:  # at the last epoch a timeout cannot fence
            event("timed out at the last epoch")
            txn.abort()
        return txn

    @invariant()
    def durable_state_equals_model(self):
        if self.store is None:
            return
        for tid, m in self.model.items():
            state = self.store.transaction_state(tid)
            if m.pid is None:
                assert state is None
                continue
            assert (state.producer_id, state.producer_epoch, state.last_producer_epoch,
                    state.last_producer_id) == (m.pid, m.epoch, m.last_epoch, m.last_pid), tid
            assert (state.state == "Ongoing") == m.open, tid


EpochMachine.TestCase.settings = settings(
    max_examples=60, stateful_step_count=30, deadline=None, database=None,
    suppress_health_check=[HealthCheck.too_slow], print_blob=True)
TestEpochModel = EpochMachine.TestCase
