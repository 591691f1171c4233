"""ListTransactions, DescribeTransactions and DescribeProducers, judged by kafka-python's
admin client (its ``kafka-transactions.sh`` counterparts): the store's transactional ids
with Kafka's filters, each transaction's offsets partitions named as Kafka names them
(``__consumer_offsets``, the group's partition), unknown ids as Kafka answers them."""

from __future__ import annotations

import pytest

from offsetlog.partitioner import partition_for
from offsetlog.server.txn_admin import kafka_state
from offsetlog.txn.state import PREPARED, TxnMetadata
from support.wire_raw import call
from support.wire_server import raw_socket
from support.wire_txn import end_txn, init_producer, send_offsets


@pytest.fixture
def two_transactions(server, group_id):
    """``tx-open`` with offsets of group ``{group_id}-o`` pending, ``tx-done`` committed."""
    ids = {}
    with raw_socket(server) as sock:
        for tid, group, finish in (("tx-open", f"{group_id}-o", False),
                                   ("tx-done", f"{group_id}-d", True)):
            pid, epoch = init_producer(sock, tid)
            send_offsets(sock, tid, pid, epoch, group)
            if finish:
                assert end_txn(sock, tid, pid, epoch, True) == 0
            ids[tid] = pid
    return ids


def test_list_transactions_with_kafkas_filters(server, two_transactions):
    from kafka.admin import KafkaAdminClient
    from kafka.admin._transactions import TransactionState

    pids = two_transactions
    admin = KafkaAdminClient(bootstrap_servers=server.bootstrap)
    try:
        def listed(**filters):
            (node, rows), = admin.list_transactions(**filters).items()
            assert node == 0
            return {(r.transactional_id, r.producer_id, r.state) for r in rows}

        both = {("tx-open", pids["tx-open"], TransactionState.ONGOING),
                ("tx-done", pids["tx-done"], TransactionState.COMPLETE_COMMIT)}
        assert listed() == both
        assert listed(state_filters=["CompleteCommit"]) == both - {
            ("tx-open", pids["tx-open"], TransactionState.ONGOING)}
        assert {r[0] for r in listed(producer_id_filters=[pids["tx-open"]])} == {"tx-open"}
        # running longer than 0 ms: the open one; longer than an hour: none
        assert {r[0] for r in listed(duration_filter_ms=0)} == {"tx-open"}
        assert listed(duration_filter_ms=3_600_000) == set()
        assert {r[0] for r in listed(transactional_id_pattern="tx-d.*")} == {"tx-done"}
        assert listed(transactional_id_pattern="tx") == set()  # the whole id must match
    finally:
        admin.close()


def test_list_transactions_names_unknown_state_filters(server, two_transactions):
    with raw_socket(server) as sock:
        r = call(sock, 66, 0, state_filters=["Ongoing", "Bogus"], producer_id_filters=[])
        assert int(r.error_code) == 0 and list(r.unknown_state_filters) == ["Bogus"]
        assert [t.transactional_id for t in r.transaction_states] == ["tx-open"]
        bad = call(sock, 66, 2, state_filters=[], producer_id_filters=[], duration_filter=-1,
                   transactional_id_pattern="(")
        assert int(bad.error_code) == 128  # INVALID_REGULAR_EXPRESSION


def test_describe_and_find_hanging_transactions(server, group_id, two_transactions):
    from kafka import TopicPartition
    from kafka.admin import KafkaAdminClient
    from kafka.errors import TransactionalIdNotFoundError

    admin = KafkaAdminClient(bootstrap_servers=server.bootstrap)
    try:
        got = admin.describe_transactions(["tx-open", "tx-done"])
        opened, done = got["tx-open"], got["tx-done"]
        # the group's own partition of __consumer_offsets, as Kafka would place it
        assert opened.topic_partitions == {
            TopicPartition("__consumer_offsets", partition_for(f"{group_id}-o", 50))}
        assert (opened.state.value, opened.producer_epoch, opened.transaction_timeout_ms) == (
            "Ongoing", 0, 60_000)
        assert opened.transaction_start_time_ms > 0
        assert (done.state.value, done.topic_partitions, done.transaction_start_time_ms) == (
            "CompleteCommit", set(), -1)
        with pytest.raises(TransactionalIdNotFoundError):
            admin.describe_transactions(["nobody"])
        # the tool's threshold is max.timeout + 5 min; at 0 the open one counts as hanging
        hanging = admin.find_hanging_transactions(max_transaction_timeout_ms=-300_000)
        assert [h["transactional_id"] for h in hanging] == ["tx-open"]
        assert admin.find_hanging_transactions() == []
    finally:
        admin.close()


def test_describe_producers(server):
    with raw_socket(server) as sock:
        r = call(sock, 61, 0, topics=[dict(name="orders", partition_indexes=[0, 99]),
                                      dict(name="nowhere", partition_indexes=[0])])
    codes = {(t.name, int(p.partition_index)): (int(p.error_code), p.active_producers)
             for t in r.topics for p in t.partitions}
    assert codes == {("orders", 0): (0, ()), ("orders", 99): (3, ()), ("nowhere", 0): (3, ())}


def test_a_prepared_transaction_is_ongoing_to_kafka():
    meta = TxnMetadata("t", 1, 0, PREPARED, 1000, 0, (3,), 5)
    assert kafka_state(meta) == "Ongoing"
