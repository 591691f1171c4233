"""The sans-IO pieces of transactions: the state machine and the table's pending state."""

import msgpack
import pytest

from offsetlog.errors import InvalidTxnStateError, ProducerFencedError, UnsupportedVersionError
from offsetlog.log import records as rec
from offsetlog.table import OffsetTable
from offsetlog.table.pending import PendingTransactions
from offsetlog.txn.state import (
    COMPLETE_ABORT,
    COMPLETE_COMMIT,
    EMPTY,
    MAX_EPOCH,
    ONGOING,
    PREPARE_COMMIT,
    PREPARED,
    STATES,
    TRANSITIONS,
    TxnMetadata,
    is_retry_of_last_bump,
    next_epoch,
)

TXN, CTRL = 0x01, 0x03


def meta(state=EMPTY, **kw):
    base = dict(transactional_id="t", producer_id=7, producer_epoch=2, state=state,
                timeout_ms=1000, update_timestamp=0)
    base.update(kw)
    return TxnMetadata(**base)


# -- state machine ----------------------------------------------------------------------------

@pytest.mark.parametrize("src", STATES)
@pytest.mark.parametrize("dst", STATES)
def test_only_listed_transitions_are_allowed(src, dst):
    m = meta(src)
    if dst in TRANSITIONS[src]:
        assert m.to(dst, now_ms=5).state == dst
    else:
        with pytest.raises(InvalidTxnStateError):
            m.to(dst, now_ms=5)
        assert m.state == src  # unchanged (frozen anyway)


def test_add_partition_keeps_the_start_of_an_ongoing_transaction():
    m = meta().add_partition(3, now_ms=100)
    assert (m.state, m.partitions, m.start_timestamp) == (ONGOING, (3,), 100)
    m = m.add_partition(1, now_ms=200).add_partition(3, now_ms=300)
    assert (m.partitions, m.start_timestamp, m.update_timestamp) == ((1, 3), 100, 300)


def test_idle_states_forget_partitions_and_start():
    m = meta().add_partition(3, now_ms=100).to(PREPARE_COMMIT, now_ms=110)
    done = m.to(COMPLETE_COMMIT, now_ms=120)
    assert done.partitions == () and done.start_timestamp == -1 and done.idle


def test_timeouts_apply_to_ongoing_only():
    m = meta().add_partition(0, now_ms=100)
    assert not m.timed_out(1099) and m.timed_out(1100)
    assert not m.to(PREPARED, now_ms=100).timed_out(10 ** 9)


def test_values_round_trip_through_msgpack():
    m = meta().add_partition(4, now_ms=9)
    value = msgpack.unpackb(msgpack.packb(m.to_value()))
    assert TxnMetadata.from_value("t", value) == m
    with pytest.raises(InvalidTxnStateError):
        TxnMetadata.from_value("t", dict(value, state="Bogus"))


def test_a_record_written_before_the_last_producer_fields_reads_them_as_unset():
    value = meta(last_producer_epoch=1, last_producer_id=3).to_value()
    del value["last_producer_epoch"], value["last_producer_id"]
    m = TxnMetadata.from_value("t", value)
    assert (m.last_producer_epoch, m.last_producer_id) == (-1, -1)


@pytest.mark.parametrize("state", [EMPTY, COMPLETE_COMMIT, COMPLETE_ABORT, ONGOING, PREPARED])
def test_the_current_producer_id_and_epoch_bump_as_usual(state):
    assert is_retry_of_last_bump(meta(state), 7, 2) is False
    assert is_retry_of_last_bump(None, 7, 2) is False  # an unknown id: a new producer


@pytest.mark.parametrize("state", [EMPTY, COMPLETE_COMMIT, COMPLETE_ABORT])
def test_the_epoch_before_the_last_bump_is_a_retry(state):
    assert is_retry_of_last_bump(meta(state, last_producer_epoch=1), 7, 1) is True
    # ... after a rotation too: the old id at its exhausted epoch
    rotated = meta(state, producer_id=8, producer_epoch=0, last_producer_id=7,
                   last_producer_epoch=MAX_EPOCH)
    assert is_retry_of_last_bump(rotated, 7, MAX_EPOCH) is True


@pytest.mark.parametrize("m, pid, epoch", [
    (meta(), 7, 1),  # an older epoch, no bump to retry
    (meta(), 7, 3),  # a newer one
    (meta(), 6, 2),  # another producer id
    (meta(last_producer_epoch=1), 6, 1),  # the last epoch, but another id
    (meta(ONGOING, last_producer_epoch=1), 7, 1),  # a retry only while no transaction is open
    (meta(producer_id=8, producer_epoch=0, last_producer_id=7, last_producer_epoch=5), 7, 5),
    (meta(last_producer_epoch=-1), 7, -1),
])
def test_anything_else_is_fenced(m, pid, epoch):
    with pytest.raises(ProducerFencedError, match="not the current one"):
        is_retry_of_last_bump(m, pid, epoch)


def test_next_epoch_bumps_or_allocates():
    ids = iter([40, 41])
    assert next_epoch(None, lambda: next(ids)) == (40, 0)
    assert next_epoch(meta(), lambda: next(ids)) == (7, 3)
    assert next_epoch(meta(producer_epoch=MAX_EPOCH), lambda: next(ids)) == (41, 0)


# -- the table's pending state ------------------------------------------------------------------

def commit(delta, group, partition, offset):
    return rec.offset_commit(delta, group, "t", partition, offset, commit_timestamp=1)


def marker(pid, result):
    return (rec.transaction_marker(0, pid, 0, result),)


def test_commit_marker_applies_only_offsets_not_superseded():
    t = OffsetTable()
    t.apply_batch(0, (commit(0, "g", 0, 5), commit(1, "g", 1, 5)), TXN, 1, 0)
    t.apply_batch(2, (commit(0, "g", 0, 9),))  # plain, later: supersedes (g, 0)
    t.apply_batch(3, marker(1, rec.COMMIT), CTRL, 1, 0)
    assert t.get("g", "t", 0)[0] == 9 and t.get("g", "t", 1)[0] == 5
    assert not t.txn.keys and not t.txn.by_pid


def test_abort_marker_drops_and_tombstone_drops_pending():
    t = OffsetTable()
    t.apply_batch(0, (commit(0, "g", 0, 5),), TXN, 1, 0)
    t.apply_batch(1, (commit(0, "g", 1, 5),), TXN, 2, 0)
    t.apply_batch(2, (rec.offset_tombstone(0, "g", "t", 1),))
    assert t.txn.pending_partitions("g") == {("t", 0)}
    t.apply_batch(3, marker(2, rec.COMMIT), CTRL, 2, 0)
    t.apply_batch(4, marker(1, rec.ABORT), CTRL, 1, 0)
    assert t.offsets == {} and not t.txn.keys


def test_committed_transactional_offset_supersedes_older_pending_of_others():
    t = OffsetTable()
    t.apply_batch(0, (commit(0, "g", 0, 1),), TXN, 1, 0)
    t.apply_batch(1, (commit(0, "g", 0, 2),), TXN, 2, 0)
    t.apply_batch(2, (commit(0, "g", 0, 3),), TXN, 3, 0)
    t.apply_batch(3, marker(2, rec.COMMIT), CTRL, 2, 0)
    t.apply_batch(4, marker(1, rec.COMMIT), CTRL, 1, 0)  # older than 2's: loses
    assert t.get("g", "t", 0)[0] == 2
    t.apply_batch(5, marker(3, rec.COMMIT), CTRL, 3, 0)  # newer: wins
    assert t.get("g", "t", 0)[0] == 3


def test_transaction_state_records_and_max_producer_id():
    t = OffsetTable()
    t.apply_batch(0, (rec.transaction_state(0, "x", meta(producer_id=12).to_value()),))
    t.apply_batch(1, (commit(0, "g", 0, 5),), TXN, 30, 0)
    assert t.txn.states["x"]["producer_id"] == 12 and t.txn.max_producer_id == 30
    t.apply_batch(2, (rec.transaction_state(0, "x", None),))
    assert "x" not in t.txn.states


def test_bad_transactional_batches_are_refused():
    t = OffsetTable()
    with pytest.raises(UnsupportedVersionError, match="tombstone"):
        t.apply_batch(0, (rec.offset_tombstone(0, "g", "t", 0),), TXN, 1, 0)
    with pytest.raises(UnsupportedVersionError, match="only offset commits"):
        t.apply_batch(0, (rec.group_metadata(0, "g", {}),), TXN, 1, 0)


def test_state_round_trips_for_snapshots():
    t = OffsetTable()
    t.apply_batch(0, (commit(0, "g", 0, 5), commit(1, "h", 1, 6)), TXN, 1, 0)
    t.apply_batch(2, (commit(0, "g", 0, 9),))
    t.apply_batch(3, (rec.transaction_state(0, "x", meta(producer_id=1).to_value()),))
    state = msgpack.unpackb(msgpack.packb(t.txn.to_state()))
    copy = PendingTransactions.from_state(state)
    assert copy == t.txn and copy.by_pid == t.txn.by_pid
    # and it behaves the same afterwards
    t2 = OffsetTable()
    t2.offsets = {g: dict(v) for g, v in t.offsets.items()}
    t2.txn = copy
    for table in (t, t2):
        table.apply_batch(4, marker(1, rec.COMMIT), CTRL, 1, 0)
    assert t.as_dict() == t2.as_dict()
