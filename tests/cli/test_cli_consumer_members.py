"""``describe --members`` (and ``--state``) of consumer-protocol (KIP-848) groups: each
member's id, instance id, rack, state, epoch, assignment and target assignment, and the
group's epochs, read from the log as a restart would load them (issue 28, item 7)."""

import json

from offsetlog import TopicPartition
from offsetlog.cli import main
from support.stores import open_store

TOPICS = {"orders": 4, "events": 2}


def beat(store, member, epoch, owned=None, *, instance=None, rack=None, topics=("orders",)):
    kw = dict(member_id=member, member_epoch=epoch, instance_id=instance, rack_id=rack,
              owned=frozenset() if epoch == 0 else owned, client_id=f"client-{member}",
              client_host=f"/10.0.0.{ord(member[-1]) - 96}")
    if epoch == 0:
        kw.update(rebalance_timeout_ms=30_000, subscribed_topic_names=list(topics),
                  server_assignor="range")
    r = store.consumer_groups.heartbeat("billing", topics=TOPICS, **kw).result(timeout=10)
    assert r.error is None, r.error
    return r


def build(path, clock):
    """``a`` (rack r1) settles on orders-0..3; then static ``b`` (instance B, rack r2, orders
    and events) joins: range puts static members first, so the target moves orders-0,1 to b;
    ``a`` has not heartbeated since and still owns them, so ``b`` waits for them
    (unreleased)."""
    with open_store(path, clock=clock, partitions=3) as s:
        a = beat(s, "a", 0, rack="r1")
        a = beat(s, "a", a.member_epoch, owned=a.assignment)
        assert a.member_epoch == 2
        s.commit_sync("billing", {TopicPartition("orders", 0): 10},
                      generation_id=a.member_epoch, member_id="a")
        b = beat(s, "b", 0, instance="B", rack="r2", topics=("orders", "events"))
        assert b.member_epoch == 3
        s.commit_sync("solo", {TopicPartition("orders", 1): 3})  # a group with no members


def test_members_of_a_consumer_protocol_group(store_dir, clock, capsys):
    build(store_dir, clock)
    assert main(["describe", store_dir, "--group", "billing", "--members"]) == 0
    lines = capsys.readouterr().out.splitlines()
    assert lines[0].split() == [
        "GROUP", "CONSUMER-ID", "GROUP-INSTANCE-ID", "CLIENT-ID", "HOST", "RACK", "STATE",
        "#PARTITIONS", "CURRENT-EPOCH", "CURRENT-ASSIGNMENT", "TARGET-EPOCH",
        "TARGET-ASSIGNMENT", "GROUP-EPOCH"]
    rows = [line.split() for line in lines[1:]]
    # range over orders (a, then b: static members first) and events (b alone)
    assert rows == [
        ["billing", "a", "-", "client-a", "/10.0.0.1", "r1", "STABLE", "4", "2",
         "orders:0,1,2,3", "3", "orders:2,3", "3"],
        ["billing", "b", "B", "client-b", "/10.0.0.2", "r2", "UNRELEASED_PARTITIONS", "2", "3",
         "events:0,1", "3", "events:0,1;orders:0,1", "3"]]


def test_members_json_has_epochs_targets_and_the_group(store_dir, clock, capsys):
    build(store_dir, clock)
    assert main(["describe", store_dir, "--members", "--json"]) == 0
    doc = json.loads(capsys.readouterr().out)
    by = {m["consumer_id"]: m for m in doc["members"]}
    assert set(by) == {"a", "b"}
    assert by["b"] | {"host": None} == {
        "group": "billing", "type": "consumer", "consumer_id": "b", "group_instance_id": "B",
        "client_id": "client-b", "host": None, "rack": "r2", "state": "UNRELEASED_PARTITIONS",
        "num_partitions": 2, "current_epoch": 3, "current_assignment": "events:0,1",
        "target_epoch": 3, "target_assignment": "events:0,1;orders:0,1", "group_epoch": 3,
        "assigned_partitions": [["events", 0], ["events", 1]], "pending_revocation": [],
        "target_partitions": [["events", 0], ["events", 1], ["orders", 0], ["orders", 1]],
        "subscribed_topic_names": ["events", "orders"], "subscribed_topic_regex": None,
        "server_assignor": "range"}
    assert by["a"]["target_partitions"] == [["orders", 2], ["orders", 3]]
    assert doc["consumer_groups"] == [{
        "group": "billing", "type": "consumer", "state": "Reconciling", "group_epoch": 3,
        "target_assignment_epoch": 3, "assignor": "range", "num_members": 2}]


def test_a_member_mid_revocation_and_the_state_view(store_dir, clock, capsys):
    build(store_dir, clock)
    with open_store(store_dir, clock=clock, partitions=3) as s:
        # a heartbeats still owning everything: it must first give up orders-0,1
        a = beat(s, "a", 2, owned=frozenset(("orders", p) for p in range(4)))
        assert a.member_epoch == 2
    assert main(["describe", store_dir, "--group", "billing", "--members", "--json"]) == 0
    by = {m["consumer_id"]: m for m in json.loads(capsys.readouterr().out)["members"]}
    assert (by["a"]["state"], by["a"]["current_epoch"], by["a"]["current_assignment"],
            by["a"]["pending_revocation"]) == (
        "UNREVOKED_PARTITIONS", 2, "orders:2,3", [["orders", 0], ["orders", 1]])
    assert main(["describe", store_dir, "--state", "--json"]) == 0
    groups = {g["group"]: g for g in json.loads(capsys.readouterr().out)["groups"]}
    assert groups["billing"] == {
        "group": "billing", "state": "Reconciling", "generation": 3, "protocol_type": "consumer",
        "protocol": "range", "leader": None, "num_members": 2, "type": "consumer",
        "target_assignment_epoch": 3}
    assert "type" not in groups["solo"] and groups["solo"]["state"] == "Empty"  # as before


def test_offsets_name_a_consumer_protocol_owner(store_dir, clock, capsys):
    build(store_dir, clock)
    assert main(["describe", store_dir, "--group", "billing", "--json"]) == 0
    rows = json.loads(capsys.readouterr().out)["offsets"]
    assert [(r["partition"], r["current_offset"], r["consumer_id"], r["client_id"])
            for r in rows] == [(0, 10, "a", "client-a")]


def test_a_group_whose_members_all_left_has_none(store_dir, clock, capsys):
    with open_store(store_dir, clock=clock, partitions=3) as s:
        a = beat(s, "a", 0)
        assert beat(s, "a", -1).member_epoch == -1 and a.member_epoch == 2
    assert main(["describe", store_dir, "--members"]) == 0
    assert "no active members" in capsys.readouterr().out
    assert main(["describe", store_dir, "--members", "--json"]) == 0
    doc = json.loads(capsys.readouterr().out)
    assert doc["members"] == [] and [(g["state"], g["group_epoch"]) for g in
                                     doc["consumer_groups"]] == [("Empty", 3)]
