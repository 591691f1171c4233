"""Heartbeat sequences against Apache Kafka and ``offsetlog serve``, compared where the group
settles: members join one by one and leave, each heartbeating as a well-behaved client does
(reporting what it owns, taking what it is given), until the group is Stable with every member
at its target; then ConsumerGroupDescribe's state, members, assignments and targets must be the
same on both (epochs left out: Kafka 4.4 batches target assignments, KIP-1263, so its epochs
run ahead; docs/GROUPS.md). At every heartbeat no partition is owned by two members."""

from __future__ import annotations

import pytest

from support.consumer_settle import Member, settle


def scenario(port: int, group: str, assignor: str) -> list:
    """Join a, b, c (c statically, on two topics), then b leaves: where the group settles."""
    def mk(name, topics=("orders",), instance=None):
        return Member(port, group, f"{group}-{name}", topics, assignor, instance)
    a = mk("a")
    out = [settle([a])]
    b = mk("b")
    out.append(settle([a, b]))
    c = mk("c", topics=("orders", "events"), instance="C")
    out.append(settle([a, b, c]))
    b.leave()
    out.append(settle([a, c]))
    for m in (a, c):
        m.leave()
    return out


@pytest.mark.parametrize("assignor", ["range", "uniform"])
def test_groups_settle_where_kafkas_do(targets, gid, assignor):
    kafka = scenario(targets[0], gid, assignor)
    ours = scenario(targets[1], gid, assignor)
    def names(views):
        return [[(m[0].rsplit("-", 1)[1], m[1], m[2]) for m in v["members"]] for v in views]
    if assignor == "range":
        assert kafka == ours
        # what the case is about, on Kafka's answers
        assert names(kafka)[1] == [("a", None, [("orders", 0), ("orders", 1)]),
                                   ("b", None, [("orders", 2), ("orders", 3)])]
    else:
        # uniform: Kafka breaks ties between equally good assignments in hash order, so
        # only the shape is compared: the same members, each with as many partitions
        def shape(views):
            return [(v["state"], v["assignor"], [(m[0], m[1], len(m[2])) for m in v["members"]])
                    for v in views]
        assert shape(kafka) == shape(ours)
