"""Apache Kafka as the judge of transactional offset commits: InitProducerId,
AddOffsetsToTxn, TxnOffsetCommit and EndTxn in every state, right and wrong, fenced
producers, require_stable while a transaction is open, DescribeTransactions and
ListTransactions (support/kafka_diff.py runs each session on both targets)."""

from __future__ import annotations

import pytest

from support.kafka_diff import Poll, Req, at, compare
from support.kafka_steps import (
    add_offsets,
    commit_body,
    end,
    fetch_body,
    formed,
    init,
    ref,
    stable_fetch,
    txn_commit,
)

INIT_VERSIONS = range(0, 6)
ADD_VERSIONS = range(0, 4)
TXN_COMMIT_VERSIONS = range(0, 5)
END_VERSIONS = range(0, 5)


def expect(**paths):
    def check(answers):
        for path, value in paths.items():
            assert at(answers, path.replace("__", ".").lstrip("_")) == value, path
    return check


def old_epoch(c):
    """The epoch of the producer's first InitProducerId (saved as ``f``)."""
    return c["f_epoch"]


#: Difference (docs/PROTOCOL.md): an InitProducerId that finds a transaction open aborts it.
#: Kafka fences with one epoch bump for the abort and gives the producer the next (+2);
#: offsetlog's store bumps once (+1). Either way every older epoch is fenced.
ABORTING_INIT_EPOCH = (2, 1)


def partition_error(i):
    return f"_{i}__topics__0__partitions__0__error_code"


@pytest.mark.parametrize("v", INIT_VERSIONS)
def test_init_producer_id_twice_bumps_the_epoch(targets, gid, v):
    compare(*targets, [init(gid, v), init(gid, v)],
            check=expect(_0__error_code="NONE", _1__producer_epoch=1))


@pytest.mark.parametrize("v", INIT_VERSIONS)
def test_init_producer_id_with_a_timeout_over_the_maximum(targets, gid, v):
    compare(*targets, [init(gid, v, timeout=900_001)],
            check=expect(_0__error_code="INVALID_TRANSACTION_TIMEOUT"))


@pytest.mark.parametrize("v", INIT_VERSIONS)
def test_init_producer_id_of_an_idempotent_producer(targets, v):
    compare(*targets, [Req(22, v, dict(transactional_id=None, transaction_timeout=60_000,
                                       producer_id=-1, producer_epoch=-1))])


@pytest.mark.parametrize("v", [3, 4, 5])
def test_init_producer_id_with_its_own_id_and_epoch(targets, gid, v):
    """KIP-360: a producer that gives its current id and epoch gets the epoch bumped; a
    retry with the epoch before is answered the same; an older epoch is fenced."""
    steps = [init(gid, v), init(gid, v, pid=ref("p"), epoch=ref("p_epoch"), as_="q"),
             init(gid, v, pid=ref("p"), epoch=ref("p_epoch"), as_="r"),
             init(gid, v, pid=ref("p"), epoch=lambda c: c["r_epoch"] + 5, as_="s")]
    compare(*targets, steps)


@pytest.mark.parametrize("v", ADD_VERSIONS)
def test_add_offsets_of_an_unknown_transactional_id(targets, gid, v):
    compare(*targets, [add_offsets(gid, gid, v, pid=1000, epoch=0)],
            check=expect(_0__error_code="INVALID_PRODUCER_ID_MAPPING"))


@pytest.mark.parametrize("v", ADD_VERSIONS)
def test_add_offsets_with_another_producer_id(targets, gid, v):
    compare(*targets, [init(gid), add_offsets(gid, gid, v, pid=lambda c: c["p"] + 1)],
            check=expect(_1__error_code="INVALID_PRODUCER_ID_MAPPING"))


@pytest.mark.parametrize("v", ADD_VERSIONS)
def test_add_offsets_of_a_fenced_producer(targets, gid, v):
    steps = [init(gid, as_="f"), init(gid), add_offsets(gid, gid, v, epoch=old_epoch)]
    compare(*targets, steps)


@pytest.mark.parametrize("v", ADD_VERSIONS)
def test_add_offsets_with_an_empty_group_id(targets, gid, v):
    compare(*targets, [init(gid), add_offsets(gid, "", v)])


@pytest.mark.parametrize("v", TXN_COMMIT_VERSIONS)
def test_a_committed_transaction(targets, gid, v):
    steps = [init(gid), add_offsets(gid, gid), txn_commit(gid, gid, v),
             stable_fetch(gid, settled=False), Req(9, 5, fetch_body(gid)),
             end(gid, True), stable_fetch(gid), stable_fetch(gid, 9)]
    compare(*targets, steps, check=expect(**{partition_error(3): "UNSTABLE_OFFSET_COMMIT",
                                             "_6__topics__0__partitions__0__committed_offset": 17}))


@pytest.mark.parametrize("v", END_VERSIONS)
def test_an_aborted_transaction(targets, gid, v):
    steps = [init(gid), Req(8, 8, commit_body(gid, offset=5)), add_offsets(gid, gid),
             txn_commit(gid, gid), end(gid, False, v), stable_fetch(gid)]
    compare(*targets, steps, check=expect(
        **{"_5__topics__0__partitions__0__committed_offset": 5}))


@pytest.mark.parametrize("v", [7, 8, 9])
def test_require_stable_while_a_transaction_is_open(targets, gid, v):
    steps = [init(gid), add_offsets(gid, gid), txn_commit(gid, gid),
             stable_fetch(gid, v, settled=False),
             Req(9, v, fetch_body(gid, (("orders", [1]),), stable=True)),
             Req(9, v, fetch_body(gid, stable=False)), end(gid, False)]
    compare(*targets, steps)


@pytest.mark.parametrize("v", TXN_COMMIT_VERSIONS)
def test_txn_offset_commit_of_a_fenced_producer(targets, gid, v):
    steps = [init(gid, as_="f"), add_offsets(gid, gid, epoch=ref("f_epoch"), pid=ref("f")),
             init(gid), txn_commit(gid, gid, v, epoch=old_epoch)]
    compare(*targets, steps, known={"2.producer_epoch": ABORTING_INIT_EPOCH})


@pytest.mark.parametrize("v", TXN_COMMIT_VERSIONS)
def test_txn_offset_commit_to_an_unknown_topic(targets, gid, v):
    steps = [init(gid), add_offsets(gid, gid), txn_commit(gid, gid, v, topic="no-such-topic"),
             end(gid, True)]
    compare(*targets, steps)


@pytest.mark.parametrize("v", TXN_COMMIT_VERSIONS)
def test_txn_offset_commit_without_add_offsets(targets, gid, v):
    steps = [init(gid), txn_commit(gid, gid, v)]
    compare(*targets, steps)


@pytest.mark.parametrize("v", [3, 4])
def test_txn_offset_commit_of_a_member_with_a_wrong_generation(targets, gid, v):
    steps = formed(gid, 5) + [init(gid), add_offsets(gid, gid),
                              txn_commit(gid, gid, v, gen=lambda c: c["m_gen"] + 1,
                                         member=ref("m")),
                              txn_commit(gid, gid, v, gen=ref("m_gen"), member="no-such"),
                              txn_commit(gid, gid, v, gen=ref("m_gen"), member=ref("m")),
                              end(gid, False)]
    compare(*targets, steps)


@pytest.mark.parametrize("v", [0, 3, 4])
def test_txn_offset_commits_of_a_non_member_to_a_group_with_members(targets, gid, v):
    """A producer that is not a member of the Stable group it commits for (Kafka's rules 5
    and 6 do not bind a transaction's commit), twice in one transaction (the second, of a
    group already in it, is one offsetlog's request loop writes itself), then committed."""
    steps = formed(gid, 5) + [init(gid), add_offsets(gid, gid), txn_commit(gid, gid, v),
                              txn_commit(gid, gid, v, offset=18), end(gid, True),
                              stable_fetch(gid)]
    last = len(steps) - 1
    compare(*targets, steps, check=expect(
        **{f"_{last}__topics__0__partitions__0__committed_offset": 18,
           partition_error(last - 2): "NONE"}))


@pytest.mark.parametrize("v", END_VERSIONS)
def test_end_txn_with_no_transaction_begun(targets, gid, v):
    compare(*targets, [init(gid), end(gid, True, v), end(gid, False, v)],
            check=expect(_1__error_code="INVALID_TXN_STATE"))


@pytest.mark.parametrize("v", END_VERSIONS)
def test_end_txn_retried_and_the_other_outcome(targets, gid, v):
    steps = [init(gid), add_offsets(gid, gid), txn_commit(gid, gid), end(gid, True, v),
             end(gid, True, v), end(gid, False, v)]
    compare(*targets, steps, check=expect(_5__error_code="INVALID_TXN_STATE"))


@pytest.mark.parametrize("v", END_VERSIONS)
def test_end_txn_of_a_fenced_producer(targets, gid, v):
    steps = [init(gid, as_="f"), add_offsets(gid, gid, epoch=ref("f_epoch"), pid=ref("f")),
             init(gid), end(gid, True, v, epoch=old_epoch)]
    compare(*targets, steps, known={"2.producer_epoch": ABORTING_INIT_EPOCH})


@pytest.mark.parametrize("v", ADD_VERSIONS)
def test_add_offsets_of_a_producer_fenced_by_an_aborting_init(targets, gid, v):
    steps = [init(gid, as_="f"), add_offsets(gid, gid, epoch=ref("f_epoch"), pid=ref("f")),
             init(gid), add_offsets(gid, gid + "-2", v, epoch=old_epoch),
             add_offsets(gid, gid + "-2", v)]
    compare(*targets, steps, known={"2.producer_epoch": ABORTING_INIT_EPOCH})


@pytest.mark.parametrize("v", END_VERSIONS)
def test_end_txn_of_an_unknown_transactional_id(targets, gid, v):
    compare(*targets, [end(gid, True, v, pid=1000, epoch=0)])


@pytest.mark.parametrize("v", END_VERSIONS)
def test_end_txn_with_another_producer_id(targets, gid, v):
    compare(*targets, [init(gid), add_offsets(gid, gid),
                       end(gid, True, v, pid=lambda c: c["p"] + 1), end(gid, False)])


def test_describe_and_list_transactions(targets, gid):
    describe = Req(65, 0, dict(transactional_ids=[gid]))
    listing = Req(66, 1, dict(state_filters=[], producer_id_filters=[], duration_filter=-1))

    def mine(answers):
        for a in answers:
            if "transaction_states" in a and "unknown_state_filters" in a:
                a["transaction_states"] = [t for t in a["transaction_states"]
                                           if t["transactional_id"] == gid]
        return answers

    # (asked only while the transaction is open: before and after, Kafka's start time is
    # -1, which kio refuses to decode)
    steps = [init(gid), add_offsets(gid, gid), txn_commit(gid, gid), describe, listing,
             end(gid, True)]
    compare(*targets, steps, view=mine)


@pytest.mark.parametrize("v", [0, 1, 2])
@pytest.mark.parametrize("states", [[], ["Ongoing"], ["CompleteCommit"], ["NoSuchState"]])
def test_list_transactions_with_filters(targets, gid, v, states):
    listing = Req(66, v, dict(state_filters=states, producer_id_filters=[], duration_filter=-1,
                              transactional_id_pattern=gid + ".*"))

    def mine(answers):
        for a in answers:
            if "unknown_state_filters" in a:
                a["transaction_states"] = sorted(
                    (t for t in a["transaction_states"]
                     if t["transactional_id"].startswith(gid)),
                    key=lambda t: t["transactional_id"])
        return answers

    other = gid + "-b"
    settled = Poll(66, v, {**listing.body, "state_filters": []}, until=lambda r: not any(
        t.transaction_state.startswith("Prepare") for t in r.transaction_states
        if t.transactional_id.startswith(gid)))
    steps = [init(gid), add_offsets(gid, gid), txn_commit(gid, gid),
             init(other, as_="q"), add_offsets(other, other, pid=ref("q"), epoch=ref("q_epoch")),
             txn_commit(other, other, pid=ref("q"), epoch=ref("q_epoch")),
             end(other, True, pid=ref("q"), epoch=ref("q_epoch")), settled, listing,
             end(gid, False)]
    compare(*targets, steps, view=mine)


def _states_of(gid):
    def view(answers):
        for a in answers:
            if "unknown_state_filters" in a:
                a["transaction_states"] = [t["transaction_state"] for t in a["transaction_states"]
                                           if t["transactional_id"] == gid]
        return answers
    return view


def test_add_offsets_alone_is_recorded(targets, gid):
    """AddOffsetsToTxn is recorded at once, as Kafka records it: the transaction is Ongoing
    (with the group's partition) before any offsets; an EndTxn of it with no offsets ends it
    CompleteCommit, and that EndTxn retried is taken for a retry. (Until the store's
    ``Transaction.add_group``, offsetlog recorded a transaction at its first offsets only.)"""
    listing = Req(66, 2, dict(state_filters=[], producer_id_filters=[], duration_filter=-1,
                              transactional_id_pattern=gid))
    settled = Poll(66, 2, listing.body, until=lambda r: not any(
        t.transaction_state.startswith("Prepare") for t in r.transaction_states))
    steps = [init(gid), add_offsets(gid, gid), listing, end(gid, True), settled,
             end(gid, True)]
    answers = compare(*targets, steps, view=_states_of(gid))
    assert answers[2]["transaction_states"] == ["Ongoing"]
    assert answers[4]["transaction_states"] == ["CompleteCommit"]
    assert answers[5]["error_code"] == "NONE"


@pytest.mark.parametrize("committed", [True, False])
def test_a_group_of_pending_offsets_only(targets, gid, committed):
    """A group whose only offsets are pending in an open transaction is Kafka's simple group:
    described Empty and deleted by DeleteGroups, its pending offsets with it, so the
    transaction's end writes none of them."""
    from support.kafka_steps import delete_group, describe, fetch, txn_settled

    tid = f"{gid}-t"
    steps = [init(tid), add_offsets(tid, gid), txn_commit(tid, gid, offset=5), describe(gid, 5),
             delete_group(gid, 2), describe(gid, 5), end(tid, committed), txn_settled(tid),
             fetch(gid, 8), describe(gid, 5), delete_group(gid, 2)]
    compare(*targets, steps, check=expect(
        _3__groups__0__group_state="Empty", _4__results__0__error_code="NONE",
        _5__groups__0__group_state="Dead",
        _8__groups__0__topics__0__partitions__0__committed_offset=-1,
        _10__results__0__error_code="GROUP_ID_NOT_FOUND"))


def test_a_group_whose_aborted_transaction_held_its_only_offsets(targets, gid):
    """Pinned difference, as after OffsetDelete of a simple group's last offset
    (test_diff_offsets.py): Kafka keeps the simple group a transactional commit made after
    the transaction aborts, Empty, until the retention pass or DeleteGroups drops it;
    offsetlog knows a group by its metadata or its offsets, committed or pending, so the
    group is gone with the abort (docs/PROTOCOL.md)."""
    from support.kafka_steps import delete_group, describe, txn_settled

    tid = f"{gid}-t"
    steps = [init(tid), add_offsets(tid, gid), txn_commit(tid, gid, offset=5),
             end(tid, False), txn_settled(tid), describe(gid, 5), delete_group(gid, 2),
             describe(gid, 5)]
    compare(*targets, steps, known={
        "5.groups.0.group_state": ("Empty", "Dead"),
        "6.results.0.error_code": ("NONE", "GROUP_ID_NOT_FOUND")},
        check=expect(_3__error_code="NONE", _7__groups__0__group_state="Dead"))
