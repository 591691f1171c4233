"""aiokafka's group membership against the server: two AIOKafkaConsumers with a group_id
join, split the partitions, commit as members (generation and member id checked), and the
group rebalances when a second member joins and when it leaves."""

from __future__ import annotations

import asyncio
import time

from support.wire_clients import HEARTBEAT_MS, SESSION_MS, check_exclusive, described


def _consumer(server, group_id):
    from aiokafka import AIOKafkaConsumer

    return AIOKafkaConsumer("orders", bootstrap_servers=server.bootstrap, group_id=group_id,
                            enable_auto_commit=False, session_timeout_ms=SESSION_MS,
                            heartbeat_interval_ms=HEARTBEAT_MS, max_poll_interval_ms=10_000,
                            request_timeout_ms=15_000)


def _owned(c) -> set:
    return {(tp.topic, tp.partition) for tp in c.assignment()}


async def _poll_until(consumers, until, timeout: float = 30) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        await asyncio.gather(*(c.getmany(timeout_ms=50) for c in consumers))
        if until():
            return
    raise AssertionError("timed out polling")


def test_aiokafka_members_join_commit_and_rebalance(server, group_id):
    from aiokafka.structs import OffsetAndMetadata
    from aiokafka.structs import TopicPartition as ATP

    async def run():
        a = _consumer(server, group_id)
        await a.start()
        b = None
        try:
            await _poll_until([a], lambda: len(_owned(a)) == 4)
            generation_1 = a._coordinator.generation
            await a.commit({ATP("orders", 0): OffsetAndMetadata(11, "a")})
            assert await a.committed(ATP("orders", 0)) == 11

            b = _consumer(server, group_id)
            await b.start()
            await _poll_until([a, b], lambda: _owned(a) and _owned(b)
                              and len(_owned(a) | _owned(b)) == 4)
            check_exclusive([_owned(a), _owned(b)], "orders", 4)
            assert a._coordinator.generation > generation_1  # a rebalance on join
            view = await asyncio.to_thread(described, server, group_id)
            assert view["state"] == "Stable" and len(view["members"]) == 2
            check_exclusive(list(view["members"].values()), "orders", 4)

            # each commits a partition it owns, as a member of the current generation
            tp_b = ATP(*sorted(_owned(b))[0])
            await b.commit({tp_b: OffsetAndMetadata(22, "b")})
            assert await a.committed(tp_b) == 22

            generation_2 = a._coordinator.generation
            await b.stop()  # LeaveGroup: a rebalance on leave gives a every partition
            b = None
            await _poll_until([a], lambda: len(_owned(a)) == 4)
            assert a._coordinator.generation > generation_2
            tp_a = ATP("orders", 3)
            await a.commit({tp_a: OffsetAndMetadata(33, "")})
            assert await a.committed(tp_a) == 33
        finally:
            if b is not None:
                await b.stop()
            await a.stop()

    asyncio.run(run())


def test_aiokafka_transactional_offsets_commit_and_abort(server, group_id):
    """aiokafka's own transaction code (InitProducerId, AddOffsetsToTxn, TxnOffsetCommit,
    EndTxn): offsets pending while the transaction is open (UNSTABLE_OFFSET_COMMIT to a
    require_stable fetch), committed by the transaction's commit, dropped by its abort."""
    from aiokafka import AIOKafkaProducer
    from aiokafka.structs import OffsetAndMetadata as AOM
    from aiokafka.structs import TopicPartition as ATP

    from support.wire_txn import stable_fetch

    async def run():
        producer = AIOKafkaProducer(bootstrap_servers=server.bootstrap,
                                    transactional_id=f"tx-{group_id}")
        await producer.start()
        try:
            seen = []
            async with producer.transaction():
                await producer.send_offsets_to_transaction({ATP("orders", 0): AOM(21, "")},
                                                           group_id)
                seen.append(stable_fetch(server, group_id))
            seen.append(stable_fetch(server, group_id))
            try:
                async with producer.transaction():
                    await producer.send_offsets_to_transaction(
                        {ATP("orders", 0): AOM(31, "")}, group_id)
                    seen.append(stable_fetch(server, group_id))
                    raise RuntimeError("abort")
            except RuntimeError:
                pass
            seen.append(stable_fetch(server, group_id))
            return seen
        finally:
            await producer.stop()

    # an unstable partition's offset is -1, as Kafka answers it, whatever was committed before
    assert asyncio.run(run()) == [(-1, 88), (21, 0), (-1, 88), (21, 0)]
