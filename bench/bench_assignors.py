"""Partition assignors on large groups (the scenarios of ``offsetlog.bench.assignors``).

The headline group: 1000 members, 100 topics of 100 partitions, all members reading all topics,
one member leaving a balanced group. Also the same group with mixed subscriptions (the general
sticky algorithm) and a fresh assignment by every assignor for reference. Inputs are built once
per module and not timed; nothing here asserts a time.

    .venv/bin/pytest bench/bench_assignors.py -p no:cacheprovider --benchmark-only
"""

from __future__ import annotations

import pytest

from offsetlog.assignors import Subscription, get_assignor
from offsetlog.bench.assignors import member_leaves_scenario, mixed_subscriptions_scenario

ROUNDS = 3


@pytest.fixture(scope="module")
def member_leaves():
    return member_leaves_scenario()


@pytest.fixture(scope="module")
def mixed_member_leaves():
    return mixed_subscriptions_scenario()


@pytest.fixture(scope="module")
def fresh_group(member_leaves):
    partitions_per_topic, subscriptions = member_leaves
    return partitions_per_topic, {m: Subscription(s.topics) for m, s in subscriptions.items()}


@pytest.mark.parametrize("name", ["sticky", "cooperative-sticky"])
@pytest.mark.benchmark(group="assignors: 1000 members x 10 000 partitions, one member leaves")
def test_member_leaves(benchmark, member_leaves, name):
    assignor = get_assignor(name)
    benchmark.pedantic(assignor.assign, args=member_leaves, rounds=ROUNDS, iterations=1, warmup_rounds=1)


@pytest.mark.parametrize("name", ["sticky", "cooperative-sticky"])
@pytest.mark.benchmark(group="assignors: same, a quarter of the members read half the topics")
def test_mixed_subscriptions_member_leaves(benchmark, mixed_member_leaves, name):
    assignor = get_assignor(name)
    benchmark.pedantic(assignor.assign, args=mixed_member_leaves, rounds=ROUNDS, iterations=1, warmup_rounds=1)


@pytest.mark.parametrize("name", ["range", "roundrobin", "sticky", "cooperative-sticky"])
@pytest.mark.benchmark(group="assignors: 999 members x 10 000 partitions, fresh group")
def test_fresh_group(benchmark, fresh_group, name):
    assignor = get_assignor(name)
    benchmark.pedantic(assignor.assign, args=fresh_group, rounds=ROUNDS, iterations=1, warmup_rounds=1)
