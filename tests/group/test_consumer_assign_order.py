"""``uniform``'s free choices made for speed (offsetlog/group/consumer/assignors.py): in a
homogeneous group, members already holding a partition more than the quota keep it, and the
partitions more go to the members whose next heartbeat is due first; the coordinator knows
when that is, since it told each member its interval."""

from __future__ import annotations

from offsetlog.group.consumer import ConsumerGroupConfig, ConsumerGroupCoordinator
from offsetlog.group.consumer.assignors import AssignorMember, range_assign, uniform_assign

T = {"t": 10}


def tps(*ps):
    return frozenset(("t", p) for p in ps)


def members(*ids):
    return {m: AssignorMember(m, frozenset({"t"})) for m in ids}


def test_without_due_the_order_is_member_id_order():
    out = uniform_assign(members("c", "a", "b"), {"t": 4}, {})
    assert out == {"a": tps(0, 1), "b": tps(2), "c": tps(3)}


def test_a_partition_more_goes_to_the_member_due_first():
    ms = members("a", "b", "c")
    current = {"a": tps(0, 1, 2), "b": tps(3, 4, 5), "c": tps(6, 7, 8)}  # 9 was the leaver's
    out = uniform_assign(ms, T, current, due={"a": 300, "b": 100, "c": 200})
    assert out == {"a": tps(0, 1, 2), "b": tps(3, 4, 5, 9), "c": tps(6, 7, 8)}
    # by member id, a would have taken it
    assert uniform_assign(ms, T, current)["a"] == tps(0, 1, 2, 9)


def test_members_whose_next_heartbeat_is_unknown_come_last():
    ms = members("a", "b", "c")
    current = {"a": tps(0, 1, 2), "b": tps(3, 4, 5), "c": tps(6, 7, 8)}
    out = uniform_assign(ms, T, current, due={"c": 10_000})
    assert out["c"] == tps(6, 7, 8, 9)


def test_a_member_holding_a_partition_more_keeps_it_whoever_is_due_first():
    ms = members("a", "b", "c", "d")
    # 10 over 4: two members get 3; b and d hold 3 now and keep them, a and c are not touched
    current = {"a": tps(0, 1), "b": tps(2, 3, 4), "c": tps(5, 6), "d": tps(7, 8, 9)}
    out = uniform_assign(ms, T, current, due={"a": 1, "b": 4, "c": 2, "d": 3})
    assert out == current


def test_when_holders_must_give_up_their_partition_more_those_due_first_do():
    ms = members("a", "b", "c", "d")
    # 10 over 4 members, one of them new (d): two keep 3; of a, b, c (3, 3, 4 now), the one due
    # first hears of it first, so it is the one that gives a partition up
    current = {"a": tps(0, 1, 2), "b": tps(3, 4, 5), "c": tps(6, 7, 8, 9)}
    out = uniform_assign(ms, T, current, due={"a": 100, "b": 900, "c": 500, "d": 0})
    assert {m: len(out[m]) for m in out} == {"a": 2, "b": 3, "c": 3, "d": 2}
    assert out["a"] < current["a"] and out["b"] == current["b"] and out["c"] < current["c"]


def test_range_does_not_read_due():
    ms = members("a", "b", "c")
    assert range_assign(ms, T, {}, due={"c": 0}) == range_assign(ms, T, {})


class Client:
    def __init__(self, c, member_id):
        self.c, self.member_id, self.epoch, self.owned = c, member_id, 0, frozenset()

    def beat(self, now):
        joining = self.epoch == 0
        resp = self.c.heartbeat(
            "g", member_id=self.member_id, member_epoch=self.epoch, topics=T, now_ms=now,
            rebalance_timeout_ms=30_000 if joining else -1,
            subscribed_topic_names=("t",) if joining else None, owned=self.owned).response
        assert resp.error is None, resp.error
        self.epoch = resp.member_epoch
        if resp.assignment is not None:
            self.owned = resp.assignment
        return resp


def formed(c, ids, until=20_000):
    """Members joining at once, heartbeating as told until the group is Stable."""
    clients = {m: Client(c, m) for m in ids}
    due = {m: 0 for m in ids}
    while c.group("g") is None or c.group("g").state() != "Stable" or any(
            cl.owned != c.group("g").targets.get(m) for m, cl in clients.items()):
        m = min(due, key=lambda k: (due[k], k))
        now = due[m]
        assert now < until, "the group did not settle"
        due[m] = now + clients[m].beat(now).heartbeat_interval_ms
    return clients, due


def test_after_a_leave_the_members_heartbeating_first_take_the_partitions():
    c = ConsumerGroupCoordinator(ConsumerGroupConfig())
    clients, due = formed(c, ["a", "b", "c", "d", "e"])  # 10 over 5: two each
    t0 = max(due.values())
    for i, m in enumerate("edcba"):  # next heartbeats due: e first, then d, c, b, a
        assert clients[m].beat(t0 + 100 * i).heartbeat_interval_ms == 5_000
    freed = clients.pop("c").owned
    assert c.heartbeat("g", member_id="c", member_epoch=-1, topics=T,
                       now_ms=t0 + 500).response.error is None
    # 10 over 4: two members take one of c's partitions each. By member id that would be a
    # and b, who heartbeat last; e and d hear of it first, so they take them
    got_e = clients["e"].beat(t0 + 5_000).assignment
    got_d = clients["d"].beat(t0 + 5_100).assignment
    assert len(got_e & freed) == 1 and len(got_d & freed) == 1
    assert all(clients[m].beat(t0 + 5_200 + i).assignment is None for i, m in enumerate("ba"))
    assert sorted(len(cl.owned) for cl in clients.values()) == [2, 2, 3, 3]
