"""Racks in the consumer group protocol, judged by Apache Kafka: a broker with ``broker.rack``
(every partition's one replica in that rack, as on our single node) and ``offsetlog serve
--config broker.rack=...``, members in that rack, in another and in none.

What Kafka 4.4 does: its server-side assignors (``uniform``, ``range``) never read racks (the
member's rack is kept, shown by ConsumerGroupDescribe and given to custom assignors; partition
racks only feed the topics' metadata hash, KIP-1101), so members get the assignment they would
get without racks, and a member changing its rack writes its new metadata without bumping the
group epoch. The cases pin that on Kafka's own answers and require the same of ours."""

from __future__ import annotations

import socket

import pytest

from support.consumer_settle import DESCRIBE, Member, settle
from support.kafka_broker import separate_targets
from support.wire_raw import call

RACK = "rack-a"
TOPICS = ["orders:4", "events:2"]
METADATA = 3


@pytest.fixture(scope="module")
def rack_targets(kafka_broker, tmp_path_factory):
    """``(kafka port, offsetlog port)``, both nodes in ``RACK``."""
    with separate_targets(str(tmp_path_factory.mktemp("racks") / "store"), TOPICS,
                          extra={"broker.rack": RACK}, config=[f"broker.rack={RACK}"]) as ports:
        yield ports


def _sock(port: int) -> socket.socket:
    return socket.create_connection(("127.0.0.1", port), timeout=10)


def test_both_nodes_are_in_the_rack(rack_targets):
    for port in rack_targets:
        with _sock(port) as s:
            r = call(s, METADATA, 12, topics=None, allow_auto_topic_creation=False,
                     include_topic_authorized_operations=False)
            assert [b.rack for b in r.brokers] == [RACK], port


def scenario(port: int, group: str, assignor: str) -> list:
    """a in the node's rack, b in another, c in none, then d (static, two topics) in the
    node's rack; then b leaves: where the group settles, with every member's rack."""
    def mk(name, rack, topics=("orders",), instance=None):
        return Member(port, group, f"{group}-{name}", topics, assignor, instance, rack)
    a, b, c = mk("a", RACK), mk("b", "rack-b"), mk("c", None)
    out = [settle([a]), settle([a, b]), settle([a, b, c])]
    d = mk("d", RACK, topics=("orders", "events"), instance="D")
    out.append(settle([a, b, c, d]))
    b.leave()
    out.append(settle([a, c, d]))
    for m in (a, c, d):
        m.leave()
    return out


def _short(views) -> list:
    return [[(m[0].rsplit("-", 1)[1], m[1], m[2]) for m in v["members"]] for v in views]


@pytest.mark.parametrize("assignor", ["range", "uniform"])
def test_racks_leave_assignments_as_without_them(rack_targets, gid, assignor):
    kafka = scenario(rack_targets[0], gid, assignor)
    ours = scenario(rack_targets[1], gid, assignor)
    racks = [[(mid.rsplit("-", 1)[1], r) for mid, r in v["racks"]] for v in kafka]
    assert racks[3] == [("a", RACK), ("b", "rack-b"), ("c", None), ("d", RACK)]
    assert [v["racks"] for v in kafka] == [v["racks"] for v in ours]
    if assignor == "range":
        assert kafka == ours
        # Kafka's own answer, racks ignored: b (in no partition's rack) still gets its range
        # of orders, and c (no rack) its own
        assert _short(kafka)[2] == [("a", None, [("orders", 0), ("orders", 1)]),
                                    ("b", None, [("orders", 2)]),
                                    ("c", None, [("orders", 3)])]
    else:
        # which member gets a partition more is a tie Kafka breaks in hash order (its members
        # are walked in a HashMap's order), so the balance is compared, not who has what
        def shape(views):
            return [(v["state"], v["assignor"], sorted(len(m[2]) for m in v["members"]),
                     v["epochs"]) for v in views]
        assert shape(kafka) == shape(ours)
        # every member gets its share, wherever its rack
        assert shape(kafka)[2][2] == [1, 1, 2]


def _describe(sock: socket.socket, group: str):
    return call(sock, DESCRIBE, 1, group_ids=[group],
                include_authorized_operations=False).groups[0]


def rack_change(port: int, group: str) -> tuple:
    """A settled group of two; a tells a new rack: (group epoch before, after, a's rack)."""
    a = Member(port, group, f"{group}-a", ("orders",), "range", rack=RACK)
    b = Member(port, group, f"{group}-b", ("orders",), "range", rack="rack-b")
    settle([a, b])
    before = _describe(a.sock, group).group_epoch
    a.beat(rack="rack-c")
    view = settle([a, b])
    after = _describe(a.sock, group)
    for m in (a, b):
        m.leave()
    return (before, after.group_epoch, dict(view["racks"])[f"{group}-a"], view["members"],
            view["epochs"])


def test_a_rack_change_bumps_no_epoch(rack_targets, gid):
    kafka = rack_change(rack_targets[0], gid)
    ours = rack_change(rack_targets[1], gid)
    assert kafka[0] == kafka[1] and kafka[2] == "rack-c", kafka
    assert ours[0] == ours[1] and ours[2] == "rack-c", ours
    assert kafka[3:] == ours[3:]
