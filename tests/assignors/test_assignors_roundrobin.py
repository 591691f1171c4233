"""RoundRobinAssignor: Kafka's docs examples and RoundRobinAssignorTest cases, plus a comparison
with a literal transcription of Kafka's loop (a circular iterator that skips unsubscribed
members) on random groups, which checks the binary-search shortcut used in the implementation."""

from __future__ import annotations

import random

import pytest

from offsetlog.assignors import RoundRobinAssignor, Subscription
from offsetlog.types import TopicPartition
from support.assignor_invariants import check_every_assignment  # noqa: F401  (autouse fixture)


def tp(topic: str, partition: int) -> TopicPartition:
    return TopicPartition(topic, partition)


def assign(ppt, subs):
    return RoundRobinAssignor().assign(ppt, subs)


def test_name_and_protocol():
    assert RoundRobinAssignor.name == "roundrobin"
    assert [p.value for p in RoundRobinAssignor.supported_protocols] == ["eager"]


def test_docs_example_mixed_subscriptions():
    subs = {"C0": Subscription(["t0"]), "C1": Subscription(["t0", "t1"]),
            "C2": Subscription(["t0", "t1", "t2"])}
    result = assign({"t0": 1, "t1": 2, "t2": 3}, subs)
    assert result == {"C0": [tp("t0", 0)], "C1": [tp("t1", 0)],
                      "C2": [tp("t1", 1), tp("t2", 0), tp("t2", 1), tp("t2", 2)]}


def test_docs_example_two_members_two_topics():
    subs = {"C0": Subscription(["t0", "t1"]), "C1": Subscription(["t0", "t1"])}
    result = assign({"t0": 3, "t1": 3}, subs)
    assert result == {"C0": [tp("t0", 0), tp("t0", 2), tp("t1", 1)],
                      "C1": [tp("t0", 1), tp("t1", 0), tp("t1", 2)]}


def test_one_member_no_topic():
    assert assign({}, {"c1": Subscription([])}) == {"c1": []}


def test_one_member_nonexistent_topic():
    assert assign({}, {"c1": Subscription(["topic1"])}) == {"c1": []}


def test_one_member_one_topic():
    assert assign({"topic1": 3}, {"c1": Subscription(["topic1"])}) == \
        {"c1": [tp("topic1", 0), tp("topic1", 1), tp("topic1", 2)]}


def test_only_assigns_partitions_from_subscribed_topics():
    assert assign({"topic1": 3, "other": 3}, {"c1": Subscription(["topic1"])}) == \
        {"c1": [tp("topic1", 0), tp("topic1", 1), tp("topic1", 2)]}


def test_one_member_multiple_topics():
    assert assign({"topic1": 1, "topic2": 2}, {"c1": Subscription(["topic1", "topic2"])}) == \
        {"c1": [tp("topic1", 0), tp("topic2", 0), tp("topic2", 1)]}


def test_two_members_one_partition():
    subs = {"consumer1": Subscription(["topic1"]), "consumer2": Subscription(["topic1"])}
    assert assign({"topic1": 1}, subs) == {"consumer1": [tp("topic1", 0)], "consumer2": []}


def test_two_members_two_partitions():
    subs = {"consumer1": Subscription(["topic1"]), "consumer2": Subscription(["topic1"])}
    assert assign({"topic1": 2}, subs) == {"consumer1": [tp("topic1", 0)], "consumer2": [tp("topic1", 1)]}


def test_multiple_members_mixed_topics():
    subs = {"consumer1": Subscription(["topic1"]), "consumer2": Subscription(["topic1", "topic2"]),
            "consumer3": Subscription(["topic1"])}
    result = assign({"topic1": 3, "topic2": 2}, subs)
    assert result == {"consumer1": [tp("topic1", 0)],
                      "consumer2": [tp("topic1", 1), tp("topic2", 0), tp("topic2", 1)],
                      "consumer3": [tp("topic1", 2)]}


def test_two_dynamic_members_two_topics_six_partitions():
    subs = {"consumer1": Subscription(["topic1", "topic2"]), "consumer2": Subscription(["topic1", "topic2"])}
    result = assign({"topic1": 3, "topic2": 3}, subs)
    assert result == {"consumer1": [tp("topic1", 0), tp("topic1", 2), tp("topic2", 1)],
                      "consumer2": [tp("topic1", 1), tp("topic2", 0), tp("topic2", 2)]}


def test_two_static_members_ordered_by_instance_id():
    subs = {"consumer-b": Subscription(["topic1", "topic2"], group_instance_id="instance1"),
            "consumer-a": Subscription(["topic1", "topic2"], group_instance_id="instance2")}
    result = assign({"topic1": 3, "topic2": 3}, subs)
    assert result == {"consumer-b": [tp("topic1", 0), tp("topic1", 2), tp("topic2", 1)],
                      "consumer-a": [tp("topic1", 1), tp("topic2", 0), tp("topic2", 2)]}


def test_static_member_before_dynamic_member():
    subs = {"consumer-b": Subscription(["topic1", "topic2"], group_instance_id="instance1"),
            "consumer-a": Subscription(["topic1", "topic2"])}
    result = assign({"topic1": 3, "topic2": 3}, subs)
    assert result == {"consumer-b": [tp("topic1", 0), tp("topic1", 2), tp("topic2", 1)],
                      "consumer-a": [tp("topic1", 1), tp("topic2", 0), tp("topic2", 2)]}


def test_static_member_assignment_persists_when_dynamic_member_replaced():
    subs = {f"consumer{i}": Subscription(["topic1", "topic2"], group_instance_id=f"instance{i}")
            for i in (1, 2, 3)}
    subs["consumer4"] = Subscription(["topic1", "topic2"])
    expected = {"consumer1": [tp("topic1", 0), tp("topic2", 1)],
                "consumer2": [tp("topic1", 1), tp("topic2", 2)],
                "consumer3": [tp("topic1", 2)],
                "consumer4": [tp("topic2", 0)]}
    assert assign({"topic1": 3, "topic2": 3}, subs) == expected
    del subs["consumer4"]
    subs["consumer5"] = Subscription(["topic1", "topic2"])
    expected["consumer5"] = expected.pop("consumer4")
    assert assign({"topic1": 3, "topic2": 3}, subs) == expected


def test_static_member_assignment_persists_after_member_ids_change():
    subs = {f"consumer{i}": Subscription(["topic1", "topic2"], group_instance_id=f"instance{i}")
            for i in (1, 2, 3)}

    def by_instance(result, subs):
        return {subs[m].group_instance_id: parts for m, parts in result.items()}

    first = by_instance(assign({"topic1": 5, "topic2": 5}, subs), subs)
    assert first == {"instance1": [tp("topic1", 0), tp("topic1", 3), tp("topic2", 1), tp("topic2", 4)],
                     "instance2": [tp("topic1", 1), tp("topic1", 4), tp("topic2", 2)],
                     "instance3": [tp("topic1", 2), tp("topic2", 0), tp("topic2", 3)]}
    renamed = {"consumer1": subs["consumer1"], "consumer5": subs["consumer2"], "consumer4": subs["consumer3"]}
    assert by_instance(assign({"topic1": 5, "topic2": 5}, renamed), renamed) == first


def test_cycle_resumes_after_the_member_that_took_the_last_partition():
    # a takes x0; b is skipped for y (not subscribed) ... the cursor must sit after c, not after a.
    subs = {"a": Subscription(["x", "y"]), "b": Subscription(["x"]), "c": Subscription(["x", "y"])}
    result = assign({"x": 1, "y": 3}, subs)
    assert result == {"a": [tp("x", 0), tp("y", 1)], "b": [], "c": [tp("y", 0), tp("y", 2)]}


def kafka_roundrobin(ppt, subs):
    """Kafka's loop, transcribed: a circular iterator over sorted members; skip while the member
    at the cursor does not subscribe to the partition's topic, then hand it over and step on."""
    def key(m):
        iid = subs[m].group_instance_id
        return (0, iid.encode("utf-16-be", "surrogatepass")) if iid is not None else \
            (1, m.encode("utf-16-be", "surrogatepass"))
    members = sorted(subs, key=key)
    result = {m: [] for m in subs}
    topics = sorted({t for s in subs.values() for t in s.topics})
    i = 0
    for topic in topics:
        for p in range(ppt.get(topic, 0)):
            while topic not in subs[members[i]].topics:
                i = (i + 1) % len(members)
            result[members[i]].append(tp(topic, p))
            i = (i + 1) % len(members)
    return result


@pytest.mark.parametrize("seed", range(40), ids=lambda s: f"seed={s}")
def test_matches_kafka_loop_on_random_groups(seed):
    rnd = random.Random(seed)
    topics = [f"t{i}" for i in range(rnd.randint(1, 8))]
    ppt = {t: rnd.randint(0, 12) for t in topics if rnd.random() < 0.9}
    subs = {}
    instance_ids = rnd.sample(range(100), 12)
    for i in range(rnd.randint(1, 12)):
        chosen = rnd.sample(topics + ["ghost"], rnd.randint(0, len(topics)))
        iid = f"i{instance_ids[i]}" if rnd.random() < 0.3 else None
        subs[f"m{rnd.randint(0, 999):03d}"] = Subscription(chosen, group_instance_id=iid)
    assert assign(ppt, subs) == kafka_roundrobin(ppt, subs), f"seed={seed}"
