"""One group member of a Python Kafka client as a child process of tests/clients/ (the
protocol of support.client_runners.MemberProcess): a JSON line whenever its generation,
member id or assignment changes; stdin commands "commit P OFFSET", "committed", "close".

    python pymember.py kafka-python|confluent|aiokafka BOOTSTRAP GROUP TOPIC STRATEGY \\
        CLIENT_ID INSTANCE_ID|- SESSION_MS

librdkafka (confluent-kafka) does not tell its generation: its events carry none.
"""

from __future__ import annotations

import json
import queue
import sys
import threading

HEARTBEAT_MS = 300


def emit(**event) -> None:
    print(json.dumps(event), flush=True)


def read_commands() -> queue.Queue:
    commands: queue.Queue = queue.Queue()

    def read():
        for line in sys.stdin:
            commands.put(line.strip())
        commands.put("close")

    threading.Thread(target=read, daemon=True).start()
    return commands


class Changes:
    """Emits an "assigned" event when (generation, member id, partitions) changes."""

    def __init__(self) -> None:
        self.last = None

    def __call__(self, generation, member_id, partitions) -> None:
        key = (generation, member_id, sorted(partitions))
        if member_id and key != self.last:
            self.last = key
            emit(event="assigned", generation=generation, memberId=member_id,
                 partitions=sorted(partitions))


def kafka_python(bootstrap, group, topic, strategy, client_id, instance_id, session_ms):
    from kafka import KafkaConsumer, TopicPartition
    from kafka.coordinator.assignors.cooperative_sticky import CooperativeStickyAssignor
    from kafka.coordinator.assignors.range import RangePartitionAssignor
    from kafka.coordinator.assignors.roundrobin import RoundRobinPartitionAssignor
    from kafka.structs import MemberState, OffsetAndMetadata

    assignors = {"range": RangePartitionAssignor, "roundrobin": RoundRobinPartitionAssignor,
                 "cooperative-sticky": CooperativeStickyAssignor}
    kw = {"group_instance_id": instance_id} if instance_id else {}
    consumer = KafkaConsumer(topic, bootstrap_servers=bootstrap, group_id=group,
                             client_id=client_id, enable_auto_commit=False,
                             partition_assignment_strategy=[assignors[strategy]],
                             session_timeout_ms=session_ms, heartbeat_interval_ms=HEARTBEAT_MS,
                             max_poll_interval_ms=30_000, metadata_max_age_ms=1000,
                             request_timeout_ms=15_000, **kw)
    consumer.topics()
    changed, commands = Changes(), read_commands()
    while True:
        consumer.poll(timeout_ms=50)
        meta = consumer.group_metadata()
        if consumer._coordinator.state == MemberState.STABLE:
            changed(meta.generation_id, meta.member_id,
                    [tp.partition for tp in consumer.assignment()])
        while not commands.empty():
            w = commands.get().split()
            if w[0] == "close":
                consumer.close()
                emit(event="closed")
                return
            if w[0] == "commit":
                try:
                    consumer.commit({TopicPartition(topic, int(w[1])):
                                     OffsetAndMetadata(int(w[2]), "", -1)})
                    emit(event="committed", error=None)
                except Exception as e:  # noqa: BLE001 - reported to the test
                    emit(event="committed", error=type(e).__name__)
            elif w[0] == "committed":
                emit(event="offsets", offsets={
                    str(tp.partition): consumer.committed(tp)
                    for tp in sorted(consumer.assignment())})


def confluent(bootstrap, group, topic, strategy, client_id, instance_id, session_ms):
    from confluent_kafka import Consumer, KafkaException, TopicPartition

    conf = {"bootstrap.servers": bootstrap, "group.id": group, "client.id": client_id,
            "enable.auto.commit": False, "session.timeout.ms": session_ms,
            "heartbeat.interval.ms": HEARTBEAT_MS, "topic.metadata.refresh.interval.ms": 1000,
            "partition.assignment.strategy": strategy}
    if instance_id:
        conf["group.instance.id"] = instance_id
    consumer = Consumer(conf)
    owned: set[int] = set()
    rebalances = [0]

    def on_assign(c, partitions):
        owned.update(tp.partition for tp in partitions)
        rebalances[0] += 1
        if strategy == "cooperative-sticky":
            c.incremental_assign(partitions)
        else:
            owned.clear()
            owned.update(tp.partition for tp in partitions)
            c.assign(partitions)

    def on_revoke(c, partitions):
        owned.difference_update(tp.partition for tp in partitions)
        if strategy == "cooperative-sticky":
            c.incremental_unassign(partitions)
        else:
            c.unassign()

    consumer.subscribe([topic], on_assign=on_assign, on_revoke=on_revoke, on_lost=on_revoke)
    commands = read_commands()
    last = None
    while True:
        consumer.poll(0.05)
        key = (rebalances[0], consumer.memberid(), sorted(owned))
        if rebalances[0] and key != last:
            last = key
            emit(event="assigned", generation=None, memberId=consumer.memberid(),
                 partitions=sorted(owned), rebalances=rebalances[0])
        while not commands.empty():
            w = commands.get().split()
            if w[0] == "close":
                consumer.close()
                emit(event="closed")
                return
            if w[0] == "commit":
                try:
                    consumer.commit(offsets=[TopicPartition(topic, int(w[1]), int(w[2]))],
                                    asynchronous=False)
                    emit(event="committed", error=None)
                except KafkaException as e:
                    emit(event="committed", error=e.args[0].name())
            elif w[0] == "committed":
                got = consumer.committed([TopicPartition(topic, p) for p in sorted(owned)],
                                         timeout=15)
                emit(event="offsets", offsets={str(tp.partition): tp.offset if tp.offset >= 0
                                               else None for tp in got})


def aiokafka(bootstrap, group, topic, strategy, client_id, instance_id, session_ms):
    import asyncio

    from aiokafka import AIOKafkaConsumer, TopicPartition
    from aiokafka.coordinator.assignors.range import RangePartitionAssignor
    from aiokafka.coordinator.assignors.roundrobin import RoundRobinPartitionAssignor
    from aiokafka.structs import OffsetAndMetadata

    assignors = {"range": RangePartitionAssignor, "roundrobin": RoundRobinPartitionAssignor}

    async def run():
        commands = read_commands()
        consumer = AIOKafkaConsumer(
            topic, bootstrap_servers=bootstrap, group_id=group, client_id=client_id,
            group_instance_id=instance_id, enable_auto_commit=False,
            partition_assignment_strategy=[assignors[strategy]], session_timeout_ms=session_ms,
            heartbeat_interval_ms=HEARTBEAT_MS, metadata_max_age_ms=1000,
            request_timeout_ms=15_000)
        await consumer.start()
        changed = Changes()
        try:
            while True:
                await consumer.getmany(timeout_ms=50)
                coordinator = consumer._coordinator
                if coordinator.generation > 0:
                    changed(coordinator.generation, coordinator.member_id,
                            [tp.partition for tp in consumer.assignment()])
                while not commands.empty():
                    w = commands.get().split()
                    if w[0] == "close":
                        return
                    if w[0] == "commit":
                        try:
                            await consumer.commit({TopicPartition(topic, int(w[1])):
                                                   OffsetAndMetadata(int(w[2]), "")})
                            emit(event="committed", error=None)
                        except Exception as e:  # noqa: BLE001 - reported to the test
                            emit(event="committed", error=type(e).__name__)
                    elif w[0] == "committed":
                        emit(event="offsets", offsets={
                            str(tp.partition): await consumer.committed(tp)
                            for tp in sorted(consumer.assignment())})
        finally:
            await consumer.stop()
            emit(event="closed")

    asyncio.run(run())


if __name__ == "__main__":
    client, bootstrap, group, topic, strategy, client_id, instance_id, session_ms = sys.argv[1:]
    {"kafka-python": kafka_python, "confluent": confluent, "aiokafka": aiokafka}[client](
        bootstrap, group, topic, strategy, client_id, None if instance_id == "-" else instance_id,
        int(session_ms))
