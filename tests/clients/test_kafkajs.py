"""kafkajs 2.x (Node.js) as a judge, against offsetlog and against Kafka: a consumer joins a
group, commits offsets as its member and fetches them back with the admin client; two
consumers rebalance on join and leave; a member session (join, leave, a missed heartbeat,
commits; kafkajs has no static membership and no cooperative assignor); transactional
offsets, and the admin's setOffsets and resetOffsets.

kafkajs is installed on first use with npm into tests/server/.kafkajs/ (git-ignored) and
reused after. Without node or npm, or when the install fails, the tests skip with the reason
except under CI=true, where they fail.
"""

from __future__ import annotations

import uuid
from pathlib import Path

import pytest

from support.client_runners import MemberProcess, kafkajs_env, kafkajs_node, run_json
from support.client_sessions import group_session, on_targets, same
from support.wire_clients import described, kp_consumer

SCRIPTS = Path(__file__).parent / "kafkajs"


@pytest.fixture(scope="session")
def node() -> str:
    return kafkajs_node()


def script(node, name, *args) -> dict:
    return run_json([node, str(SCRIPTS / name), *map(str, args)], env=kafkajs_env())


class KafkajsMembers:
    def __init__(self, node: str) -> None:
        self.node = node

    def member(self, bootstrap, group, topic, strategy, client_id, instance_id, session_ms):
        assert instance_id is None and strategy == "roundrobin"
        return MemberProcess([self.node, str(SCRIPTS / "member.js"), bootstrap, group, topic,
                              strategy, client_id, "-", str(session_ms)],
                             f"kafkajs {client_id}", env=kafkajs_env())


def test_kafkajs_joins_commits_and_fetches(node, targets, gid):
    results = on_targets(targets, lambda t: script(node, "group.js", t.bootstrap, gid, "orders"))
    from kafka import TopicPartition as KTP

    for name, out in results.items():
        # kafkajs saw itself join (alone: it leads) and got every partition
        assert out["memberId"] and out["leaderId"] == out["memberId"], name
        assert out["protocol"] == "RoundRobinAssigner", name
        assert sorted(out["assignment"]["orders"]) == [0, 1, 2, 3], name
        assert out["described"] == "Stable", name
        fetched = {int(p["partition"]): int(p["offset"]) for t in out["fetched"]
                   for p in t["partitions"]}
        assert fetched == {0: 42, 1: 7, 2: -1, 3: -1}, name
        # what another client library reads
        c = kp_consumer(targets[name], gid)
        try:
            assert c.committed(KTP("orders", 0)) == 42 and c.committed(KTP("orders", 1)) == 7
        finally:
            c.close()
        # it left the group on disconnect
        assert described(targets[name], gid)["state"] == "Empty", name
    for out in results.values():
        out["memberId"] = out["leaderId"] = "<generated>"
    same(results, "kafkajs join, commit and fetch")


def test_kafkajs_transactions_and_offset_admin(node, targets, gid):
    """kafkajs's sendOffsets in a committed and an aborted transaction, then the admin's
    setOffsets and resetOffsets, which commit through a member of their own: resetOffsets
    commits -2 (kafkajs's marker for "earliest", which its consumers resolve), and Kafka
    stores a negative offset as it stores any other."""
    txid = f"tx-{uuid.uuid4().hex[:10]}"
    results = on_targets(targets, lambda t: script(node, "admin_txn.js", t.bootstrap, gid,
                                                   "orders", txid))
    for name, out in results.items():
        steps = {k: {int(p): o for p, o in v.items()} for k, v in out.items()}
        assert steps["committed"] == {0: 55, 1: -1, 2: -1, 3: -1}, name
        assert steps["aborted"] == steps["committed"], name
        assert steps["set"] == {0: 55, 1: -1, 2: 9, 3: -1}, name
        assert steps["reset"] == {0: -2, 1: -2, 2: -2, 3: -2}, name
        assert described(targets[name], gid)["state"] == "Empty", name
    same(results, "kafkajs transactions and offset admin")


def test_kafkajs_group_rebalances_on_join_and_leave(node, targets, gid):
    results = on_targets(targets, lambda t: script(node, "rebalance.js", t.bootstrap, gid,
                                                   "orders"))
    for name, steps in results.items():
        assert sorted(steps["alone"]["a"]["partitions"]) == [0, 1, 2, 3], name
        both = steps["both"]
        # a join: each partition owned by exactly one of the two, and the first still leads
        assert sorted(both["a"]["partitions"] + both["b"]["partitions"]) == [0, 1, 2, 3]
        assert both["a"]["partitions"] and both["b"]["partitions"], name
        assert both["a"]["leader"] and not both["b"]["leader"], name
        # a leave: everything back to the one left
        assert sorted(steps["after"]["a"]["partitions"]) == [0, 1, 2, 3], name
        assert described(targets[name], gid)["state"] == "Empty", name


def test_kafkajs_member_session(node, targets, gid):
    results = on_targets(targets, lambda t: group_session(KafkajsMembers(node), t, gid,
                                                          "orders", 4, strategy="roundrobin",
                                                          static=False))
    for name, r in results.items():
        assert r["formed"]["assignment"] == {"a": [0, 1, 2, 3]}, name
        assert r["formed"]["described"] == {"state": "Stable",
                                            "protocol": "RoundRobinAssigner"}, name
        # round robin over members sorted by id: m1-a-... before m2-b-...
        assert r["joined"]["assignment"] == {"a": [0, 2], "b": [1, 3]}, name
        assert r["left"]["assignment"] == {"a": [0, 1, 2, 3]}, name
        assert r["joined_again"]["assignment"] == {"a": [0, 2], "c": [1, 3]}, name
        assert r["heartbeat_missed"]["assignment"] == {"a": [0, 1, 2, 3]}, name
        assert r["commit"]["error"] is None, name
        assert r["fetched"] == {0: 42, 1: None, 2: None, 3: None}, name
        assert r["after_close"] == "Empty", name
    same(results, "kafkajs member session")


def test_kafkajs_commits_its_default_offset_when_out_of_range(node, targets, gid):
    """A difference that comes from storing no messages, pinned: kafkajs fetches from the
    offset it committed (42 and 7); Kafka's partitions are empty, so Kafka answers
    OFFSET_OUT_OF_RANGE and kafkajs commits its default offset (-2, "earliest") over it.
    offsetlog's Fetch never answers OFFSET_OUT_OF_RANGE (its high watermark is the fetch
    offset: docs/PROTOCOL.md), so what kafkajs committed stays."""
    results = on_targets(targets, lambda t: script(node, "group.js", t.bootstrap, gid, "orders",
                                                   "keep-fetching"))
    fetched = {name: {int(p["partition"]): int(p["offset"]) for t in out["fetched"]
                      for p in t["partitions"]} for name, out in results.items()}
    assert fetched["offsetlog"] == {0: 42, 1: 7, 2: -1, 3: -1}
    if "kafka" in fetched:
        assert fetched["kafka"] == {0: -2, 1: -2, 2: -1, 3: -1}
