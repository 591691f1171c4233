"""The wire's TxnOffsetCommit written by the native request loop (native/src/wire_txn.rs,
native/src/txn_board.rs): an open transaction's plain offsets go from the frame to the log
with no Python handler, pending as ``Transaction.commit_offsets`` writes them, and every
request the board of open transactions does not hold goes to the Python path.

The loop runs in-process over a socket pair with a real store; the stand-in connection's
Python path commits through the store's ``Transaction`` handle (what the server's handler
does once it has found the handle), counted."""

from __future__ import annotations

import threading
import uuid

import pytest

from offsetlog import OffsetAndMetadata, OffsetStore, TopicPartition
from offsetlog.errors import ProducerFencedError
from offsetlog.group import GroupConfig
from offsetlog.log import _native
from offsetlog.server.offsets import NATIVE_ARRAY_CODECS
from offsetlog.server.txn import txn_commit_code
from support.native_loop import native_loop
from support.wire_raw import call

pytestmark = pytest.mark.skipif(not NATIVE_ARRAY_CODECS,
                                reason="OffsetCommit is decoded by kio here")

TXN_OFFSET_COMMIT = 28
NONE, INVALID_PRODUCER_EPOCH, ILLEGAL_GENERATION, UNKNOWN_MEMBER_ID = 0, 47, 22, 25
INVALID_TXN_STATE = 48


class Topics:
    topics = {"orders": {"partitions": 4, "topic_id": b"\1" * 16}}


class Conn:
    """``Connection``'s side of the loop. Its Python path of TxnOffsetCommit is the server
    handler's once the handle is found: the producer's id and epoch checked against the
    handle, then ``Transaction.commit_offsets``, coded by ``txn_commit_code``."""

    closing = False

    def __init__(self) -> None:
        self.txn = None  # the producer's handle (the server's ``ctx.producers[tid]``)
        self.python_commits = 0
        self.native_errors: list[Exception] = []

    def answer(self, frame):
        fields = _native.decode_txn_offset_commit(frame)
        assert fields is not None, "only TxnOffsetCommit is sent here"
        (correlation_id, _client, version, _tid, group, producer_id, producer_epoch,
         generation, member, instance, topics) = fields
        self.python_commits += 1
        try:
            if (producer_id, producer_epoch) != (self.txn.producer_id, self.txn.producer_epoch):
                raise ProducerFencedError("a stale producer", transactional_id=_tid,
                                          producer_epoch=producer_epoch,
                                          current_epoch=self.txn.producer_epoch)
            self.txn.commit_offsets(group, {TopicPartition(name, p): offset
                                            for name, parts in topics
                                            for p, offset, _epoch, _metadata in parts},
                                    generation_id=generation, member_id=member,
                                    group_instance_id=instance)
            code = NONE
        except Exception as e:
            code = txn_commit_code(version, e)
        return _native.encode_txn_offset_commit_response(
            correlation_id, version, [(name, [(p[0], code) for p in parts])
                                      for name, parts in topics])

    def txn_commit_error(self, version, error):
        self.native_errors.append(error)
        return txn_commit_code(version, error)


@pytest.fixture
def loop(tmp_path):
    store = OffsetStore.open(tmp_path / "store",
                             group_config=GroupConfig(initial_rebalance_delay_ms=0))
    conn = Conn()
    try:
        with native_loop(store, conn, Topics()) as sock:
            yield store, conn, sock
    finally:
        store.close()


def _tid() -> str:
    return f"t-{uuid.uuid4().hex[:8]}"


def _group() -> str:
    return f"g-{uuid.uuid4().hex[:8]}"


def _open(store, conn, group, *, add=True):
    """A producer in an open transaction, ``group`` added to it (AddOffsetsToTxn) if ``add``."""
    txn = conn.txn = store.init_transactions(_tid())
    txn.begin()
    if add:
        txn.add_group(group)
    return txn


def _txn_commit(sock, txn, group, offsets, *, epoch=None, generation=-1, member="",
                version=3) -> int:
    """``offsets``: partition -> offset, or -> (offset, leader epoch, metadata)"""
    def fields(o):
        return o if isinstance(o, tuple) else (o, -1, "")

    body = dict(transactional_id=txn.transactional_id, group_id=group,
                producer_id=txn.producer_id,
                producer_epoch=txn.producer_epoch if epoch is None else epoch,
                topics=[dict(name="orders", partitions=[dict(
                    partition_index=p, committed_offset=fields(o)[0],
                    committed_leader_epoch=fields(o)[1], committed_metadata=fields(o)[2])
                    for p, o in offsets.items()])])
    if version >= 3:
        body.update(generation_id=generation, member_id=member, group_instance_id=None)
    r = call(sock, TXN_OFFSET_COMMIT, version, **body)
    codes = {p.error_code for t in r.topics for p in t.partitions}
    assert len(codes) == 1
    return int(codes.pop())


def _fetched(store, group) -> dict[int, int]:
    return {tp.partition: om.offset for tp, om in store.fetch(group).items()}


def _board(store):
    return store._commit_router.txn_board


@pytest.mark.parametrize("version", [0, 3, 4])
def test_an_open_transactions_offsets_are_written_pending_with_no_python_call(loop, version):
    store, conn, sock = loop
    group = _group()
    txn = _open(store, conn, group)
    assert _txn_commit(sock, txn, group, {0: 5, 1: 7}, version=version) == NONE
    assert _txn_commit(sock, txn, group, {0: 6}, version=version) == NONE
    assert conn.python_commits == 0
    assert _fetched(store, group) == {}  # pending
    assert {tp.partition: om.offset for tp, om in txn.pending_offsets()[group].items()} == {
        0: 6, 1: 7}
    txn.commit()
    assert _fetched(store, group) == {0: 6, 1: 7}


def test_metadata_and_leader_epochs_are_written_with_no_python_call(loop):
    store, conn, sock = loop
    group = _group()
    txn = _open(store, conn, group)
    assert _txn_commit(sock, txn, group, {0: (5, 3, "note"), 1: (7, -1, "é"), 2: (8, 0, "")}
                       ) == NONE
    assert conn.python_commits == 0
    txn.commit()
    expected = {TopicPartition("orders", 0): OffsetAndMetadata(5, "note", 3),
                TopicPartition("orders", 1): OffsetAndMetadata(7, "é"),
                TopicPartition("orders", 2): OffsetAndMetadata(8, "", 0)}
    assert store.fetch(group) == expected


def test_an_aborted_transaction_drops_them(loop):
    store, conn, sock = loop
    group = _group()
    store.commit_sync(group, {TopicPartition("orders", 0): 1})
    txn = _open(store, conn, group)
    assert _txn_commit(sock, txn, group, {0: 9}) == NONE
    assert conn.python_commits == 0
    txn.abort()
    assert _fetched(store, group) == {0: 1}


def test_the_board_holds_a_producer_only_while_its_transaction_is_open(loop):
    store, conn, sock = loop
    board = _board(store)
    group = _group()
    txn = _open(store, conn, group, add=False)
    assert len(board) == 0  # begun, nothing durable yet
    # a group not yet in the transaction: the Python path joins it durably first
    assert _txn_commit(sock, txn, group, {0: 1}) == NONE
    assert conn.python_commits == 1 and len(board) == 1
    assert _txn_commit(sock, txn, group, {0: 2}) == NONE
    assert conn.python_commits == 1
    txn.prepare()
    assert len(board) == 0
    txn.commit()
    assert _fetched(store, group) == {0: 2}
    # the transaction is over: the handle answers (no transaction open)
    assert _txn_commit(sock, txn, group, {0: 3}) == INVALID_TXN_STATE
    assert conn.python_commits == 2 and _fetched(store, group) == {0: 2}


def test_a_fenced_or_stale_producer_is_the_python_paths(loop):
    store, conn, sock = loop
    group = _group()
    old = _open(store, conn, group)
    assert _txn_commit(sock, old, group, {0: 1}, epoch=old.producer_epoch + 1) == \
        INVALID_PRODUCER_EPOCH  # an epoch the store never gave
    new = store.init_transactions(old.transactional_id)  # fences the old epoch
    assert len(_board(store)) == 0
    conn.txn = new
    assert _txn_commit(sock, old, group, {0: 2}) == INVALID_PRODUCER_EPOCH
    assert conn.python_commits == 2
    assert _fetched(store, group) == {}
    assert new.pending_offsets() == {}


def test_a_timed_out_transaction_leaves_the_board(tmp_path):
    now = [1_700_000_000_000]
    store = OffsetStore.open(tmp_path / "store", clock=lambda: now[0],
                             transaction_check_interval_ms=0)
    try:
        group = _group()
        txn = store.init_transactions(_tid(), transaction_timeout_ms=1_000)
        txn.begin()
        txn.add_group(group)
        assert _board(store).check(txn.transactional_id, txn.producer_id, txn.producer_epoch,
                                   store._router.route(group).part.index)
        assert store.poll_transactions(now[0] + 5_000) == 1
        assert len(_board(store)) == 0
    finally:
        store.close()


def test_the_groups_check_is_a_transactions(loop):
    """A member's transactional commit is checked as the coordinator checks it (the steady
    board, else the coordinator), and a standalone one is not bound by a group's members
    (Kafka's rules 5 and 6 exempt a transaction's commit)."""
    store, conn, sock = loop
    group = _group()
    joined = store.join_group(group, protocols=[("range", b"")], client_id="c",
                              session_timeout_ms=10_000)
    store.poll_groups()
    member = joined.result(10)
    txn = _open(store, conn, group)
    # (CompletingRebalance: the coordinator decides; a transaction's commit is accepted)
    assert _txn_commit(sock, txn, group, {0: 1}, generation=member.generation_id,
                       member=member.member_id) == NONE
    assert _txn_commit(sock, txn, group, {0: 2}, generation=member.generation_id + 1,
                       member=member.member_id) == ILLEGAL_GENERATION
    assert _txn_commit(sock, txn, group, {0: 3}, generation=member.generation_id,
                       member="someone") == UNKNOWN_MEMBER_ID
    assert _txn_commit(sock, txn, group, {0: 4}) == NONE  # standalone, group has members
    assert conn.python_commits == 0 and len(conn.native_errors) == 2
    txn.commit()
    assert _fetched(store, group) == {0: 4}


def test_a_commit_racing_the_transactions_end_is_before_its_marker(tmp_path):
    """Commits the board passes while another thread ends the transaction: every one that
    was answered with no error is in the log before the marker (the last one is committed,
    nothing stays pending), in the live table and after a reopen."""
    path = tmp_path / "store"
    store = OffsetStore.open(path, fsync="interval")
    conn = Conn()
    group = _group()
    acked: list[int] = []
    try:
        with native_loop(store, conn, Topics()) as sock:
            txn = _open(store, conn, group)
            started = threading.Event()

            def commits():
                offset = 0
                while True:
                    offset += 1
                    if _txn_commit(sock, txn, group, {0: offset}) != NONE:
                        return
                    acked.append(offset)
                    if offset == 50:
                        started.set()
            driver = threading.Thread(target=commits)
            driver.start()
            assert started.wait(10)
            txn.commit()
            driver.join(10)
            assert acked and not driver.is_alive()
            assert _fetched(store, group) == {0: acked[-1]}
            assert not any(p.table.txn.keys for p in store._parts)
    finally:
        store.close()
    with OffsetStore.open(path) as again:
        assert _fetched(again, group) == {0: acked[-1]}
        assert not any(p.table.txn.keys for p in again._parts)
