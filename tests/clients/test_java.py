"""Kafka's own Java client (kafka-clients, the broker's version) as a judge: the programs of
tests/clients/java/, compiled on first use, against offsetlog and against Kafka."""

from __future__ import annotations

import pytest

from support.client_runners import MemberProcess, java_client, run_json
from support.client_sessions import cooperative_session, group_session, on_targets, same


class JavaMembers:
    def __init__(self, client) -> None:
        self.client = client

    def member(self, bootstrap, group, topic, strategy, client_id, instance_id, session_ms):
        return MemberProcess(self.client.command("Member", bootstrap, group, topic, strategy,
                                                 client_id, instance_id or "-", session_ms),
                             f"java {client_id}")


@pytest.fixture(scope="session")
def java():
    return java_client()


def test_java_group_session(java, targets, gid):
    results = on_targets(targets, lambda t: group_session(JavaMembers(java), t, gid, "orders", 4))
    for name, r in results.items():
        assert r["formed"]["assignment"] == {"a": [0, 1, 2, 3]}, name
        assert r["formed"]["described"] == {"state": "Stable", "protocol": "range"}, name
        # range over members sorted by id: m1-a-... before m2-b-...
        assert r["joined"]["assignment"] == {"a": [0, 1], "b": [2, 3]}, name
        assert r["left"]["assignment"] == {"a": [0, 1, 2, 3]}, name
        assert r["joined_again"]["assignment"] == {"a": [0, 1], "c": [2, 3]}, name
        assert r["heartbeat_missed"]["assignment"] == {"a": [0, 1, 2, 3]}, name
        # the Java assignors put static members (by instance id) before dynamic ones
        assert r["static_joined"]["assignment"] == {"a": [2, 3], "s": [0, 1]}, name
        rejoined = r["static_rejoined"]
        assert rejoined["partitions"] == [0, 1], name
        # no rebalance: the same generation, and the other member saw nothing new
        assert rejoined["generation"] == r["static_joined"]["generation"], name
        assert not rejoined["others_rebalanced"] and rejoined["described_members"] == 2, name
        assert r["commit"]["error"] is None, name
        # a committed 42 to the first of its partitions, nothing to the other
        assert r["fetched"] == {2: 42, 3: None}, name
        assert r["after_close"] in ("Stable", "PreparingRebalance", "CompletingRebalance",
                                    "Empty"), name
    for r in results.values():
        r.pop("after_close")  # when the static member's session ends is timing
    same(results, "Java group session")


def test_java_cooperative_sticky(java, targets, gid):
    results = on_targets(targets, lambda t: cooperative_session(JavaMembers(java), t, gid,
                                                                "wide", 6))
    for name, r in results.items():
        assert r["alone"] == [0, 1, 2, 3, 4, 5], name
        assert len(r["joined"]["a"]) == len(r["joined"]["b"]) == 3, name
        # cooperative: what a keeps it never gave up, and the join took two rebalances
        assert r["a_kept_throughout"] == r["joined"]["a"], name
        assert r["joined"]["generation"] == 2, name
        assert r["protocol"] == "cooperative-sticky", name
        assert r["left"]["a"] == [0, 1, 2, 3, 4, 5], name
    same(results, "Java cooperative-sticky session")


@pytest.fixture(scope="module")
def java_admin(java, targets):
    import uuid

    gid = f"cg-{uuid.uuid4().hex[:10]}"
    return on_targets(targets, lambda t: run_json(java.command("GroupAdmin", t.bootstrap, gid,
                                                               "orders")))


#: the Java admin's view of a group the target does not know (below)
UNKNOWN_GROUP_STEPS = ("describe_unknown", "describe_deleted")


def test_java_admin_calls(java_admin):
    for name, r in java_admin.items():
        assert r["alter_empty"] == "ok", name
        assert r["offsets_1"] == {"orders:0": [10, "a"], "orders:1": [11, ""]}, name
        assert r["listed_offsets_only"]["state"] == "Empty", name
        assert r["describe_stable"]["state"] == "Stable", name
        assert r["describe_stable"]["members"] == [
            {"clientId": "admin-member", "instanceId": "", "partitions": [0, 1, 2, 3]}], name
        assert r["delete_offsets_subscribed"] == {"error": "GroupSubscribedToTopicException"}
        assert r["delete_group_nonempty"] == {"error": "GroupNotEmptyException"}, name
        assert r["alter_with_member"] == {"error": "UnknownMemberIdException"}, name
        assert r["offsets_3"] == {"orders:1": [11, ""], "orders:2": [12, "m"]}, name
        assert r["delete_group"] == "ok" and r["offsets_deleted"] == {}, name
        assert r["listed_deleted"] == "absent", name
        assert r["delete_group_again"] == {"error": "GroupIdNotFoundException"}, name
    same({k: {s: v for s, v in r.items() if s not in UNKNOWN_GROUP_STEPS}
          for k, r in java_admin.items()}, "Java admin calls")


def test_java_admin_describe_of_an_unknown_group(java_admin):
    """Kafka 4.x answers the Java admin's describe of a group it does not know with
    GROUP_ID_NOT_FOUND (DescribeGroups v6, KIP-1043), raised as GroupIdNotFoundException; so
    does offsetlog since it offers v6 (it offered v5, which answers a Dead group)."""
    for name, r in java_admin.items():
        for step in UNKNOWN_GROUP_STEPS:
            assert r[step] == {"error": "GroupIdNotFoundException"}, (name, step)


def test_java_transactional_producer(java, targets, gid):
    import uuid

    txid = f"tx-{uuid.uuid4().hex[:10]}"
    results = on_targets(targets, lambda t: run_json(java.command("Txn", t.bootstrap, gid,
                                                                  "orders", txid)))
    for name, r in results.items():
        assert r["committed"] == {"0": 55}, name
        assert r["aborted"] == {"0": 55}, name
        assert r["fenced_commit"] == {"error": "ProducerFencedException"}, name
        assert r["after_fencing"] == {"0": 55}, name
        assert r["newer_committed"] == {"0": 55, "2": 9}, name
        assert r["member_metadata"] == {"0": 55, "2": 9, "3": 3}, name
        assert r["stale_metadata"] == {"error": "CommitFailedException"}, name
        assert r["after_stale"] == r["member_metadata"], name
    same(results, "Java transactional producer")
