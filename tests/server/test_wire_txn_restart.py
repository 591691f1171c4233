"""A transactional producer carries on across a server restart, as Kafka's producers do
across a coordinator failover (the new coordinator loads ``__transaction_state``; here the
store's TRANSACTION_STATE records): its producer id and epoch stay valid, an Ongoing
transaction can still be committed, an EndTxn retried after the restart gets the outcome
already recorded, and stale or unknown ids are refused as before."""

from __future__ import annotations

from support.wire_raw import call
from support.wire_server import raw_socket
from support.wire_txn import add_offsets as _add
from support.wire_txn import end_txn as _end
from support.wire_txn import init_producer as _init
from support.wire_txn import send_offsets as _send
from support.wire_txn import stable_fetch as _fetch


def test_an_ongoing_transaction_commits_after_a_restart(server, group_id):
    tid = f"tx-{group_id}"
    with raw_socket(server) as sock:
        pid, epoch = _init(sock, tid)
        _send(sock, tid, pid, epoch, group_id)
    assert _fetch(server, group_id) == (-1, 88)  # pending
    server.restart()
    assert _fetch(server, group_id) == (-1, 88)  # still pending: the transaction is Ongoing
    with raw_socket(server) as sock:
        # no InitProducerId: the same id and epoch go on (Kafka: INVALID_PRODUCER_ID_MAPPING
        # only for an id the coordinator does not know)
        assert _end(sock, tid, pid, epoch, True) == 0
    assert _fetch(server, group_id) == (17, 0)


def test_offsets_answered_before_a_kill_9_stay_in_the_transaction(server, group_id):
    """TxnOffsetCommits of a group already in the transaction (the ones the request loop
    writes itself) answered, then kill -9: none is lost, and the transaction commits the
    last of them."""
    tid = f"tx-{group_id}"
    with raw_socket(server) as sock:
        pid, epoch = _init(sock, tid)
        _send(sock, tid, pid, epoch, group_id)
        for offset in (18, 19, 20):
            r = call(sock, 28, 3, transactional_id=tid, group_id=group_id, producer_id=pid,
                     producer_epoch=epoch, generation_id=-1, member_id="",
                     group_instance_id=None, topics=[dict(name="orders", partitions=[dict(
                         partition_index=0, committed_offset=offset,
                         committed_leader_epoch=-1, committed_metadata="")])])
            assert r.topics[0].partitions[0].error_code == 0
    server.kill9()
    server.start()
    assert _fetch(server, group_id) == (-1, 88)  # pending
    with raw_socket(server) as sock:
        assert _end(sock, tid, pid, epoch, True) == 0
    assert _fetch(server, group_id) == (20, 0)


def test_end_txn_retried_across_a_restart_gets_the_recorded_outcome(server, group_id):
    tid = f"tx-{group_id}"
    with raw_socket(server) as sock:
        pid, epoch = _init(sock, tid)
        _send(sock, tid, pid, epoch, group_id)
        assert _end(sock, tid, pid, epoch, True) == 0
    server.restart()
    with raw_socket(server) as sock:
        assert _end(sock, tid, pid, epoch, False) == 48  # abort a committed one: INVALID_TXN_STATE
        assert _end(sock, tid, pid, epoch, True) == 0    # the retried commit: done already
        # stale epoch and unknown producer id
        assert _add(sock, tid, pid, epoch - 1, group_id) == 90  # PRODUCER_FENCED (v3)
        assert _add(sock, tid, pid + 1000, epoch, group_id) == 49  # INVALID_PRODUCER_ID_MAPPING
        # and it carries on: a new transaction, aborted
        _send(sock, tid, pid, epoch, group_id)
        assert _end(sock, tid, pid, epoch, False) == 0
    assert _fetch(server, group_id) == (17, 0)


def test_confluent_producer_commits_its_transaction_across_a_restart(server, group_id):
    from confluent_kafka import Producer
    from confluent_kafka import TopicPartition as CTP

    from support.wire_clients import ck_consumer

    c = ck_consumer(server, group_id)
    p = Producer({"bootstrap.servers": server.bootstrap, "transactional.id": f"tx-{group_id}",
                  "reconnect.backoff.ms": 50, "reconnect.backoff.max.ms": 500})
    try:
        p.init_transactions(20)
        p.begin_transaction()
        p.send_offsets_to_transaction([CTP("orders", 0, 33)], c.consumer_group_metadata(), 20)
        assert _fetch(server, group_id) == (-1, 88)
        server.restart()
        p.commit_transaction(30)
        assert _fetch(server, group_id) == (33, 0)
    finally:
        c.close()
