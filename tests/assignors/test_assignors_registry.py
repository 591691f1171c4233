"""The assignor registry, the PartitionAssignor base class (input checks, output checks,
normalisation), Subscription, and the package's public exports."""

from __future__ import annotations

import ast
import os
import pathlib
import subprocess
import sys

import pytest

import offsetlog.assignors as assignors
from offsetlog.assignors import (
    AssignorArgumentError,
    CooperativeStickyAssignor,
    InvalidAssignmentError,
    PartitionAssignor,
    RangeAssignor,
    RoundRobinAssignor,
    StickyAssignor,
    Subscription,
    UnknownAssignorError,
    available_assignors,
    get_assignor,
    register_assignor,
)
from offsetlog.assignors import registry as registry_module
from offsetlog.errors import OffsetlogError
from offsetlog.types import TopicPartition
from support.assignor_invariants import check_every_assignment  # noqa: F401  (autouse fixture)


def tp(topic: str, partition: int) -> TopicPartition:
    return TopicPartition(topic, partition)


@pytest.fixture(autouse=True)
def restore_registry():
    saved = dict(registry_module._registry)
    yield
    registry_module._registry.clear()
    registry_module._registry.update(saved)


class FirstTakesAll(PartitionAssignor):
    name = "first-takes-all"

    def assign_partitions(self, partitions_per_topic, subscriptions):
        first = min(subscriptions)
        return {first: [tp(t, p) for t in subscriptions[first].topics if t in partitions_per_topic
                        for p in range(partitions_per_topic[t])]}


# -- registry -----------------------------------------------------------------------------------

def test_builtins_are_registered_under_kafka_names():
    assert available_assignors() == ["cooperative-sticky", "range", "roundrobin", "sticky"]
    for name, cls in [("range", RangeAssignor), ("roundrobin", RoundRobinAssignor),
                      ("sticky", StickyAssignor), ("cooperative-sticky", CooperativeStickyAssignor)]:
        assignor = get_assignor(name)
        assert type(assignor) is cls and assignor.name == name


def test_registered_class_gives_a_fresh_instance_each_time():
    assert get_assignor("range") is not get_assignor("range")


def test_unknown_name_raises_a_key_error_listing_the_known_names():
    with pytest.raises(UnknownAssignorError) as info:
        get_assignor("rnage")
    assert isinstance(info.value, KeyError) and isinstance(info.value, OffsetlogError)
    assert "rnage" in str(info.value) and "range" in str(info.value)


def test_register_custom_class_as_decorator_and_use_it():
    assert register_assignor(FirstTakesAll) is FirstTakesAll
    assignor = get_assignor("first-takes-all")
    subs = {"b": Subscription(["t"]), "a": Subscription(["t"])}
    assert assignor.assign({"t": 2}, subs) == {"a": [tp("t", 0), tp("t", 1)], "b": []}


def test_register_instance_returns_that_instance():
    instance = FirstTakesAll()
    register_assignor(instance)
    assert get_assignor("first-takes-all") is instance


def test_registering_a_taken_name_needs_replace():
    class MyRange(RangeAssignor):
        pass

    with pytest.raises(AssignorArgumentError, match="already registered"):
        register_assignor(MyRange)
    assert type(get_assignor("range")) is RangeAssignor
    register_assignor(MyRange, replace=True)
    assert type(get_assignor("range")) is MyRange


def test_registering_the_same_class_twice_is_harmless():
    register_assignor(RangeAssignor)
    assert type(get_assignor("range")) is RangeAssignor


def test_register_rejects_what_is_not_a_usable_assignor():
    class Nameless(PartitionAssignor):
        def assign_partitions(self, partitions_per_topic, subscriptions):
            return {}

    class Abstract(PartitionAssignor):
        name = "abstract"

    with pytest.raises(TypeError):
        register_assignor(object)
    with pytest.raises(TypeError):
        register_assignor("range")
    with pytest.raises(TypeError):
        register_assignor(Abstract)
    with pytest.raises(AssignorArgumentError):
        register_assignor(Nameless)


# -- base class ----------------------------------------------------------------------------------

def test_custom_assignor_result_is_completed_and_sorted():
    class Backwards(PartitionAssignor):
        name = "backwards"

        def assign_partitions(self, partitions_per_topic, subscriptions):
            return {"a": [("t", 2), tp("t", 0), tp("t", 1)]}

    subs = {"a": Subscription(["t"]), "b": Subscription(["t"])}
    assert Backwards().assign({"t": 3}, subs) == {"a": [tp("t", 0), tp("t", 1), tp("t", 2)], "b": []}


def test_assign_partitions_sees_only_subscribed_topics_with_partitions():
    seen = {}

    class Spy(PartitionAssignor):
        name = "spy"

        def assign_partitions(self, partitions_per_topic, subscriptions):
            seen.update(partitions_per_topic)
            return {"a": [tp(t, p) for t, n in partitions_per_topic.items() for p in range(n)]}

    Spy().assign({"read": 2, "empty": 0, "unread": 5}, {"a": Subscription(["read", "empty", "missing"])})
    assert seen == {"read": 2}


@pytest.mark.parametrize("bad,message", [
    ({"stranger": [tp("t", 0)]}, "unknown member"),
    ({"a": [tp("t", 0)], "b": [tp("t", 0)]}, "twice"),
    ({"a": [tp("t", 0), tp("t", 0)]}, "twice"),
    ({"a": [tp("t", 3)]}, "does not exist"),
    ({"a": [tp("u", 0)]}, "does not subscribe"),
])
def test_impossible_results_of_a_custom_assignor_are_refused(bad, message):
    class Broken(PartitionAssignor):
        name = "broken"

        def assign_partitions(self, partitions_per_topic, subscriptions):
            return bad

    subs = {"a": Subscription(["t"]), "b": Subscription(["t", "u"])}
    with pytest.raises(InvalidAssignmentError, match=message):
        Broken().assign({"t": 3, "u": 1}, subs)


def test_bad_arguments_are_refused():
    subs = {"a": Subscription(["t"])}
    with pytest.raises(AssignorArgumentError):
        RangeAssignor().assign({"t": -1}, subs)
    with pytest.raises(TypeError):
        RangeAssignor().assign({"t": "3"}, subs)
    with pytest.raises(TypeError):
        RangeAssignor().assign({"t": True}, subs)
    with pytest.raises(TypeError):
        RangeAssignor().assign({"t": 3}, {"a": ["t"]})
    with pytest.raises(TypeError):
        RangeAssignor().assign([("t", 3)], subs)


# -- Subscription --------------------------------------------------------------------------------

def test_subscription_defaults_and_normalisation():
    a, b = Subscription(["t"]), Subscription(["t"])
    assert a.owned_partitions == () and a.generation_id == -1 and a.user_data is None
    assert a.group_instance_id is None and a == b and hash(a) == hash(b)
    s = Subscription(["t", "u"], user_data=bytearray(b"x"), owned_partitions=[("t", 1)], generation_id=4,
                     group_instance_id="i")
    assert s.topics == ("t", "u") and s.user_data == b"x" and s.owned_partitions == (tp("t", 1),)
    assert isinstance(s.owned_partitions[0], TopicPartition)
    assert Subscription(["u", "t", "u"]).topics == ("u", "t")  # a set, in first-seen order


def test_subscription_keeps_no_reference_to_caller_lists():
    topics, owned = ["t"], [tp("t", 0)]
    s = Subscription(topics, owned_partitions=owned)
    topics.append("u")
    owned.append(tp("t", 1))
    assert s.topics == ("t",) and s.owned_partitions == (tp("t", 0),)
    with pytest.raises(AttributeError):
        s.topics = ("x",)


@pytest.mark.parametrize("kwargs", [
    {"topics": "t"}, {"topics": [1]}, {"topics": ["t"], "owned_partitions": ["t-0"]},
    {"topics": ["t"], "generation_id": "1"}, {"topics": ["t"], "user_data": "x"},
    {"topics": ["t"], "group_instance_id": 5},
])
def test_subscription_rejects_wrong_types(kwargs):
    with pytest.raises(TypeError):
        Subscription(**kwargs)


# -- exports and purity --------------------------------------------------------------------------

def test_public_exports():
    contract = {"PartitionAssignor", "Subscription", "RangeAssignor", "RoundRobinAssignor", "StickyAssignor",
                "CooperativeStickyAssignor", "get_assignor", "register_assignor", "choose_protocol"}
    assert contract <= set(assignors.__all__)
    for name in assignors.__all__:
        assert getattr(assignors, name) is not None, name


def test_assignor_modules_do_no_io_and_use_no_clock_or_randomness():
    forbidden = {"time", "random", "os", "io", "socket", "threading", "datetime", "uuid", "secrets"}
    package = pathlib.Path(assignors.__file__).parent
    for path in package.glob("*.py"):
        tree = ast.parse(path.read_text())
        for node in ast.walk(tree):
            names = []
            if isinstance(node, ast.Import):
                names = [a.name.split(".")[0] for a in node.names]
            elif isinstance(node, ast.ImportFrom) and node.module:
                names = [node.module.split(".")[0]]
            assert not forbidden & set(names), f"{path.name} imports {forbidden & set(names)}"
            if isinstance(node, ast.Call) and isinstance(node.func, ast.Name):
                assert node.func.id not in {"open", "print", "input", "hash", "id"}, f"{path.name}: {node.func.id}()"


HASH_SCRIPT = """
import random
from offsetlog.assignors import get_assignor, Subscription
rnd = random.Random(7)
topics = [f"topic-{i}" for i in range(12)]
ppt = {t: rnd.randint(1, 9) for t in topics}
subs = {f"member-{i}": Subscription(rnd.sample(topics, rnd.randint(1, 12)),
        owned_partitions=[(t, rnd.randrange(9)) for t in rnd.sample(topics, 3)], generation_id=rnd.randint(-1, 2))
        for i in range(25)}
for name in ("range", "roundrobin", "sticky", "cooperative-sticky"):
    print(name, sorted(get_assignor(name).assign(ppt, subs).items()))
"""


def test_results_do_not_depend_on_string_hash_randomisation():
    """Set and dict iteration orders of str depend on PYTHONHASHSEED; results must not."""
    outputs = set()
    for seed in ("1", "2"):
        env = dict(os.environ, PYTHONHASHSEED=seed)
        run = subprocess.run([sys.executable, "-c", HASH_SCRIPT], env=env, capture_output=True, text=True,
                             cwd=pathlib.Path(assignors.__file__).parents[2], check=True)
        outputs.add(run.stdout)
    assert len(outputs) == 1
