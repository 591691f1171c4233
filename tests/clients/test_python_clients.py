"""The Python clients as judges in the same sessions as the others, against offsetlog and
against Kafka: kafka-python 3, confluent-kafka (librdkafka) and aiokafka, each a member in a
child process (tests/clients/pymember.py). Their older tests (tests/server/) judge offsetlog
alone; here each outcome must also equal Kafka's.

librdkafka does not tell its generation, so its sessions compare assignments, not
generations; aiokafka has no cooperative assignor. kafka-python sometimes rebalances once
more than the others (docs/PROTOCOL.md, "What the clients showed us"), on either target, so
its generations are left out of the comparison.
"""

from __future__ import annotations

import sys
import time
import uuid
from pathlib import Path

import pytest

from support.client_runners import MemberProcess
from support.client_sessions import cooperative_session, group_session, on_targets, same
from support.wire_clients import kp_consumer

SCRIPT = Path(__file__).parent / "pymember.py"


class PythonMembers:
    def __init__(self, client: str) -> None:
        self.client = client

    def member(self, bootstrap, group, topic, strategy, client_id, instance_id, session_ms):
        return MemberProcess([sys.executable, "-u", str(SCRIPT), self.client, bootstrap, group,
                              topic, strategy, client_id, instance_id or "-", str(session_ms)],
                             f"{self.client} {client_id}")


#: where the assignor puts a static member (the Java client's and kafka-python's range
#: order static members by instance id before dynamic ones; librdkafka's and aiokafka's
#: by member id)
STATIC_FIRST = {"kafka-python": True, "confluent": False, "aiokafka": False}


def without_generations(value):
    if isinstance(value, dict):
        return {k: without_generations(v) for k, v in value.items() if k != "generation"}
    return value


@pytest.mark.parametrize("client", ["kafka-python", "confluent", "aiokafka"])
def test_python_client_group_session(client, targets, gid):
    results = on_targets(targets, lambda t: group_session(PythonMembers(client), t, gid,
                                                          "orders", 4))
    for name, r in results.items():
        assert r["formed"]["assignment"] == {"a": [0, 1, 2, 3]}, name
        assert r["formed"]["described"] == {"state": "Stable", "protocol": "range"}, name
        assert r["joined"]["assignment"] == {"a": [0, 1], "b": [2, 3]}, name
        assert r["left"]["assignment"] == {"a": [0, 1, 2, 3]}, name
        assert r["joined_again"]["assignment"] == {"a": [0, 1], "c": [2, 3]}, name
        assert r["heartbeat_missed"]["assignment"] == {"a": [0, 1, 2, 3]}, name
        static = r["static_joined"]["assignment"]
        assert sorted(static["a"] + static["s"]) == [0, 1, 2, 3] and len(static["s"]) == 2
        rejoined = r["static_rejoined"]
        assert rejoined["partitions"] == static["s"], name
        assert rejoined["generation"] == r["static_joined"]["generation"], name
        assert not rejoined["others_rebalanced"] and rejoined["described_members"] == 2, name
        assert r["commit"]["error"] is None, name
        assert r["fetched"] == {static["a"][0]: 42, static["a"][1]: None}, name
    for r in results.values():
        r.pop("after_close")  # when the static member's session ends is timing
    same(results if client != "kafka-python" else without_generations(results),
         f"{client} group session")


@pytest.mark.parametrize("client", ["kafka-python", "confluent"])
def test_python_client_cooperative_sticky(client, targets, gid):
    results = on_targets(targets, lambda t: cooperative_session(PythonMembers(client), t, gid,
                                                                "wide", 6))
    for name, r in results.items():
        assert r["alone"] == [0, 1, 2, 3, 4, 5], name
        assert len(r["joined"]["a"]) == len(r["joined"]["b"]) == 3, name
        assert r["a_kept_throughout"] == r["joined"]["a"], name
        assert r["joined"]["generation"] in (2, None) or (
            client == "kafka-python" and r["joined"]["generation"] > 2), name
        assert r["protocol"] == "cooperative-sticky", name
        assert r["left"]["a"] == [0, 1, 2, 3, 4, 5], name
    # Which half the first member keeps is its assignor's choice over the members' ids, which
    # are random on both targets: the halves are compared by size (each checked above)
    halves = {name: {**r, "joined": {k: (len(v) if k in ("a", "b") else v)
                                     for k, v in r["joined"].items()},
                     "a_kept_throughout": len(r["a_kept_throughout"])}
              for name, r in results.items()}
    same(halves if client != "kafka-python" else without_generations(halves),
         f"{client} cooperative-sticky session")


def transactional_session(library: str, target, group: str, txid: str) -> dict:
    """A transactional producer's send_offsets_to_transaction: pending (require_stable
    fetches are UNSTABLE_OFFSET_COMMIT), committed, aborted, then fenced by a newer producer
    of the same transactional id. Fetched with OffsetFetch v7 require_stable; after an end,
    again while UNSTABLE_OFFSET_COMMIT (Kafka writes its markers after answering EndTxn)."""
    from support.wire_txn import stable_fetch

    def settled():
        deadline = time.monotonic() + 10
        while True:
            got = stable_fetch(target, group)
            if got[1] != 88 or time.monotonic() > deadline:
                return list(got)
            time.sleep(0.05)

    steps: dict = {}
    if library == "aiokafka":
        return _aiokafka_transactions(target, group, txid, stable_fetch, settled)
    if library == "confluent":
        from confluent_kafka import Consumer, KafkaException, Producer
        from confluent_kafka import TopicPartition as CTP

        consumer = Consumer({"bootstrap.servers": target.bootstrap, "group.id": group})
        meta = consumer.consumer_group_metadata()

        def producer():
            p = Producer({"bootstrap.servers": target.bootstrap, "transactional.id": txid})
            p.init_transactions(20)
            return p

        def send(p, offset):
            p.send_offsets_to_transaction([CTP("orders", 0, offset)], meta, 20)

        def error(e):
            return e.args[0].name() if isinstance(e, KafkaException) else type(e).__name__
        commit, abort = (lambda p: p.commit_transaction(20)), (lambda p: p.abort_transaction(20))
        close = consumer.close
    else:
        from kafka import KafkaProducer
        from kafka.structs import OffsetAndMetadata, TopicPartition

        def producer():
            p = KafkaProducer(bootstrap_servers=target.bootstrap, transactional_id=txid)
            p.init_transactions()
            return p

        def send(p, offset):
            p.send_offsets_to_transaction({TopicPartition("orders", 0):
                                           OffsetAndMetadata(offset, "", -1)}, group)

        def error(e):
            return type(e).__name__
        commit, abort = (lambda p: p.commit_transaction()), (lambda p: p.abort_transaction())
        close = None
    first = producer()
    try:
        first.begin_transaction()
        send(first, 55)
        steps["pending"] = list(stable_fetch(target, group))
        commit(first)
        steps["committed"] = settled()
        first.begin_transaction()
        send(first, 66)
        steps["pending_again"] = list(stable_fetch(target, group))
        abort(first)
        steps["aborted"] = settled()
        first.begin_transaction()
        send(first, 77)
        second = producer()  # fences the first, aborts its transaction
        try:
            commit(first)
            steps["fenced_commit"] = "ok"
        except Exception as e:  # noqa: BLE001 - the error is the outcome
            steps["fenced_commit"] = error(e)
        steps["after_fencing"] = settled()
        second.begin_transaction()
        send(second, 88)
        commit(second)
        steps["newer_committed"] = settled()
        if library == "kafka-python":
            second.close(timeout=5)
    finally:
        if library == "kafka-python":
            first.close(timeout=5)
        if close is not None:
            close()
    return steps


def _aiokafka_transactions(target, group, txid, stable_fetch, settled) -> dict:
    """``transactional_session`` with aiokafka's AIOKafkaProducer."""
    import asyncio

    from aiokafka import AIOKafkaProducer
    from aiokafka.structs import OffsetAndMetadata, TopicPartition

    offsets = lambda offset: {TopicPartition("orders", 0): OffsetAndMetadata(offset, "")}  # noqa: E731

    async def run() -> dict:
        steps: dict = {}
        first = AIOKafkaProducer(bootstrap_servers=target.bootstrap, transactional_id=txid)
        await first.start()
        second = None
        try:
            async with first.transaction():
                await first.send_offsets_to_transaction(offsets(55), group)
                steps["pending"] = list(stable_fetch(target, group))
            steps["committed"] = settled()
            await first.begin_transaction()
            await first.send_offsets_to_transaction(offsets(66), group)
            steps["pending_again"] = list(stable_fetch(target, group))
            await first.abort_transaction()
            steps["aborted"] = settled()
            await first.begin_transaction()
            await first.send_offsets_to_transaction(offsets(77), group)
            second = AIOKafkaProducer(bootstrap_servers=target.bootstrap, transactional_id=txid)
            await second.start()  # fences the first, aborts its transaction
            try:
                await first.commit_transaction()
                steps["fenced_commit"] = "ok"
            except Exception as e:  # noqa: BLE001 - the error is the outcome
                steps["fenced_commit"] = type(e).__name__
            steps["after_fencing"] = settled()
            async with second.transaction():
                await second.send_offsets_to_transaction(offsets(88), group)
            steps["newer_committed"] = settled()
        finally:
            await first.stop()
            if second is not None:
                await second.stop()
        return steps

    return asyncio.run(run())


@pytest.mark.parametrize("library", ["confluent", "kafka-python", "aiokafka"])
def test_python_transactional_producer(library, targets, gid):
    txid = f"tx-{uuid.uuid4().hex[:10]}"
    results = on_targets(targets, lambda t: transactional_session(library, t, gid, txid))
    fenced = {"confluent": "_FENCED", "kafka-python": "ProducerFencedError",
              "aiokafka": "ProducerFenced"}[library]
    for name, r in results.items():
        assert r["pending"] == [-1, 88], name  # UNSTABLE_OFFSET_COMMIT
        assert r["committed"] == [55, 0], name
        assert r["pending_again"] == [-1, 88], name
        assert r["aborted"] == [55, 0], name
        assert r["fenced_commit"] == fenced, name
        assert r["after_fencing"] == [55, 0], name
        assert r["newer_committed"] == [88, 0], name
    same(results, f"{library} transactional producer")


def confluent_admin_session(target, group: str) -> dict:
    """librdkafka's AdminClient on one group (confluent-kafka has no OffsetDelete): alter,
    list and describe with and without a member, delete, each step's result or error name."""
    from confluent_kafka import ConsumerGroupTopicPartitions, KafkaException, TopicPartition
    from confluent_kafka.admin import AdminClient

    from support.wire_clients import ck_consumer

    admin = AdminClient({"bootstrap.servers": target.bootstrap})
    steps: dict = {}

    def step(name, fn):
        try:
            steps[name] = fn()
        except KafkaException as e:
            steps[name] = {"error": e.args[0].name()}

    def offsets():
        (got,) = admin.list_consumer_group_offsets(
            [ConsumerGroupTopicPartitions(group)], require_stable=True).values()
        return {f"{tp.topic}:{tp.partition}": [tp.offset, tp.metadata]
                for tp in got.result(20).topic_partitions if tp.offset >= 0}

    def describe():
        (got,) = admin.describe_consumer_groups([group]).values()
        d = got.result(20)
        return {"state": d.state.name, "simple": d.is_simple_consumer_group,
                "assignor": d.partition_assignor,
                "members": sorted([m.client_id, sorted(tp.partition for tp in
                                                       m.assignment.topic_partitions)]
                                  for m in d.members)}

    def listed():
        for g in admin.list_consumer_groups().result(20).valid:
            if g.group_id == group:
                return {"state": g.state.name, "simple": g.is_simple_consumer_group}
        return "absent"

    def alter(parts):
        (got,) = admin.alter_consumer_group_offsets([ConsumerGroupTopicPartitions(
            group, [TopicPartition("orders", p, o) for p, o in parts.items()])]).values()
        return {str(tp.partition): tp.error.name() if tp.error else None
                for tp in got.result(20).topic_partitions}

    def delete():
        (got,) = admin.delete_consumer_groups([group]).values()
        got.result(20)
        return "ok"

    step("describe_unknown", describe)
    step("alter_empty", lambda: alter({0: 10, 1: 11}))
    step("offsets_1", offsets)
    step("listed_offsets_only", listed)
    step("describe_offsets_only", describe)
    consumer = ck_consumer(target, group, **{"client.id": "admin-member",
                                             "partition.assignment.strategy": "range"})
    try:
        consumer.subscribe(["orders"])
        deadline = time.monotonic() + 30
        while not consumer.assignment() and time.monotonic() < deadline:
            consumer.poll(0.1)
        step("describe_stable", describe)
        step("listed_stable", listed)
        step("delete_group_nonempty", delete)
        step("alter_with_member", lambda: alter({0: 99}))
        step("offsets_2", offsets)
    finally:
        consumer.close()
    step("describe_after_leave", describe)
    step("delete_group", delete)
    step("listed_deleted", listed)
    step("offsets_deleted", offsets)
    step("delete_group_again", delete)
    return steps


def test_confluent_admin_calls(targets, gid):
    results = on_targets(targets, lambda t: confluent_admin_session(t, gid))
    for name, r in results.items():
        assert r["alter_empty"] == {"0": None, "1": None}, name
        assert r["offsets_1"] == {"orders:0": [10, None], "orders:1": [11, None]}, name
        assert r["describe_stable"]["state"] == "STABLE", name
        assert r["describe_stable"]["members"] == [["admin-member", [0, 1, 2, 3]]], name
        assert r["delete_group_nonempty"] == {"error": "NON_EMPTY_GROUP"}, name
        assert r["alter_with_member"] == {"0": "UNKNOWN_MEMBER_ID"}, name
        assert r["offsets_2"] == r["offsets_1"], name
        assert r["describe_after_leave"]["state"] == "EMPTY", name
        assert r["delete_group"] == "ok" and r["offsets_deleted"] == {}, name
        assert r["listed_deleted"] == "absent", name
        assert r["delete_group_again"] == {"error": "GROUP_ID_NOT_FOUND"}, name
    same(results, "librdkafka admin calls")


def _plain(value):
    """A kafka-python admin result as plain data: errors by class name, tuples as lists."""
    if isinstance(value, dict):
        return {str(_plain(k)): _plain(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)) and not hasattr(value, "_fields"):
        return [_plain(v) for v in value]
    if hasattr(value, "_fields"):  # namedtuples: TopicPartition, OffsetAndMetadata, ...
        return {f: _plain(getattr(value, f)) for f in value._fields}
    if isinstance(value, type) or isinstance(value, Exception):
        return type(value).__name__ if isinstance(value, Exception) else value.__name__
    if isinstance(value, (str, int, float, bool)) or value is None:
        return value
    return type(value).__name__


def kafka_python_admin_session(target, group: str) -> dict:
    """kafka-python's KafkaAdminClient on one group, the Java admin's steps."""
    from kafka import KafkaAdminClient
    from kafka.structs import OffsetAndMetadata, TopicPartition

    admin = KafkaAdminClient(bootstrap_servers=target.bootstrap, request_timeout_ms=15_000)
    steps: dict = {}

    def step(name, fn):
        try:
            steps[name] = _plain(fn())
        except Exception as e:  # noqa: BLE001 - the error is the outcome
            steps[name] = {"error": type(e).__name__}

    def listed():
        return [g for g in _plain(admin.list_groups()) if group in str(g)]

    def described():
        d = admin.describe_groups([group])
        d = _plain(d[group] if isinstance(d, dict) else d[0])
        return {"state": d.get("group_state"), "protocol": d.get("protocol_data"),
                "members": sorted(m.get("client_id") for m in d.get("members") or [])}

    tp = [TopicPartition("orders", p) for p in range(4)]
    try:
        step("describe_unknown", described)
        step("alter_empty", lambda: admin.alter_group_offsets(group, {
            tp[0]: OffsetAndMetadata(10, "a", -1), tp[1]: OffsetAndMetadata(11, "", -1)}))
        step("offsets_1", lambda: admin.list_group_offsets({group: None}))
        step("listed_offsets_only", listed)
        consumer = kp_consumer(target, group, topics=("orders",), strategy="range",
                               client_id="admin-member")
        try:
            deadline = time.monotonic() + 30
            while len(consumer.assignment()) < 4 and time.monotonic() < deadline:
                consumer.poll(timeout_ms=100)
            step("describe_stable", described)
            step("delete_offsets_subscribed", lambda: admin.delete_group_offsets(group, [tp[0]]))
            step("delete_group_nonempty", lambda: admin.delete_groups([group]))
            step("alter_with_member", lambda: admin.alter_group_offsets(group, {
                tp[0]: OffsetAndMetadata(99, "", -1)}))
            consumer.poll(timeout_ms=10)
        finally:
            consumer.close()
        step("delete_offsets_empty", lambda: admin.delete_group_offsets(group, [tp[0]]))
        step("offsets_3", lambda: admin.list_group_offsets({group: None}))
        step("delete_group", lambda: admin.delete_groups([group]))
        step("listed_deleted", listed)
        step("delete_group_again", lambda: admin.delete_groups([group]))
    finally:
        admin.close()
    return steps


def test_kafka_python_admin_calls(targets, gid):
    results = on_targets(targets, lambda t: kafka_python_admin_session(t, gid))
    p0 = str({"topic": "orders", "partition": 0})
    for name, r in results.items():
        assert r["offsets_1"][gid][p0] == {"offset": 10, "metadata": "a", "leader_epoch": -1}
        assert r["listed_offsets_only"] == [{"group_id": gid, "protocol_type": "",
                                             "group_state": "Empty", "group_type": "classic"}]
        assert r["describe_stable"] == {"state": "Stable", "protocol": "range",
                                        "members": ["admin-member"]}, name
        assert r["delete_offsets_subscribed"] == {p0: "GroupSubscribedToTopicError"}, name
        assert r["delete_group_nonempty"] == {gid: "NonEmptyGroupError"}, name
        assert r["alter_with_member"] == {p0: "UnknownMemberIdError"}, name
        assert r["delete_offsets_empty"] == {p0: "NoError"}, name
        assert p0 not in r["offsets_3"][gid], name
        assert r["delete_group"] == {gid: "OK"} and r["listed_deleted"] == [], name
        assert r["delete_group_again"] == {gid: "GroupIdNotFoundError"}, name
    same(results, "kafka-python admin calls")
