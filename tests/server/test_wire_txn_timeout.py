"""Kafka's answers around a transaction's life: a transaction the store aborts for its
timeout fences its producer's epoch (Kafka's coordinator bumps it), and an EndTxn with no
transaction open succeeds only as a retry of the outcome last recorded (Kafka's
CompleteCommit / CompleteAbort), never for one that was never begun (Empty)."""

from __future__ import annotations

import time

import pytest

from support.wire_server import Server, raw_socket, wait_until
from support.wire_txn import add_offsets as _add
from support.wire_txn import end_txn as _end
from support.wire_txn import init_producer as _init
from support.wire_txn import init_producer_as as _init_as
from support.wire_txn import send_offsets as _send
from support.wire_txn import stable_fetch as _fetch
from support.wire_txn import txn_commit as _txn_commit

PRODUCER_FENCED, INVALID_PRODUCER_EPOCH, INVALID_TXN_STATE, UNSTABLE = 90, 47, 48, 88


@pytest.fixture
def quick_timeouts(tmp_path):
    """A server that looks for timed-out transactions every 50 ms."""
    s = Server(str(tmp_path / "store"), config=[
        "transaction.abort.timed.out.transaction.cleanup.interval.ms=50"]).start()
    yield s
    s.stop()


def test_a_timed_out_transaction_fences_its_producer(quick_timeouts, group_id):
    server, tid = quick_timeouts, f"tx-{group_id}"
    with raw_socket(server) as sock:
        pid, epoch = _init(sock, tid, timeout_ms=300)
        _send(sock, tid, pid, epoch, group_id)
        assert _fetch(server, group_id) == (-1, UNSTABLE)
        # the store aborts it: the pending offset is gone, nothing was committed
        wait_until(lambda: _fetch(server, group_id) == (-1, 0), timeout=10,
                   what="the timed-out transaction's abort")
        # every request with the old epoch is fenced, commit and abort alike
        assert _end(sock, tid, pid, epoch, True) == PRODUCER_FENCED
        assert _end(sock, tid, pid, epoch, False) == PRODUCER_FENCED
        assert _end(sock, tid, pid, epoch, True, version=1) == INVALID_PRODUCER_EPOCH
        assert _add(sock, tid, pid, epoch, group_id) == PRODUCER_FENCED
        assert _add(sock, tid, pid, epoch, group_id, version=1) == INVALID_PRODUCER_EPOCH
        assert _txn_commit(sock, tid, pid, epoch, group_id) == INVALID_PRODUCER_EPOCH  # as Kafka
        assert _fetch(server, group_id) == (-1, 0)
        # InitProducerId starts the producer over with a new epoch
        pid2, epoch2 = _init(sock, tid)
        assert (pid2, epoch2) != (pid, epoch)
        _send(sock, tid, pid2, epoch2, group_id)
        assert _end(sock, tid, pid2, epoch2, True) == 0
    assert _fetch(server, group_id) == (17, 0)


def test_the_timeout_fence_survives_a_restart(quick_timeouts, group_id):
    """The epoch bump is in the abort's own record: after the server is killed (-9) and
    started again the old epoch is still fenced, commit and abort alike, as in Kafka."""
    server, tid = quick_timeouts, f"tx-{group_id}"
    with raw_socket(server) as sock:
        pid, epoch = _init(sock, tid, timeout_ms=300)
        _send(sock, tid, pid, epoch, group_id)
    wait_until(lambda: _fetch(server, group_id) == (-1, 0), timeout=10,
               what="the timed-out transaction's abort")
    server.kill9()
    server.start()
    with raw_socket(server) as sock:
        assert _end(sock, tid, pid, epoch, False) == PRODUCER_FENCED
        assert _end(sock, tid, pid, epoch, True) == PRODUCER_FENCED
        assert _add(sock, tid, pid, epoch, group_id) == PRODUCER_FENCED
        assert _txn_commit(sock, tid, pid, epoch, group_id) == INVALID_PRODUCER_EPOCH  # as Kafka
        pid2, epoch2 = _init(sock, tid)
        assert (pid2, epoch2) == (pid, epoch + 2)  # the fence's bump, then InitProducerId's
        _send(sock, tid, pid2, epoch2, group_id)
        assert _end(sock, tid, pid2, epoch2, True) == 0
    assert _fetch(server, group_id) == (17, 0)


def test_init_producer_id_with_the_producers_own_id_and_epoch(server, group_id):
    """KIP-360: InitProducerId v3+ with the producer's id and epoch bumps that epoch; a
    retry of it gets the same answer; a zombie's stale epoch is fenced and changes nothing
    (the current producer goes on)."""
    tid = f"tx-{group_id}"
    with raw_socket(server) as sock:
        pid, epoch = _init(sock, tid)
        assert _init_as(sock, tid, pid, epoch) == (0, pid, epoch + 1)
        assert _init_as(sock, tid, pid, epoch) == (0, pid, epoch + 1)  # the answer was lost
        _send(sock, tid, pid, epoch + 1, group_id)
        assert _end(sock, tid, pid, epoch + 1, True) == 0
        pid2, epoch2 = _init(sock, tid)  # a new instance: the old one is now a zombie
        assert epoch2 == epoch + 2
        assert _init_as(sock, tid, pid, epoch + 1)[0] == PRODUCER_FENCED
        assert _init_as(sock, tid, pid, epoch + 1, version=3)[0] == INVALID_PRODUCER_EPOCH
        assert _init_as(sock, tid, pid + 1000, epoch2)[0] == PRODUCER_FENCED
        _send(sock, tid, pid2, epoch2, group_id)  # not fenced by the zombie
        assert _end(sock, tid, pid2, epoch2, True) == 0
    assert _fetch(server, group_id) == (17, 0)


def test_end_txn_with_no_transaction_open(server, group_id):
    tid = f"tx-{group_id}"
    with raw_socket(server) as sock:
        pid, epoch = _init(sock, tid)
        # Empty: nothing was ever begun
        assert _end(sock, tid, pid, epoch, True) == INVALID_TXN_STATE
        assert _end(sock, tid, pid, epoch, False) == INVALID_TXN_STATE
        _send(sock, tid, pid, epoch, group_id)
        assert _end(sock, tid, pid, epoch, True) == 0
        # CompleteCommit: the same outcome again is a retry; the other one is refused
        assert _end(sock, tid, pid, epoch, True) == 0
        assert _end(sock, tid, pid, epoch, False) == INVALID_TXN_STATE
        _send(sock, tid, pid, epoch, group_id)
        assert _end(sock, tid, pid, epoch, False) == 0
        # CompleteAbort likewise
        assert _end(sock, tid, pid, epoch, False) == 0
        assert _end(sock, tid, pid, epoch, True) == INVALID_TXN_STATE
    assert _fetch(server, group_id) == (17, 0)


def test_confluent_producer_is_fenced_after_its_transaction_timed_out(quick_timeouts,
                                                                      group_id):
    from confluent_kafka import KafkaError, KafkaException, Producer
    from confluent_kafka import TopicPartition as CTP

    from support.wire_clients import ck_consumer

    server = quick_timeouts
    c = ck_consumer(server, group_id)
    p = Producer({"bootstrap.servers": server.bootstrap, "transactional.id": f"tx-{group_id}",
                  "transaction.timeout.ms": 1000})
    try:
        p.init_transactions(20)
        p.begin_transaction()
        p.send_offsets_to_transaction([CTP("orders", 0, 33)], c.consumer_group_metadata(), 20)
        assert _fetch(server, group_id) == (-1, UNSTABLE)
        wait_until(lambda: _fetch(server, group_id) == (-1, 0), timeout=10,
                   what="the timed-out transaction's abort")
        time.sleep(0.1)
        with pytest.raises(KafkaException) as raised:
            p.commit_transaction(20)
        error = raised.value.args[0]
        # librdkafka's reading of PRODUCER_FENCED: this producer instance is done
        assert error.fatal()
        assert error.code() == KafkaError._FENCED
        # a new producer with the same transactional id goes on
        p2 = Producer({"bootstrap.servers": server.bootstrap,
                       "transactional.id": f"tx-{group_id}"})
        p2.init_transactions(20)
        _sends_offset(p2, c, server, group_id, 34)
    finally:
        c.close()


def test_librdkafka_epoch_bump_of_a_zombie_is_fenced(server, group_id):
    """librdkafka bumps its own epoch after an abortable error that asks for it (KIP-360:
    InitProducerId with its producer id and epoch; here a produce that timed out, since the
    server stores no messages). A producer that a newer instance of its transactional id has
    fenced in the meantime must be told PRODUCER_FENCED (fatal), not given the next epoch,
    which would fence the newer instance in turn."""
    from confluent_kafka import KafkaError, KafkaException, Producer

    from support.wire_clients import ck_consumer

    tid = f"tx-{group_id}"
    conf = {"bootstrap.servers": server.bootstrap, "transactional.id": tid,
            "message.timeout.ms": 500}
    c = ck_consumer(server, group_id)
    old, new = Producer(conf), Producer(conf)
    try:
        old.init_transactions(20)
        old.begin_transaction()
        new.init_transactions(20)  # the newer instance: the old one is a zombie now
        old.produce("orders", b"x", partition=0)
        old.flush(10)
        with pytest.raises(KafkaException) as raised:
            old.commit_transaction(20)
        assert raised.value.args[0].txn_requires_abort()
        with pytest.raises(KafkaException) as raised:
            old.abort_transaction(20)  # the epoch bump is refused: fenced, for good
        error = raised.value.args[0]
        assert error.fatal() and error.code() == KafkaError._FENCED
        _sends_offset(new, c, server, group_id, 21)
    finally:
        c.close()


def test_librdkafka_bumps_its_own_epoch_and_goes_on(server, group_id):
    """The same abortable error with no other instance around: the bump is granted (the
    producer keeps its id, epoch + 1) and its next transaction commits."""
    from confluent_kafka import KafkaException, Producer

    from support.wire_clients import ck_consumer

    tid = f"tx-{group_id}"
    c = ck_consumer(server, group_id)
    p = Producer({"bootstrap.servers": server.bootstrap, "transactional.id": tid,
                  "message.timeout.ms": 500})
    try:
        p.init_transactions(20)
        p.begin_transaction()
        p.produce("orders", b"x", partition=0)
        p.flush(10)
        with pytest.raises(KafkaException):
            p.commit_transaction(20)
        p.abort_transaction(20)
        _sends_offset(p, c, server, group_id, 22)
        # a fresh store hands out producer id 0 first: the producer is now (0, epoch 1)
        with raw_socket(server) as sock:
            assert _init_as(sock, tid, 0, 0)[0] == 0  # ... but that is the bump's retry
            assert _init_as(sock, tid, 0, 2)[0] == PRODUCER_FENCED
    finally:
        c.close()


def _sends_offset(producer, consumer, server, group_id, offset):
    """A confluent-kafka transaction that sends ``consumer``'s offset ``offset`` of orders-0
    and commits; the server then fetches it as committed."""
    from confluent_kafka import TopicPartition as CTP

    producer.begin_transaction()
    producer.send_offsets_to_transaction([CTP("orders", 0, offset)],
                                         consumer.consumer_group_metadata(), 20)
    producer.commit_transaction(20)
    assert _fetch(server, group_id) == (offset, 0)
