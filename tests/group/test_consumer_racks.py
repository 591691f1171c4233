"""Racks in the consumer group protocol's coordinator, as Kafka 4.4 has them (judged against
the broker in tests/kafka/test_diff_consumer_group_racks.py): a member's rack is kept (in its
member record, so a restart keeps it) but the server-side assignors do not read it, and a
changed rack writes the member's record without bumping the group epoch."""

from __future__ import annotations

from hypothesis import given, settings
from hypothesis import strategies as st

from offsetlog.group.consumer import ConsumerGroupCoordinator
from offsetlog.group.consumer.assignors import ASSIGNORS, AssignorMember
from offsetlog.group.consumer.group import GROUP_METADATA, MEMBER_METADATA

TOPICS = {"t": 6, "u": 3}


def join(c, member, now, rack=None, topics=("t",), assignor="range"):
    return c.heartbeat("g", member_id=member, member_epoch=0, topics=TOPICS, now_ms=now,
                       rack_id=rack, rebalance_timeout_ms=30_000,
                       subscribed_topic_names=topics, server_assignor=assignor, owned=())


@settings(max_examples=60, deadline=None)
@given(st.sampled_from(sorted(ASSIGNORS)),
       st.lists(st.tuples(st.sampled_from([("t",), ("u",), ("t", "u")]),
                          st.sampled_from([None, "r1", "r2"])), min_size=1, max_size=6))
def test_assignors_give_the_same_targets_whatever_the_racks(name, members):
    with_racks = {f"m{i}": AssignorMember(f"m{i}", frozenset(t), rack_id=r)
                  for i, (t, r) in enumerate(members)}
    without = {mid: AssignorMember(mid, m.topics) for mid, m in with_racks.items()}
    assert ASSIGNORS[name](with_racks, TOPICS, {}) == ASSIGNORS[name](without, TOPICS, {})


def test_the_rack_is_kept_and_a_change_bumps_no_epoch():
    c = ConsumerGroupCoordinator()
    a = join(c, "a", 0, rack="r1").response
    assert c.group("g").members["a"].rack_id == "r1"
    epoch = c.group("g").group_epoch
    # a heartbeat without a rack id leaves the rack as it is
    r = c.heartbeat("g", member_id="a", member_epoch=a.member_epoch, topics=TOPICS, now_ms=1,
                    owned=a.assignment)
    assert r.records == [] and c.group("g").members["a"].rack_id == "r1"
    r = c.heartbeat("g", member_id="a", member_epoch=a.member_epoch, topics=TOPICS, now_ms=2,
                    owned=a.assignment, rack_id="r2")
    assert [k for k, _, _ in r.records] == [MEMBER_METADATA]
    assert r.records[0][2]["rack_id"] == "r2"
    assert c.group("g").group_epoch == epoch and r.response.member_epoch == a.member_epoch
    # replayed, the rack is there
    again = ConsumerGroupCoordinator()
    records = join(ConsumerGroupCoordinator(), "a", 0, rack="r1").records + r.records
    again.replay(records, now_ms=3)
    assert again.group("g").members["a"].rack_id == "r2"
    assert GROUP_METADATA in {k for k, _, _ in records}
