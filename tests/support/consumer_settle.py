"""Raw ConsumerGroupHeartbeat members that behave as clients do, and ``settle``: heartbeat them
until their group is Stable with every member at its target, checking at every heartbeat that
no partition is owned by two members; what the tests judged by Kafka compare: the group's
state, its and every member's epoch, assignments and targets where the group settles (how many
heartbeats it takes to get there is the client's pace, not the coordinator's rules)."""

from __future__ import annotations

import socket
import time

from support.wire_raw import call

HB, DESCRIBE = 68, 69


class Member:
    def __init__(self, port: int, group: str, member_id: str, topics, assignor: str,
                 instance: str | None = None, rack: str | None = None) -> None:
        self.sock = socket.create_connection(("127.0.0.1", port), timeout=10)
        self.group, self.member_id, self.topics, self.assignor = group, member_id, topics, assignor
        self.instance, self.rack = instance, rack
        self.epoch, self.owned = 0, []

    def beat(self, rack: str | None = None) -> None:
        """One heartbeat; ``rack``: a new rack id to tell (the join always tells it)."""
        if rack is not None:
            self.rack = rack
        body = dict(group_id=self.group, member_id=self.member_id, member_epoch=self.epoch,
                    instance_id=self.instance, topic_partitions=self.owned,
                    rack_id=self.rack if self.epoch == 0 or rack else None)
        if self.epoch == 0:
            body.update(rebalance_timeout=30_000, subscribed_topic_names=list(self.topics),
                        server_assignor=self.assignor, topic_partitions=[])
        r = call(self.sock, HB, 1, **body)
        assert r.error_code == 0, r
        self.epoch = r.member_epoch
        if r.assignment is not None:
            self.owned = [dict(topic_id=t.topic_id, partitions=list(t.partitions))
                          for t in r.assignment.topic_partitions]

    def leave(self) -> None:
        r = call(self.sock, HB, 1, group_id=self.group, member_id=self.member_id,
                 member_epoch=-1, instance_id=self.instance, topic_partitions=None)
        assert r.error_code == 0 and r.member_epoch == -1, r
        self.sock.close()

    def holds(self) -> set:
        return {(t["topic_id"], p) for t in self.owned for p in t["partitions"]}


def _assignment(a) -> list:
    return sorted((t.topic_name, p) for t in a.topic_partitions for p in t.partitions)


def settle(members: list[Member], timeout_s: float = 60) -> dict:
    deadline = time.monotonic() + timeout_s
    while True:
        for m in members:
            m.beat()
            held: dict = {}
            for other in members:
                for tp in other.holds():
                    assert tp not in held, f"{tp} owned by {held[tp]} and {other.member_id}"
                    held[tp] = other.member_id
        g = call(members[0].sock, DESCRIBE, 1, group_ids=[members[0].group],
                 include_authorized_operations=False).groups[0]
        view = {"state": g.group_state, "assignor": g.assignor_name, "members": sorted(
            (m.member_id, m.instance_id, _assignment(m.assignment),
             _assignment(m.target_assignment)) for m in g.members),
            "racks": sorted((m.member_id, m.rack_id) for m in g.members),
            "epochs": (g.group_epoch, g.assignment_epoch,
                       sorted((m.member_id, m.member_epoch) for m in g.members))}
        settled = (g.group_state == "Stable" and g.group_epoch == g.assignment_epoch
                   and all(m.member_epoch == g.assignment_epoch for m in g.members)
                   and all(a == t for _, _, a, t in view["members"]))
        if settled:
            return view
        if time.monotonic() > deadline:
            raise AssertionError(f"the group did not settle: {view}")
        time.sleep(0.05)


def wait_until_assignable(port: int, topics, timeout_s: float = 60) -> None:
    """Wait until a consumer-protocol member of a throwaway group gets every partition of
    ``topics`` (``["name:N", ...]``). Kafka's group coordinator learns of a new topic from its
    metadata image a moment after the topic is listed; a group formed before that settles
    with nothing assigned (and the tests comparing where groups settle would compare that)."""
    import uuid

    names = [t.split(":")[0] for t in topics]
    want = sum(int(t.split(":")[1]) for t in topics)
    m = Member(port, f"probe-{uuid.uuid4().hex[:8]}", f"probe-{uuid.uuid4().hex[:8]}",
               names, "range")
    deadline = time.monotonic() + timeout_s
    try:
        while sum(len(t["partitions"]) for t in m.owned) < want:
            if time.monotonic() > deadline:
                raise AssertionError(f"the group coordinator at {port} never assigned {topics}")
            m.beat()
            time.sleep(0.1)
    finally:
        m.leave()
