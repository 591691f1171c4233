"""A transactional producer's requests on a raw socket (kio encodes them), and the
require_stable fetch that shows what they left: for the wire tests of transactions."""

from __future__ import annotations

from support.wire_raw import call
from support.wire_server import raw_socket

#: the offset every transaction of these tests commits: orders-0 at 17
PARTS = [dict(partition_index=0, committed_offset=17, committed_leader_epoch=-1,
              committed_metadata="")]


def init_producer(sock, tid, timeout_ms=60_000):
    """InitProducerId v4: ``(producer id, epoch)``."""
    error, pid, epoch = init_producer_as(sock, tid, -1, -1, timeout_ms=timeout_ms)
    assert error == 0
    return pid, epoch


def init_producer_as(sock, tid, pid, epoch, *, timeout_ms=60_000, version=4):
    """InitProducerId (v3+) of a producer that gives its own id and epoch (KIP-360):
    ``(error code, producer id, epoch)``."""
    r = call(sock, 22, version, transactional_id=tid, transaction_timeout=timeout_ms,
             producer_id=pid, producer_epoch=epoch)
    return int(r.error_code), r.producer_id, r.producer_epoch


def add_offsets(sock, tid, pid, epoch, group_id, version=3) -> int:
    """AddOffsetsToTxn: its error code."""
    return int(call(sock, 25, version, transactional_id=tid, producer_id=pid,
                    producer_epoch=epoch, group_id=group_id).error_code)


def txn_commit(sock, tid, pid, epoch, group_id) -> int:
    """TxnOffsetCommit v3 of ``PARTS`` with no member (a producer whose consumer never
    joined): the partition's error code."""
    r = call(sock, 28, 3, transactional_id=tid, group_id=group_id, producer_id=pid,
             producer_epoch=epoch, generation_id=-1, member_id="", group_instance_id=None,
             topics=[dict(name="orders", partitions=PARTS)])
    return int(r.topics[0].partitions[0].error_code)


def send_offsets(sock, tid, pid, epoch, group_id) -> None:
    """AddOffsetsToTxn then TxnOffsetCommit of ``PARTS`` (what a producer's
    ``send_offsets_to_transaction`` sends), both answered without error."""
    assert add_offsets(sock, tid, pid, epoch, group_id) == 0
    assert txn_commit(sock, tid, pid, epoch, group_id) == 0


def end_txn(sock, tid, pid, epoch, committed, version=3) -> int:
    """EndTxn: its error code."""
    return int(call(sock, 26, version, transactional_id=tid, producer_id=pid,
                    producer_epoch=epoch, committed=committed).error_code)


def stable_fetch(server, group_id):
    """``(offset, error code)`` of orders-0 from OffsetFetch v7 with require_stable; the
    group-level error is always 0 (UNSTABLE_OFFSET_COMMIT goes at partition level, where
    librdkafka's read_committed consumer retries on it)."""
    with raw_socket(server) as sock:
        r = call(sock, 9, 7, group_id=group_id,
                 topics=[dict(name="orders", partition_indexes=[0])], require_stable=True)
    assert int(r.error_code) == 0
    p = r.topics[0].partitions[0]
    return p.committed_offset, int(p.error_code)
