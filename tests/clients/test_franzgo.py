"""franz-go (kgo and kadm, pinned in tests/clients/franzgo/go.mod) as a judge: the program of
tests/clients/franzgo/, built on first use, against offsetlog and against Kafka."""

from __future__ import annotations

import uuid

import pytest

from support.client_runners import MemberProcess, franzgo_binary, run_json
from support.client_sessions import cooperative_session, group_session, on_targets, same


class FranzMembers:
    def __init__(self, binary: str) -> None:
        self.binary = binary

    def member(self, bootstrap, group, topic, strategy, client_id, instance_id, session_ms):
        return MemberProcess([self.binary, "member", bootstrap, group, topic, strategy,
                              client_id, instance_id or "-", str(session_ms)],
                             f"franz-go {client_id}")


@pytest.fixture(scope="session")
def franzgo():
    return franzgo_binary()


def test_franzgo_group_session(franzgo, targets, gid):
    results = on_targets(targets, lambda t: group_session(FranzMembers(franzgo), t, gid,
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
        # no rebalance: the same generation, and the other member saw nothing new
        assert rejoined["generation"] == r["static_joined"]["generation"], name
        assert not rejoined["others_rebalanced"] and rejoined["described_members"] == 2, name
        assert r["commit"]["error"] is None, name
        assert r["fetched"] == {static["a"][0]: 42, static["a"][1]: None}, name
    for r in results.values():
        r.pop("after_close")  # when the static member's session ends is timing
    same(results, "franz-go group session")


def test_franzgo_cooperative_sticky(franzgo, targets, gid):
    results = on_targets(targets, lambda t: cooperative_session(FranzMembers(franzgo), t, gid,
                                                                "wide", 6))
    for name, r in results.items():
        assert r["alone"] == [0, 1, 2, 3, 4, 5], name
        assert len(r["joined"]["a"]) == len(r["joined"]["b"]) == 3, name
        assert r["a_kept_throughout"] == r["joined"]["a"], name
        assert r["joined"]["generation"] == 2, name
        assert r["protocol"] == "cooperative-sticky", name
        assert r["left"]["a"] == [0, 1, 2, 3, 4, 5], name
    same(results, "franz-go cooperative-sticky session")


@pytest.fixture(scope="module")
def franzgo_admin(franzgo, targets):
    gid = f"cg-{uuid.uuid4().hex[:10]}"
    return on_targets(targets, lambda t: run_json([franzgo, "admin", t.bootstrap, gid, "orders"]))


UNKNOWN_GROUP_STEPS = ("describe_unknown", "describe_deleted")


def test_franzgo_admin_calls(franzgo_admin):
    for name, r in franzgo_admin.items():
        assert r["alter_empty"] == "ok", name
        assert r["offsets_1"] == {"orders:0": [10, "a"], "orders:1": [11, "a"]}, name
        assert r["listed_offsets_only"] == {"protocolType": "", "state": "Empty"}, name
        assert r["describe_stable"]["members"] == [
            {"clientId": "admin-member", "partitions": [0, 1, 2, 3]}], name
        assert r["delete_offsets_subscribed"] == {"partition": "GROUP_SUBSCRIBED_TO_TOPIC"}
        assert r["delete_group_nonempty"] == {"error": "NON_EMPTY_GROUP"}, name
        assert r["alter_with_member"] == {"error": "UNKNOWN_MEMBER_ID"}, name
        assert r["offsets_3"] == {"orders:1": [11, "a"]}, name
        assert r["delete_group"] == "ok" and r["offsets_deleted"] == {}, name
        assert r["delete_group_again"] == {"error": "GROUP_ID_NOT_FOUND"}, name
    same({k: {s: v for s, v in r.items() if s not in UNKNOWN_GROUP_STEPS}
          for k, r in franzgo_admin.items()}, "franz-go admin calls")


def test_franzgo_describe_of_an_unknown_group(franzgo_admin):
    """kadm's describe of a group neither target knows: GROUP_ID_NOT_FOUND on both
    (DescribeGroups v6, KIP-1043; offsetlog offered v5 until this session)."""
    for name, r in franzgo_admin.items():
        for step in UNKNOWN_GROUP_STEPS:
            assert r[step] == {"error": "GROUP_ID_NOT_FOUND"}, (name, step)


def test_franzgo_transactional_offsets(franzgo, targets, gid):
    txid = f"tx-{uuid.uuid4().hex[:10]}"
    results = on_targets(targets, lambda t: run_json([franzgo, "txn", t.bootstrap, gid,
                                                      "orders", txid]))
    ok = {"add": "ok", "commit": {"0": "ok"}, "end": "ok"}
    for name, r in results.items():
        assert r["committed"] == ok and r["committed_offsets"] == {"orders:0": [55, ""]}, name
        assert r["aborted_offsets"] == {"orders:0": [55, ""]}, name
        assert r["second_init"] == {"error": "ok", "epoch_bumped": True, "same_id": True}
        assert r["fenced_end"] == r["fenced_add"] == "PRODUCER_FENCED", name
        assert r["after_fencing"] == {"orders:0": [55, ""]}, name
        assert r["newer_offsets"] == {"orders:0": [55, ""], "orders:2": [9, ""]}, name
        assert r["abort_nothing_open"] == "INVALID_TXN_STATE", name
    same(results, "franz-go transactional offsets")
