"""A custom assignor written as Kafka's ``AbstractPartitionAssignor`` subclasses are (a ``name``,
``assign(partitions_per_topic, subscriptions)`` overridden) registers and runs in a group."""

import pytest

from offsetlog import TopicPartition
from offsetlog.assignors import (InvalidAssignmentError, PartitionAssignor, RangeAssignor,
                                 Subscription, get_assignor, register_assignor)
from offsetlog.assignors import registry

from support.member_harness import Harness, partitions


class FirstTakesAll(PartitionAssignor):
    name = "test-first-takes-all"

    def assign(self, partitions_per_topic, subscriptions):
        first = min(subscriptions)
        return {first: [TopicPartition(t, p) for t in subscriptions[first].topics
                        if t in partitions_per_topic for p in range(partitions_per_topic[t])]}


@pytest.fixture
def registered():
    register_assignor(FirstTakesAll, replace=True)
    yield FirstTakesAll
    registry._registry.pop(FirstTakesAll.name, None)


def test_kafka_style_subclass_instantiates_and_keeps_the_base_checks(registered):
    a = get_assignor("test-first-takes-all")
    subs = {"m2": Subscription(["t"]), "m1": Subscription(["t", "unknown"])}
    # the base class still fills in every member and sorts
    assert a.assign({"t": 2, "nobody": 3}, subs) == {
        "m1": [TopicPartition("t", 0), TopicPartition("t", 1)], "m2": []}

    class Broken(PartitionAssignor):
        name = "test-broken"

        def assign(self, partitions_per_topic, subscriptions):
            return {"m1": [TopicPartition("t", 7)]}

    with pytest.raises(InvalidAssignmentError):
        Broken().assign({"t": 2}, {"m1": Subscription(["t"])})


def test_overriding_assign_of_a_builtin_stays_a_plain_override():
    class Reversed(RangeAssignor):
        name = "test-reversed"

        def assign(self, partitions_per_topic, subscriptions):
            result = super().assign(partitions_per_topic, subscriptions)
            members = sorted(result)
            return dict(zip(members, [result[m] for m in reversed(members)]))

    out = Reversed().assign({"t": 3}, {"a": Subscription(["t"]), "b": Subscription(["t"])})
    assert out == {"a": [TopicPartition("t", 2)],
                   "b": [TopicPartition("t", 0), TopicPartition("t", 1)]}


def test_a_subclass_that_overrides_nothing_is_still_abstract():
    class Nothing(PartitionAssignor):
        name = "test-nothing"

    with pytest.raises(TypeError):
        Nothing()
    with pytest.raises(TypeError, match="override assign"):
        register_assignor(Nothing)


def test_custom_assignor_runs_in_a_group(registered, store_dir, clock):
    h = Harness(store_dir, clock)
    try:
        a = h.member("a", assignors=["test-first-takes-all"])
        b = h.member("b", assignors=["test-first-takes-all"])
        h.run_until(lambda: h.stable([a, b]))
        assert a.protocol_name == "test-first-takes-all"
        first, second = sorted([a, b], key=lambda m: m.member_id)
        assert first.assignment() == partitions("t", 6)
        assert second.assignment() == set()
    finally:
        h.close()
