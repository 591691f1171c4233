"""The pieces under the coordinator: the transition table, the protocol vote, the timer queue,
the GROUP_METADATA schema and the consumer-protocol bytes; plus the package's exports."""

from __future__ import annotations

import itertools

import pytest

import offsetlog.group as group_pkg
from offsetlog.assignors import choose_protocol
from offsetlog.group import VALID_PREVIOUS_STATES, GroupState
from offsetlog.group.consumer_protocol import (
    decode_assignment,
    decode_subscription,
    encode_assignment,
    encode_subscription,
    subscribed_topics,
)
from offsetlog.group.errors import IllegalGroupTransitionError
from offsetlog.group.group import Group
from offsetlog.group.member import Member
from offsetlog.group.schema import GROUP_FIELDS, MEMBER_FIELDS, group_value, load_group
from offsetlog.group.timers import TimerQueue
from offsetlog.log.framing import decode_payload, encode_payload
from offsetlog.log.records import GROUP_METADATA, VALUE_DEFAULTS
from offsetlog.types import TopicPartition

S = GroupState

# -- transitions -------------------------------------------------------------------------------

KAFKA_PREDECESSORS = {  # ClassicGroupState's validPreviousStates
    S.EMPTY: {S.PREPARING_REBALANCE},
    S.PREPARING_REBALANCE: {S.STABLE, S.COMPLETING_REBALANCE, S.EMPTY},
    S.COMPLETING_REBALANCE: {S.PREPARING_REBALANCE},
    S.STABLE: {S.COMPLETING_REBALANCE},
    S.DEAD: {S.STABLE, S.PREPARING_REBALANCE, S.COMPLETING_REBALANCE, S.EMPTY, S.DEAD},
}


def test_transition_table_is_kafkas():
    assert {k: set(v) for k, v in VALID_PREVIOUS_STATES.items()} == KAFKA_PREDECESSORS


def test_state_names_are_kafkas():
    assert [str(s) for s in S] == ["Empty", "PreparingRebalance", "CompletingRebalance",
                                   "Stable", "Dead"]


@pytest.mark.parametrize("source, target", list(itertools.product(S, S)))
def test_every_transition_is_allowed_or_refused_without_change(source, target):
    group = Group("g", state=source, state_timestamp=1)
    if source in VALID_PREVIOUS_STATES[target]:
        group.transition_to(target, 2)
        assert (group.state, group.state_timestamp) == (target, 2)
    else:
        with pytest.raises(IllegalGroupTransitionError) as info:
            group.transition_to(target, 2)
        assert (info.value.source, info.value.target) == (str(source), str(target))
        assert (group.state, group.state_timestamp) == (source, 1)


# -- protocol vote ----------------------------------------------------------------------------

def test_group_votes_with_the_assignors_choose_protocol():
    g = Group("g", state=S.EMPTY, state_timestamp=0)
    g.add(Member("a", None, "", "", 10_000, 10_000, (("sticky", b""), ("range", b""))))
    g.add(Member("b", None, "", "", 10_000, 10_000, (("range", b""), ("sticky", b""))))
    g.add(Member("c", None, "", "", 10_000, 10_000, (("roundrobin", b""), ("range", b""))))
    assert g.common_protocols() == {"range"}
    assert g.select_protocol() == choose_protocol(g.member_protocols()) == "range"
    g.remove("c")
    assert g.common_protocols() == {"range", "sticky"}


# -- timers ------------------------------------------------------------------------------------

def test_timer_queue_orders_replaces_and_cancels():
    q = TimerQueue()
    q.schedule("b", 20)
    q.schedule("a", 10)
    q.schedule("c", 10)  # same deadline: scheduled later, fires later
    q.schedule("b", 5)  # rescheduled earlier
    q.schedule("d", 7)
    q.cancel("d")
    assert q.next_deadline() == 5 and len(q) == 3
    assert q.pop_due(4) is None
    assert [q.pop_due(100) for _ in range(4)] == [("b", 5), ("a", 10), ("c", 10), None]
    assert q.next_deadline() is None and q.deadline("a") is None


# -- schema ------------------------------------------------------------------------------------

def make_group():
    g = Group("g", state=S.STABLE, state_timestamp=123, generation=7, protocol_type="consumer",
              protocol="range")
    g.add(Member("m1", None, "c1", "h1", 10_000, 20_000, (("range", b"s1"), ("rr", b"x")),
                 b"a1"))
    g.add(Member("m2", "inst", "c2", "", 30_000, 30_000, (("range", b"s2"),), b""))
    return g


def test_group_value_is_msgpack_friendly_and_round_trips():
    value = group_value(make_group())
    assert value == {
        "protocol_type": "consumer", "generation": 7, "protocol": "range", "leader": "m1",
        "current_state_timestamp": 123,
        "members": [
            {"member_id": "m1", "group_instance_id": None, "client_id": "c1",
             "client_host": "h1", "session_timeout_ms": 10_000, "rebalance_timeout_ms": 20_000,
             "subscription": b"s1", "assignment": b"a1"},
            {"member_id": "m2", "group_instance_id": "inst", "client_id": "c2",
             "client_host": "", "session_timeout_ms": 30_000, "rebalance_timeout_ms": 30_000,
             "subscription": b"s2", "assignment": b""}]}
    record = (0, GROUP_METADATA, 0, {"group": "g"}, value)
    decoded = decode_payload(encode_payload([record]))[0][4]
    assert decoded == value
    assert group_value(load_group("g", decoded)) == value


def test_schema_documents_every_field_and_reuses_the_record_defaults():
    assert set(GROUP_FIELDS) == set(VALUE_DEFAULTS[GROUP_METADATA])
    for name, (since, default, _types, doc) in GROUP_FIELDS.items():
        assert since == 0 and doc and default == VALUE_DEFAULTS[GROUP_METADATA][name]
    assert set(MEMBER_FIELDS) == set(group_value(make_group())["members"][0])


def test_loaded_group_supports_only_the_recorded_protocol():
    g = load_group("g", group_value(make_group()))
    assert g.state is S.STABLE and g.static_members == {"inst": "m2"}
    assert g.members["m1"].protocols == (("range", b"s1"),)


# -- consumer protocol bytes -------------------------------------------------------------------

def test_subscription_and_assignment_round_trip():
    data = encode_subscription(["b", "a", "a"], user_data=b"u",
                               owned_partitions=[TopicPartition("a", 1)], generation_id=3)
    assert decode_subscription(data) == {"topics": ["a", "b"], "user_data": b"u",
                                         "owned_partitions": [TopicPartition("a", 1)],
                                         "generation_id": 3, "rack_id": None,
                                         "version": 3}
    assert subscribed_topics(data) == frozenset({"a", "b"})
    tps = [TopicPartition("t", 2), TopicPartition("t", 0)]
    assert decode_assignment(encode_assignment(tps)) == sorted(tps)
    assert decode_assignment(b"") == []


@pytest.mark.parametrize("garbage", [b"", b"\xc1", b"\x01", encode_assignment([])])
def test_anything_else_is_not_a_subscription(garbage):
    assert subscribed_topics(garbage) is None


# -- exports -----------------------------------------------------------------------------------

def test_every_public_name_is_exported_and_documented():
    for name in group_pkg.__all__:
        obj = getattr(group_pkg, name)
        if callable(obj):
            assert obj.__doc__, name


def test_timer_queue_matches_a_naive_model(seeded_random):
    rng = seeded_random
    q, model = TimerQueue(), {}
    now = 0
    for _ in range(5_000):
        key = rng.randrange(20)
        action = rng.random()
        if action < 0.5:  # mostly pushes later, like heartbeats
            deadline = now + rng.randrange(0, 50)
            q.schedule(key, deadline)
            model[key] = deadline
        elif action < 0.6:
            q.cancel(key)
            model.pop(key, None)
        else:
            now += rng.randrange(0, 10)
            while (due := q.pop_due(now)) is not None:
                fired, at = due
                assert model.pop(fired) == at == min([at, *model.values()])
                assert at <= now
            assert all(d > now for d in model.values())
        assert q.next_deadline() == min(model.values(), default=None)
        assert len(q) == len(model) and all(q.deadline(k) == d for k, d in model.items())
    assert len(q._heap) <= 3 * len(model) + 40  # superseded entries do not pile up


@pytest.mark.parametrize("module", ["offsetlog.group.coordinator",
                                    "offsetlog.group.consumer_protocol",
                                    "support.coordinator_harness"])
def test_docstring_examples_run(module):
    import doctest
    import importlib
    result = doctest.testmod(importlib.import_module(module))
    assert result.attempted and not result.failed
