"""RangeAssignor: the worked examples of Kafka's docs and the cases of its RangeAssignorTest,
plus a comparison with a plain transcription of Kafka's rule on random groups."""

from __future__ import annotations

import random

import pytest

from offsetlog.assignors import RangeAssignor, Subscription
from offsetlog.types import TopicPartition
from support.assignor_invariants import check_every_assignment  # noqa: F401  (autouse fixture)


def tp(topic: str, partition: int) -> TopicPartition:
    return TopicPartition(topic, partition)


def assign(ppt, subs):
    return RangeAssignor().assign(ppt, subs)


def test_name_and_protocol():
    assert RangeAssignor.name == "range"
    assert [p.value for p in RangeAssignor.supported_protocols] == ["eager"]


def test_seven_partitions_over_five_members_split_2_2_1_1_1():
    subs = {f"c{i}": Subscription(["t"]) for i in range(5)}
    result = assign({"t": 7}, subs)
    assert result == {"c0": [tp("t", 0), tp("t", 1)], "c1": [tp("t", 2), tp("t", 3)],
                      "c2": [tp("t", 4)], "c3": [tp("t", 5)], "c4": [tp("t", 6)]}


def test_docs_example_two_members_two_topics():
    # The example in Kafka's RangeAssignor javadoc: C0 gets the first two of each topic.
    subs = {"C0": Subscription(["t0", "t1"]), "C1": Subscription(["t0", "t1"])}
    result = assign({"t0": 3, "t1": 3}, subs)
    assert result == {"C0": [tp("t0", 0), tp("t0", 1), tp("t1", 0), tp("t1", 1)],
                      "C1": [tp("t0", 2), tp("t1", 2)]}


def test_mixed_subscriptions_of_the_roundrobin_docs_example():
    subs = {"C0": Subscription(["t0"]), "C1": Subscription(["t0", "t1"]),
            "C2": Subscription(["t0", "t1", "t2"])}
    result = assign({"t0": 1, "t1": 2, "t2": 3}, subs)
    assert result == {"C0": [tp("t0", 0)], "C1": [tp("t1", 0)],
                      "C2": [tp("t1", 1), tp("t2", 0), tp("t2", 1), tp("t2", 2)]}


def test_one_member_no_topic_gets_empty_list():
    assert assign({}, {"c1": Subscription([])}) == {"c1": []}


def test_one_member_nonexistent_topic_gets_empty_list():
    assert assign({}, {"c1": Subscription(["topic1"])}) == {"c1": []}


def test_topic_with_zero_partitions_is_skipped():
    assert assign({"topic1": 0}, {"c1": Subscription(["topic1"])}) == {"c1": []}


def test_no_members_gives_empty_result():
    assert assign({"t": 3}, {}) == {}


def test_only_assigns_partitions_from_subscribed_topics():
    result = assign({"topic1": 3, "other": 3}, {"c1": Subscription(["topic1"])})
    assert result == {"c1": [tp("topic1", 0), tp("topic1", 1), tp("topic1", 2)]}


def test_one_member_multiple_topics():
    result = assign({"topic1": 1, "topic2": 2}, {"c1": Subscription(["topic1", "topic2"])})
    assert result == {"c1": [tp("topic1", 0), tp("topic2", 0), tp("topic2", 1)]}


def test_two_members_one_partition_second_gets_nothing():
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


def test_members_sorted_by_id_not_by_insertion_order():
    subs = {"b": Subscription(["t"]), "a": Subscription(["t"])}
    assert assign({"t": 3}, subs) == {"b": [tp("t", 2)], "a": [tp("t", 0), tp("t", 1)]}


def test_two_static_members_ordered_by_instance_id_not_member_id():
    subs = {"consumer-b": Subscription(["topic1", "topic2"], group_instance_id="instance1"),
            "consumer-a": Subscription(["topic1", "topic2"], group_instance_id="instance2")}
    result = assign({"topic1": 3, "topic2": 3}, subs)
    assert result["consumer-b"] == [tp("topic1", 0), tp("topic1", 1), tp("topic2", 0), tp("topic2", 1)]
    assert result["consumer-a"] == [tp("topic1", 2), tp("topic2", 2)]


def test_static_member_sorts_before_dynamic_member():
    subs = {"consumer-b": Subscription(["topic1", "topic2"], group_instance_id="instance1"),
            "consumer-a": Subscription(["topic1", "topic2"])}
    result = assign({"topic1": 3, "topic2": 3}, subs)
    assert result["consumer-b"] == [tp("topic1", 0), tp("topic1", 1), tp("topic2", 0), tp("topic2", 1)]
    assert result["consumer-a"] == [tp("topic1", 2), tp("topic2", 2)]


def test_static_member_assignment_persists_when_dynamic_member_replaced():
    subs = {f"consumer{i}": Subscription(["topic1", "topic2"], group_instance_id=f"instance{i}")
            for i in (1, 2, 3)}
    subs["consumer4"] = Subscription(["topic1", "topic2"])
    expected = {"consumer1": [tp("topic1", 0), tp("topic1", 1), tp("topic2", 0)],
                "consumer2": [tp("topic1", 2), tp("topic2", 1)],
                "consumer3": [tp("topic1", 3), tp("topic2", 2)],
                "consumer4": [tp("topic1", 4), tp("topic2", 3)]}
    assert assign({"topic1": 5, "topic2": 4}, subs) == expected

    del subs["consumer4"]
    subs["consumer5"] = Subscription(["topic1", "topic2"])
    expected["consumer5"] = expected.pop("consumer4")
    assert assign({"topic1": 5, "topic2": 4}, subs) == expected


def test_static_member_assignment_persists_after_member_ids_change():
    subs = {f"consumer{i}": Subscription(["topic1", "topic2"], group_instance_id=f"instance{i}")
            for i in (1, 2, 3)}

    def by_instance(result, subs):
        return {subs[m].group_instance_id: parts for m, parts in result.items()}

    first = by_instance(assign({"topic1": 5, "topic2": 5}, subs), subs)
    assert first == {"instance1": [tp("topic1", 0), tp("topic1", 1), tp("topic2", 0), tp("topic2", 1)],
                     "instance2": [tp("topic1", 2), tp("topic1", 3), tp("topic2", 2), tp("topic2", 3)],
                     "instance3": [tp("topic1", 4), tp("topic2", 4)]}
    renamed = {"consumer1": subs["consumer1"], "consumer5": subs["consumer2"], "consumer4": subs["consumer3"]}
    assert by_instance(assign({"topic1": 5, "topic2": 5}, renamed), renamed) == first


def test_member_ids_compared_as_java_compares_strings():
    # U+FF5E is above the surrogates U+D800..U+DFFF used for U+1F600 in UTF-16, so Java puts
    # "\U0001F600" first while Python's code-point order puts "\uFF5E" first.
    subs = {"\uff5e": Subscription(["t"]), "\U0001f600": Subscription(["t"])}
    assert assign({"t": 1}, subs) == {"\uff5e": [], "\U0001f600": [tp("t", 0)]}


def kafka_range(ppt, subs):
    """Kafka's rule, transcribed plainly: per topic, sorted subscribers, first n % m get one more."""
    def key(m):
        iid = subs[m].group_instance_id
        return (0, iid.encode("utf-16-be", "surrogatepass")) if iid is not None else \
            (1, m.encode("utf-16-be", "surrogatepass"))
    result = {m: [] for m in subs}
    for topic, n in ppt.items():
        members = sorted((m for m in subs if topic in subs[m].topics), key=key)
        partitions = [tp(topic, p) for p in range(n)]
        for i, m in enumerate(members):
            per, extra = divmod(n, len(members))
            start = per * i + min(i, extra)
            result[m] += partitions[start:start + per + (1 if i < extra else 0)]
    return {m: sorted(p) for m, p in result.items()}


@pytest.mark.parametrize("seed", range(40), ids=lambda s: f"seed={s}")
def test_matches_kafka_rule_on_random_groups(seed):
    rnd = random.Random(seed)
    topics = [f"t{i}" for i in range(rnd.randint(1, 8))]
    ppt = {t: rnd.randint(0, 12) for t in topics if rnd.random() < 0.9}
    subs = {}
    instance_ids = rnd.sample(range(100), 12)  # distinct, as a live group guarantees
    for i in range(rnd.randint(1, 12)):
        chosen = rnd.sample(topics + ["ghost"], rnd.randint(0, len(topics)))
        iid = f"i{instance_ids[i]}" if rnd.random() < 0.3 else None
        subs[f"m{rnd.randint(0, 999):03d}"] = Subscription(chosen, group_instance_id=iid)
    assert assign(ppt, subs) == kafka_range(ppt, subs), f"seed={seed}"
