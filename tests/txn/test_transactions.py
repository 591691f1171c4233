"""Transactional offset commits through the store: visibility, Kafka's ordering rule, fencing,
prepare / keep_prepared, timeouts, expiry, delete_group, reopen and compaction."""

import pytest

from offsetlog import OffsetAndMetadata, OffsetStore, TopicPartition
from offsetlog.errors import (
    IllegalGenerationError,
    InvalidGroupIdError,
    InvalidTxnStateError,
    ProducerFencedError,
    StoreClosedError,
    TransactionTimeoutError,
    UnknownMemberIdError,
    UnstableOffsetCommitError,
)
from offsetlog.log.records import commit_entry, commit_key
from offsetlog.recovery.tools.inspect import iter_records
from offsetlog.txn.state import COMPLETE_ABORT, COMPLETE_COMMIT, ONGOING, PREPARED
from support import stores
from support.groups import form_group
from support.stores import open_group_store

TP0, TP1, TP2 = TopicPartition("in", 0), TopicPartition("in", 1), TopicPartition("in", 2)
DAY = 24 * 3600 * 1000


def open_store(path, clock=None, **kw):
    kw.setdefault("partitions", 5)
    kw.setdefault("transaction_check_interval_ms", 0)
    return stores.open_store(path, clock=clock, **kw)


def offsets(store, group):
    return {tp: v.offset for tp, v in store.fetch(group).items()}


# -- visibility and outcomes ------------------------------------------------------------------

def test_pending_offsets_are_invisible_until_commit(store_dir):
    with open_store(store_dir) as s:
        s.commit_sync("g", {TP0: 1})
        txn = s.init_transactions("t")
        txn.begin()
        txn.commit_offsets("g", {TP0: 5, TP1: 6})
        txn.commit_offsets("h", {TP0: 7})  # another group, maybe another log partition
        assert offsets(s, "g") == {TP0: 1} and offsets(s, "h") == {}
        with pytest.raises(UnstableOffsetCommitError) as e:
            s.fetch("g", require_stable=True)
        assert e.value.partitions == [TP0, TP1]
        with pytest.raises(UnstableOffsetCommitError):
            s.committed("h", TP0, require_stable=True)
        assert s.fetch("g", [TP2], require_stable=True) == {}  # only asked-for partitions count
        txn.commit()
        assert offsets(s, "g") == {TP0: 5, TP1: 6} and offsets(s, "h") == {TP0: 7}
        assert s.fetch("g", require_stable=True) == s.fetch("g")


def test_abort_drops_pending_offsets(store_dir):
    with open_store(store_dir) as s:
        s.commit_sync("g", {TP0: 1})
        txn = s.init_transactions("t")
        txn.begin()
        txn.commit_offsets("g", {TP0: 5, TP1: 6})
        txn.abort()
        assert offsets(s, "g") == {TP0: 1}
        assert s.fetch("g", require_stable=True) == {TP0: OffsetAndMetadata(1)}


def test_a_plain_commit_after_the_transactional_one_wins(store_dir):
    with open_store(store_dir) as s:
        txn = s.init_transactions("t")
        txn.begin()
        txn.commit_offsets("g", {TP0: 5, TP1: 5})
        s.commit_sync("g", {TP0: 9})  # written after the transactional offset of TP0
        txn.commit()
        assert offsets(s, "g") == {TP0: 9, TP1: 5}
    with open_store(store_dir) as s:  # replay agrees
        assert offsets(s, "g") == {TP0: 9, TP1: 5}


def test_a_transactional_offset_written_after_a_plain_one_wins(store_dir):
    with open_store(store_dir) as s:
        s.commit_sync("g", {TP0: 9})
        txn = s.init_transactions("t")
        with txn:
            txn.commit_offsets("g", {TP0: 3})
        assert offsets(s, "g") == {TP0: 3}


def test_two_producers_on_one_key_the_later_record_wins_whatever_the_marker_order(store_dir):
    with open_store(store_dir) as s:
        a, b = s.init_transactions("a"), s.init_transactions("b")
        a.begin(); b.begin()
        a.commit_offsets("g", {TP0: 1})
        b.commit_offsets("g", {TP0: 2})  # later log offset
        b.commit()
        a.commit()
        assert offsets(s, "g") == {TP0: 2}
        a.begin(); b.begin()
        a.commit_offsets("g", {TP0: 3})
        b.commit_offsets("g", {TP0: 4})
        a.commit()
        assert offsets(s, "g") == {TP0: 3}
        b.commit()
        assert offsets(s, "g") == {TP0: 4}
    with open_store(store_dir) as s:
        assert offsets(s, "g") == {TP0: 4}


def test_context_manager_commits_on_success_and_aborts_on_exception(store_dir):
    with open_store(store_dir) as s:
        txn = s.init_transactions("t")
        with txn:
            txn.commit_offsets("g", {TP0: 1})
        assert offsets(s, "g") == {TP0: 1}
        with pytest.raises(RuntimeError):
            with txn:
                txn.commit_offsets("g", {TP0: 2})
                raise RuntimeError("processing failed")
        assert offsets(s, "g") == {TP0: 1} and txn.state == "ready"
        with txn.begin():
            txn.commit_offsets("g", {TP0: 3})
        assert offsets(s, "g") == {TP0: 3}


def test_state_errors(store_dir):
    with open_store(store_dir) as s:
        txn = s.init_transactions("t")
        with pytest.raises(InvalidTxnStateError):
            txn.commit_offsets("g", {TP0: 1})
        with pytest.raises(InvalidTxnStateError):
            txn.commit()
        txn.begin()
        with pytest.raises(InvalidTxnStateError):
            txn.begin()
        txn.commit_offsets("g", {TP0: 1})
        txn.prepare()
        with pytest.raises(InvalidTxnStateError):
            txn.commit_offsets("g", {TP0: 2})
        txn.commit()
        with pytest.raises(InvalidTxnStateError):
            s.init_transactions("")
        with pytest.raises(InvalidTxnStateError):
            s.init_transactions("t", transaction_timeout_ms=0)
    with pytest.raises(StoreClosedError):
        txn.begin()


def test_empty_transaction_writes_nothing(store_dir):
    with open_store(store_dir) as s:
        txn = s.init_transactions("t")
        before = s.stats()
        with txn:
            txn.commit_offsets("g", {})
        assert [p["next_offset"] for p in s.stats()] == [p["next_offset"] for p in before]


def test_add_group_records_the_transaction_before_any_offsets(store_dir):
    """Kafka's AddOffsetsToTxn alone: the group's partition joins the durable state at once
    (Ongoing), across a reopen too; a commit with no offsets then completes it."""
    with open_store(store_dir) as s:
        txn = s.init_transactions("t")
        with pytest.raises(InvalidTxnStateError):
            txn.add_group("g")  # nothing begun
        txn.begin()
        with pytest.raises(InvalidGroupIdError):
            txn.add_group("")
        txn.add_group("g")
        txn.add_group("g")  # again: nothing more to record
        meta = s.transaction_state("t")
        assert meta.state == ONGOING and list(meta.partitions) == [s.partition_of("g")]
    with open_store(store_dir) as s:  # durable: the reopened store still has it open
        assert s.transaction_state("t").state == ONGOING
        txn = s.resume_transaction("t")  # as the wire server carries a producer on
        txn.commit()
        assert s.transaction_state("t").state == COMPLETE_COMMIT
        assert offsets(s, "g") == {}


# -- fencing ---------------------------------------------------------------------------------

def test_init_transactions_bumps_the_epoch_fences_the_old_handle_and_aborts_its_txn(store_dir):
    with open_store(store_dir) as s:
        old = s.init_transactions("t")
        old.begin()
        old.commit_offsets("g", {TP0: 5})
        new = s.init_transactions("t")
        assert (new.producer_id, new.producer_epoch) == (old.producer_id, old.producer_epoch + 1)
        assert offsets(s, "g") == {} and s.fetch("g", require_stable=True) == {}
        for call in (old.commit, old.abort, old.begin, old.prepare,
                     lambda: old.commit_offsets("g", {TP0: 6})):
            with pytest.raises(ProducerFencedError):
                call()
        with new:
            new.commit_offsets("g", {TP0: 7})
        assert offsets(s, "g") == {TP0: 7}
    with open_store(store_dir) as s:  # the epoch is durable: the fence holds after reopen
        assert s.init_transactions("t").producer_epoch == new.producer_epoch + 1


def test_producer_ids_are_never_reused_across_reopen(store_dir):
    with open_store(store_dir) as s:
        ids = {s.init_transactions(f"t{i}").producer_id for i in range(5)}
    with open_store(store_dir) as s:
        fresh = s.init_transactions("another").producer_id
    assert len(ids) == 5 and fresh not in ids and fresh > max(ids)


def test_generation_fencing_applies_to_transactional_commits(store_dir, clock):
    with open_group_store(store_dir, clock, transaction_check_interval_ms=0) as s:
        gen, (m1,) = form_group(s, clock, topics=("in",))
        txn = s.init_transactions("t")
        txn.begin()
        txn.commit_offsets("g", {TP0: 5}, generation_id=gen, member_id=m1)
        with pytest.raises(IllegalGenerationError):
            txn.commit_offsets("g", {TP0: 6}, generation_id=gen + 1, member_id=m1)
        with pytest.raises(UnknownMemberIdError):
            txn.commit_offsets("g", {TP0: 6}, generation_id=gen, member_id="stranger")
        txn.commit()
        assert s.committed("g", TP0).offset == 5


def test_transactional_commit_without_member_or_generation_is_exempt(store_dir, clock):
    # Kafka's exemption: TxnOffsetCommit v0-2 carry no member id or generation, and a producer
    # whose consumer never joined sends "" and -1; a plain commit like that is fenced.
    with open_group_store(store_dir, clock, transaction_check_interval_ms=0) as s:
        form_group(s, clock, topics=("in",))
        with pytest.raises(UnknownMemberIdError):
            s.commit_sync("g", {TP0: 6})
        txn = s.init_transactions("t")
        with txn:
            txn.commit_offsets("g", {TP0: 7})
        assert s.committed("g", TP0).offset == 7


# -- prepare, keep_prepared, reopen ----------------------------------------------------------

def test_prepared_transaction_survives_reopen_and_keep_prepared_commits_it(store_dir):
    with open_store(store_dir) as s:
        txn = s.init_transactions("t")
        txn.begin()
        txn.commit_offsets("g", {TP0: 5})
        txn.commit_offsets("h", {TP1: 6})
        txn.prepare()
        assert s.transaction_state("t").state == PREPARED
    with open_store(store_dir) as s:
        assert offsets(s, "g") == {}
        with pytest.raises(UnstableOffsetCommitError):
            s.fetch("g", require_stable=True)
        kept = s.init_transactions("t", keep_prepared=True)
        assert kept.prepared and kept.producer_epoch == txn.producer_epoch + 1
        assert kept.pending_offsets() == {"g": {TP0: OffsetAndMetadata(5)},
                                          "h": {TP1: OffsetAndMetadata(6)}}
        kept.commit()
        assert offsets(s, "g") == {TP0: 5} and offsets(s, "h") == {TP1: 6}
        assert s.transaction_state("t").state == COMPLETE_COMMIT


def test_init_transactions_without_keep_prepared_aborts_a_prepared_transaction(store_dir):
    with open_store(store_dir) as s:
        txn = s.init_transactions("t")
        txn.begin()
        txn.commit_offsets("g", {TP0: 5})
        txn.prepare()
        again = s.init_transactions("t")
        assert not again.prepared and again.state == "ready"
        assert offsets(s, "g") == {} and s.fetch("g", require_stable=True) == {}
        with pytest.raises(ProducerFencedError):
            txn.commit()


def test_keep_prepared_then_abort(store_dir):
    with open_store(store_dir) as s:
        txn = s.init_transactions("t")
        txn.begin()
        txn.commit_offsets("g", {TP0: 5})
        txn.prepare()
    with open_store(store_dir) as s:
        kept = s.init_transactions("t", keep_prepared=True)
        kept.abort()
        assert offsets(s, "g") == {} and s.transaction_state("t").state == COMPLETE_ABORT
        kept.begin()  # the handle goes on
        kept.commit_offsets("g", {TP0: 8})
        kept.commit()
        assert offsets(s, "g") == {TP0: 8}


def test_an_open_transaction_stays_pending_across_reopen_until_init_aborts_it(store_dir):
    with open_store(store_dir) as s:
        txn = s.init_transactions("t")
        txn.begin()
        txn.commit_offsets("g", {TP0: 5})
    with open_store(store_dir) as s:
        assert s.transaction_state("t").state == ONGOING
        with pytest.raises(UnstableOffsetCommitError):
            s.fetch("g", require_stable=True)
        fresh = s.init_transactions("t", keep_prepared=True)  # Ongoing is not prepared
        assert not fresh.prepared
        assert s.fetch("g", require_stable=True) == {}


def test_transaction_states_lists_every_id_as_transaction_state_does(store_dir, clock):
    with open_store(store_dir, clock) as s:
        assert s.transaction_states() == []
        done, open_ = s.init_transactions("b-done"), s.init_transactions("a-open")
        with done:
            done.commit_offsets("g", {TP0: 5})  # its Complete record may still be owed
        open_.begin()
        open_.commit_offsets("h", {TP1: 6})
        states = s.transaction_states()
        assert [m.transactional_id for m in states] == ["a-open", "b-done"]
        assert states == [s.transaction_state("a-open"), s.transaction_state("b-done")]
        assert [m.state for m in states] == [ONGOING, COMPLETE_COMMIT]
    with open_store(store_dir, clock) as s:  # the same after a reopen
        assert [(m.transactional_id, m.state) for m in s.transaction_states()] == [
            ("a-open", ONGOING), ("b-done", COMPLETE_COMMIT)]


# -- a producer bumping its own epoch (KIP-360) ---------------------------------------------

def test_expected_producer_bumps_its_own_epoch_and_fences_a_zombie(store_dir, clock):
    with open_store(store_dir, clock) as s:
        first = s.init_transactions("t")
        pid, epoch = first.producer_id, first.producer_epoch
        own = s.init_transactions("t", expected_producer=(pid, epoch))
        assert (own.producer_id, own.producer_epoch) == (pid, epoch + 1)
        with pytest.raises(ProducerFencedError):
            first.ensure_current()
        with own:
            own.commit_offsets("g", {TP0: 5})
        before = s.transaction_state("t")
        # a zombie with an older epoch, or another producer id, takes nothing
        for stale in ((pid, epoch - 1 if epoch else 7), (pid + 100, epoch + 1)):
            with pytest.raises(ProducerFencedError, match="not the current one"):
                s.init_transactions("t", expected_producer=stale)
        assert s.transaction_state("t") == before
        own.ensure_current()
        with own:
            own.commit_offsets("g", {TP0: 6})
        assert offsets(s, "g") == {TP0: 6}


def test_a_retried_bump_gets_the_same_epoch_and_writes_nothing(store_dir, clock):
    with open_store(store_dir, clock) as s:
        pid, epoch = s.init_transactions("t").producer_id, 0
        bumped = s.init_transactions("t", expected_producer=(pid, epoch))
        assert bumped.producer_epoch == epoch + 1
        written = s.transaction_state("t")
    with open_store(store_dir, clock) as s:  # the retry may come after a restart
        again = s.init_transactions("t", expected_producer=(pid, epoch))
        assert (again.producer_id, again.producer_epoch) == (pid, epoch + 1)
        assert s.transaction_state("t") == written
        with again:
            again.commit_offsets("g", {TP0: 5})
        assert offsets(s, "g") == {TP0: 5}
        # until the next bump, as in Kafka (the last epoch stays in the state)
        assert s.init_transactions("t", expected_producer=(pid, epoch)).producer_epoch == 1
        # a new producer instance (no id to give) always takes over, and clears it
        fresh = s.init_transactions("t")
        assert fresh.producer_epoch == epoch + 2
        assert s.transaction_state("t").last_producer_epoch == -1


def test_a_retried_bump_across_a_rotation(store_dir, clock, monkeypatch):
    monkeypatch.setattr("offsetlog.txn.state.MAX_EPOCH", 2)
    monkeypatch.setattr("offsetlog.store.transactions.MAX_EPOCH", 2)
    with open_store(store_dir, clock) as s:
        txn = s.init_transactions("t")
        while txn.producer_epoch < 2:
            txn = s.init_transactions("t")
        old = (txn.producer_id, txn.producer_epoch)
        rotated = s.init_transactions("t", expected_producer=old)
        assert rotated.producer_id != old[0] and rotated.producer_epoch == 0
        again = s.init_transactions("t", expected_producer=old)
        assert (again.producer_id, again.producer_epoch) == (rotated.producer_id, 0)


def test_the_ongoing_transaction_of_the_current_epoch_is_aborted_by_its_bump(store_dir, clock):
    with open_store(store_dir, clock) as s:
        txn = s.init_transactions("t")
        txn.begin()
        txn.commit_offsets("g", {TP0: 5})
        own = s.init_transactions("t", expected_producer=(txn.producer_id, txn.producer_epoch))
        assert own.producer_epoch == txn.producer_epoch + 1
        assert s.fetch("g", require_stable=True) == {}


@pytest.mark.parametrize("bad", [(1,), (1, 2, 3), ("1", 0), (1, True), (-1, 0), (1, -1),
                                 (1, 32768), 7])
def test_expected_producer_must_be_an_id_and_an_epoch(store_dir, bad):
    with open_store(store_dir) as s:
        with pytest.raises(InvalidTxnStateError, match="expected_producer"):
            s.init_transactions("t", expected_producer=bad)


# -- timeouts --------------------------------------------------------------------------------

def test_open_transactions_time_out_but_prepared_ones_do_not(store_dir, clock):
    with open_store(store_dir, clock, transaction_timeout_ms=1_000) as s:
        slow = s.init_transactions("slow")
        slow.begin()
        slow.commit_offsets("g", {TP0: 5})
        prepared = s.init_transactions("prepared", transaction_timeout_ms=500)
        prepared.begin()
        prepared.commit_offsets("g", {TP1: 6})
        prepared.prepare()
        clock.advance(999)
        assert s.poll_transactions() == 0
        clock.advance(1)
        assert s.poll_transactions() == 1
        assert s.transaction_state("slow").state == COMPLETE_ABORT
        assert s.transaction_state("prepared").state == PREPARED
        assert s.fetch("g", [TP0], require_stable=True) == {}
        with pytest.raises(TransactionTimeoutError):
            slow.commit_offsets("g", {TP0: 7})
        with pytest.raises(TransactionTimeoutError):
            slow.commit()
        slow.abort()  # acknowledges the timeout
        with slow:
            slow.commit_offsets("g", {TP0: 7})
        prepared.commit()
        assert offsets(s, "g") == {TP0: 7, TP1: 6}


def test_ensure_current_raises_what_the_next_call_would(store_dir, clock):
    with open_store(store_dir, clock, transaction_timeout_ms=1_000) as s:
        txn = s.init_transactions("t")
        txn.ensure_current()  # ready: nothing to raise
        txn.begin()
        txn.commit_offsets("g", {TP0: 5})
        txn.ensure_current()
        clock.advance(1_000)
        assert s.poll_transactions() == 1
        with pytest.raises(TransactionTimeoutError):
            txn.ensure_current()
        assert txn.state == "timed_out"
        txn.abort()
        txn.ensure_current()
        newer = s.init_transactions("t")
        with pytest.raises(ProducerFencedError):
            txn.ensure_current()
        newer.ensure_current()


def test_fence_on_transaction_timeout_bumps_the_epoch_in_the_abort(store_dir, clock):
    kw = {"transaction_timeout_ms": 1_000, "fence_on_transaction_timeout": True}
    with open_store(store_dir, clock, **kw) as s:
        txn = s.init_transactions("t")
        pid, epoch = txn.producer_id, txn.producer_epoch
        txn.begin()
        txn.commit_offsets("g", {TP0: 5})
        clock.advance(1_000)
        assert s.poll_transactions() == 1
        state = s.transaction_state("t")
        assert (state.state, state.producer_id, state.producer_epoch) == (
            COMPLETE_ABORT, pid, epoch + 1)
        assert s.fetch("g", [TP0], require_stable=True) == {}
        # fenced, not timed out: abort() does not bring the handle back
        for call in (txn.ensure_current, txn.abort, txn.commit,
                     lambda: txn.commit_offsets("g", {TP0: 6})):
            with pytest.raises(ProducerFencedError, match="timeout"):
                call()
        assert txn.state == "fenced"
    with open_store(store_dir, clock, **kw) as s:
        # the fence is in the log: a handle taken up again has the bumped epoch
        resumed = s.resume_transaction("t")
        assert (resumed.producer_id, resumed.producer_epoch) == (pid, epoch + 1)
        newer = s.init_transactions("t")
        assert (newer.producer_id, newer.producer_epoch) == (pid, epoch + 2)
        with newer:
            newer.commit_offsets("g", {TP0: 7})
        assert offsets(s, "g") == {TP0: 7}


def test_fence_on_transaction_timeout_with_the_epoch_exhausted(store_dir, clock,
                                                                 monkeypatch):
    """An epoch that cannot be bumped: the abort keeps it and the handle is timed out, as
    without the option (init_transactions then moves to a new producer id)."""
    MAX_EPOCH = 3  # Kafka's is 32767: as many init_transactions would take seconds here
    monkeypatch.setattr("offsetlog.txn.state.MAX_EPOCH", MAX_EPOCH)
    monkeypatch.setattr("offsetlog.store.transactions.MAX_EPOCH", MAX_EPOCH)
    with open_store(store_dir, clock, transaction_timeout_ms=1_000,
                    fence_on_transaction_timeout=True) as s:
        txn = s.init_transactions("t")
        while txn.producer_epoch < MAX_EPOCH:
            txn = s.init_transactions("t")
        pid = txn.producer_id
        txn.begin()
        txn.commit_offsets("g", {TP0: 5})
        clock.advance(1_000)
        assert s.poll_transactions() == 1
        assert s.transaction_state("t").producer_epoch == MAX_EPOCH
        with pytest.raises(TransactionTimeoutError):
            txn.commit()
        txn.abort()
        newer = s.init_transactions("t")
        assert newer.producer_id != pid and newer.producer_epoch == 0


def test_fence_on_transaction_timeout_must_be_a_bool(store_dir):
    from offsetlog.errors import StoreConfigError

    with pytest.raises(StoreConfigError, match="fence_on_transaction_timeout"):
        open_store(store_dir, fence_on_transaction_timeout=1)


def test_the_timer_thread_aborts_timed_out_transactions(store_dir):
    import time
    with open_store(store_dir, transaction_timeout_ms=1, transaction_check_interval_ms=20) as s:
        txn = s.init_transactions("t")
        txn.begin()
        txn.commit_offsets("g", {TP0: 5})
        for _ in range(500):
            if s.transaction_state("t").state == COMPLETE_ABORT:
                break
            time.sleep(0.01)
        assert s.transaction_state("t").state == COMPLETE_ABORT
        assert s.fetch("g", require_stable=True) == {}


# -- expiry, delete_group --------------------------------------------------------------------

def test_expiry_skips_keys_with_pending_offsets(store_dir, clock):
    with open_store(store_dir, clock, retention_ms=DAY) as s:
        s.commit_sync("g", {TP0: 1, TP1: 1})
        txn = s.init_transactions("t", transaction_timeout_ms=10 * DAY)
        txn.begin()
        txn.commit_offsets("g", {TP0: 2})
        clock.advance(2 * DAY)
        assert s.expire_offsets() == 1  # TP1 only
        assert offsets(s, "g") == {TP0: 1}
        txn.commit()
        assert offsets(s, "g") == {TP0: 2}


def test_expiry_never_deletes_a_managed_group_with_an_open_transaction(store_dir, clock):
    with open_group_store(store_dir, clock, retention_ms=DAY,
                          transaction_check_interval_ms=0) as s:
        gen, (m1,) = form_group(s, clock, topics=("in",))
        txn = s.init_transactions("t", transaction_timeout_ms=10 * DAY)
        txn.begin()
        txn.commit_offsets("g", {TP0: 2}, generation_id=gen, member_id=m1)
        s.leave_group("g", member_id=m1).result(timeout=10)
        assert s.describe_group("g").state == "Empty"
        clock.advance(2 * DAY)
        s.expire_offsets()
        assert s.describe_group("g") is not None  # kept: its transaction is open
        txn.commit()
        assert s.committed("g", TP0).offset == 2


def test_delete_group_removes_pending_offsets(store_dir):
    with open_store(store_dir) as s:
        s.commit_sync("g", {TP0: 1})
        txn = s.init_transactions("t")
        txn.begin()
        txn.commit_offsets("g", {TP0: 2, TP1: 2})
        s.delete_group("g")
        assert s.fetch("g", require_stable=True) == {}
        txn.commit()  # nothing of g is left to commit
        assert offsets(s, "g") == {}
    with open_store(store_dir) as s:
        assert offsets(s, "g") == {} and s.fetch("g", require_stable=True) == {}


# -- compaction ------------------------------------------------------------------------------

def _records(store_dir):
    return [(off, r) for _, _, _, off, r in iter_records(store_dir)]


def test_compaction_drops_aborted_keeps_undecided_and_then_markers(store_dir, clock):
    with open_store(store_dir, clock, partitions=1, segment_bytes=1024,
                    delete_retention_ms=1_000) as s:
        t = s.init_transactions("t")
        with t:
            t.commit_offsets("g", {TP0: 1, TP1: 1})
        t.begin()
        t.commit_offsets("g", {TP0: 2})
        t.abort()
        t.begin()
        t.commit_offsets("g", {TP2: 3})
        t.prepare()  # undecided: must survive cleaning
        for i in range(40):  # plain commits roll segments past all of it
            s.commit_sync("p", {TopicPartition("x", i % 3): i})
        state = {g: s.fetch(g) for g in ("g", "p")}
        s.compact()
        assert {g: s.fetch(g) for g in ("g", "p")} == state
        kept = [r for _, r in _records(store_dir)]
        pending_values = [commit_entry(r[2], r[4])[0] for r in kept
                          if r[1] == 1 and commit_key(r[2], r[3])[0] == "g"]
        assert 3 in pending_values  # the prepared transaction's record is still there
        assert 1 in pending_values and 2 not in pending_values  # aborted record dropped
        t.commit()
        for i in range(40):
            s.commit_sync("p", {TopicPartition("x", i % 3): i})
        s.compact()  # now the markers of transactions without records get their horizon
        clock.advance(2_000)
        s.compact()
        state = {g: s.fetch(g) for g in ("g", "p")}
        kept = [r for _, r in _records(store_dir)]
        markers = [r for r in kept if r[1] == 3]
        # the aborted transaction's marker is gone; the committed ones with records stay
        assert [m[4]["result"] for m in markers] == ["commit", "commit"]
    with open_store(store_dir, partitions=1) as s:
        assert {g: s.fetch(g) for g in ("g", "p")} == state
        assert s.fetch("g", require_stable=True) == state["g"]


def test_compaction_never_lets_an_aborted_offset_shadow_a_committed_one(store_dir):
    with open_store(store_dir, partitions=1, segment_bytes=1024) as s:
        s.commit_sync("g", {TP0: 1})
        t = s.init_transactions("t")
        t.begin()
        t.commit_offsets("g", {TP0: 2})
        t.abort()
        for i in range(30):
            s.commit_sync("p", {TopicPartition("x", 0): i})
        s.compact()
    with open_store(store_dir, partitions=1) as s:
        assert offsets(s, "g") == {TP0: 1}


def test_compaction_stops_before_an_undecided_transaction_and_what_it_overlaps(store_dir):
    with open_store(store_dir, partitions=1, segment_bytes=1024) as s:
        a, b = s.init_transactions("a"), s.init_transactions("b")
        a.begin()
        a.commit_offsets("g", {TP0: 1})  # decided only after b begins
        for i in range(12):
            s.commit_sync("p", {TopicPartition("x", 0): i})
        b.begin()
        b.commit_offsets("g", {TP1: 1})  # stays undecided
        for i in range(12):
            s.commit_sync("p", {TopicPartition("x", 0): i})
        a.commit()
        for i in range(12):
            s.commit_sync("p", {TopicPartition("x", 0): i})
        (result,) = s.compact()
        assert result.first_unstable_offset is not None
        state = offsets(s, "g")
    with open_store(store_dir, partitions=1) as s:
        assert offsets(s, "g") == state == {TP0: 1}
        kept = s.init_transactions("b", keep_prepared=True)
        assert not kept.prepared


def _last_state_record(store_dir, tid):
    states = [r for _, r in _records(store_dir) if r[1] == 4 and r[3]["transactional_id"] == tid]
    return states[-1][4]["state"]


def test_the_complete_record_rides_with_the_next_state_write_or_close(store_dir):
    with open_store(store_dir) as s:
        txn = s.init_transactions("t")
        with txn:
            txn.commit_offsets("g", {TP0: 1})
        assert s.transaction_state("t").state == COMPLETE_COMMIT
        assert _last_state_record(store_dir, "t") == "PrepareCommit"  # not written yet
        with txn:
            txn.commit_offsets("g", {TP0: 2})  # its Ongoing record carries the Complete
        states = [r[4]["state"] for _, r in _records(store_dir) if r[1] == 4]
        assert states[-3:] == ["CompleteCommit", "Ongoing", "PrepareCommit"]
    assert _last_state_record(store_dir, "t") == "CompleteCommit"  # written by close()


def test_the_timer_pass_writes_owed_complete_records(store_dir, clock):
    with open_store(store_dir, clock) as s:
        txn = s.init_transactions("t")
        with txn:
            txn.commit_offsets("g", {TP0: 1})
        s.poll_transactions()
        assert _last_state_record(store_dir, "t") == "CompleteCommit"


def test_open_and_prepared_transactions_ride_in_snapshots(tmp_path):
    """A snapshot taken while transactions are undecided must hand them on: the reopen loads
    it and replays only the log after it, where the commit marker of one of them lies."""
    path = str(tmp_path / "s")
    quiet = dict(partitions=1, retention_check_interval_ms=0, cleaner_backoff_ms=0,
                 transaction_check_interval_ms=0, snapshot_interval_records=0,
                 snapshot_interval_ms=0, snapshot_on_close=False)
    a0, a1 = TopicPartition("a", 0), TopicPartition("a", 1)
    with OffsetStore.open(path, **quiet) as s:
        t1, t2 = s.init_transactions("t1"), s.init_transactions("t2")
        t1.begin()
        t1.commit_offsets("g", {a0: 5})
        t2.begin()
        t2.commit_offsets("g", {a1: 7})
        t2.prepare()
        [snap] = s.snapshot()
        assert snap.taken
        t1.commit()  # its marker is in the tail, after the snapshot
    with OffsetStore.open(path, **quiet) as s:
        assert s.recovery_report.snapshots_loaded == {0: snap.offset}
        assert s.fetch("g") == {a0: OffsetAndMetadata(5)}
        with pytest.raises(UnstableOffsetCommitError):
            s.fetch("g", require_stable=True)
        t2 = s.init_transactions("t2", keep_prepared=True)
        assert t2.prepared
        t2.commit()
        assert s.fetch("g", require_stable=True) == {a0: OffsetAndMetadata(5),
                                                      a1: OffsetAndMetadata(7)}
