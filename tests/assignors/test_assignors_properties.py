"""Properties of all assignors over generated groups (hypothesis) and over seeded random
sequences of rebalances (members joining and leaving, subscriptions changing).

The invariant checker runs on every assignment computed here; the tests below add the
properties that relate one assignment to another.
"""

from __future__ import annotations

import random
from dataclasses import replace

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from offsetlog.assignors import (
    CooperativeStickyAssignor,
    RangeAssignor,
    RoundRobinAssignor,
    StickyAssignor,
    Subscription,
)
from offsetlog.types import TopicPartition
from support.assignor_invariants import check_every_assignment, rebalance, resubscribe  # noqa: F401

ALL = [RangeAssignor(), RoundRobinAssignor(), StickyAssignor(), CooperativeStickyAssignor()]
STICKY = [StickyAssignor(), CooperativeStickyAssignor()]
PROPERTY_SETTINGS = settings(max_examples=150, deadline=None,
                             suppress_health_check=[HealthCheck.function_scoped_fixture])

TOPICS = ["a", "b", "c", "d", "e"]


@st.composite
def groups(draw, *, identical: bool = False):
    """(partitions_per_topic, subscriptions) with previous ownership, conflicting claims,
    unknown topics, stale generations and static members all possible."""
    ppt = {t: draw(st.integers(0, 8)) for t in draw(st.lists(st.sampled_from(TOPICS), min_size=1, unique=True))}
    universe = [TopicPartition(t, p) for t in TOPICS + ["ghost"] for p in range(9)]
    members = draw(st.lists(st.text("mnxyz", min_size=1, max_size=3), min_size=1, max_size=8, unique=True))
    shared = draw(st.lists(st.sampled_from(TOPICS + ["ghost"]), unique=True))
    subs = {}
    for i, m in enumerate(members):
        topics = shared if identical else draw(st.lists(st.sampled_from(TOPICS + ["ghost"]), unique=True))
        owned = draw(st.lists(st.sampled_from(universe), max_size=10))
        subs[m] = Subscription(topics, owned_partitions=owned, generation_id=draw(st.integers(-1, 3)),
                               group_instance_id=draw(st.sampled_from([None, None, f"i{i}"])))
    return ppt, subs


@PROPERTY_SETTINGS
@given(group=groups(), assignor=st.sampled_from(ALL))
def test_invariants_hold_on_generated_groups(group, assignor):
    ppt, subs = group
    assignor.assign(ppt, subs)  # checked by the autouse fixture


@PROPERTY_SETTINGS
@given(group=groups(identical=True), assignor=st.sampled_from(ALL))
def test_invariants_hold_on_generated_groups_with_identical_subscriptions(group, assignor):
    ppt, subs = group
    assignor.assign(ppt, subs)


@PROPERTY_SETTINGS
@given(group=groups(), assignor=st.sampled_from(ALL), data=st.data())
def test_result_does_not_depend_on_input_order_and_inputs_are_untouched(group, assignor, data):
    ppt, subs = group
    before = (dict(ppt), dict(subs))
    result = assignor.assign(ppt, subs)
    assert (ppt, subs) == before
    members = data.draw(st.permutations(list(subs)))
    topics = data.draw(st.permutations(list(ppt)))
    shuffled_subs = {m: replace(subs[m], owned_partitions=tuple(reversed(subs[m].owned_partitions)),
                                topics=tuple(reversed(subs[m].topics))) for m in members}
    assert assignor.assign({t: ppt[t] for t in topics}, shuffled_subs) == result


@PROPERTY_SETTINGS
@given(group=groups(), assignor=st.sampled_from(STICKY))
def test_a_settled_assignment_is_kept_as_is(group, assignor):
    ppt, subs = group
    settled = rebalance(assignor, ppt, subs)
    generation = max(s.generation_id for s in subs.values()) + 1
    assert assignor.assign(ppt, resubscribe(subs, settled, generation)) == settled


@PROPERTY_SETTINGS
@given(group=groups(), data=st.data())
def test_cooperative_result_is_the_sticky_result_minus_what_must_be_revoked_first(group, data):
    ppt, subs = group
    sticky = StickyAssignor().assign(ppt, subs)
    coop = CooperativeStickyAssignor().assign(ppt, subs)
    for m in subs:
        assert set(coop[m]) <= set(sticky[m])
        for p in set(sticky[m]) - set(coop[m]):
            assert any(p in s.owned_partitions for other, s in subs.items() if other != m), p


@PROPERTY_SETTINGS
@given(group=groups(identical=True), assignor=st.sampled_from(STICKY), data=st.data())
def test_when_a_member_leaves_a_settled_group_the_others_keep_everything(group, assignor, data):
    ppt, subs = group
    settled = rebalance(assignor, ppt, subs)
    subs = resubscribe(subs, settled, max(s.generation_id for s in subs.values()) + 1)
    leaving = data.draw(st.sampled_from(sorted(subs)))
    del subs[leaving]
    after = rebalance(assignor, ppt, subs)
    for m in subs:
        assert set(settled[m]) <= set(after[m]), m


@PROPERTY_SETTINGS
@given(group=groups(identical=True), assignor=st.sampled_from(STICKY))
def test_when_a_member_joins_a_settled_group_the_others_only_give_up_partitions(group, assignor):
    ppt, subs = group
    settled = rebalance(assignor, ppt, subs)
    generation = max(s.generation_id for s in subs.values()) + 1
    subs = resubscribe(subs, settled, generation)
    subs["newcomer"] = Subscription(next(iter(subs.values())).topics, generation_id=generation)
    after = rebalance(assignor, ppt, subs)
    for m in settled:
        assert set(after[m]) <= set(settled[m]), m


def random_group_history(seed: int, assignor, rounds: int = 12):
    """A group living through ``rounds`` rebalances: members join and leave, subscriptions
    and partition counts change; each member reports what it was last assigned."""
    rnd = random.Random(seed)
    topics = [f"t{i}" for i in range(rnd.randint(1, 6))]
    ppt = {t: rnd.randint(1, 12) for t in topics}
    subs = {f"c{i:02d}": Subscription(rnd.sample(topics, rnd.randint(1, len(topics))))
            for i in range(rnd.randint(1, 10))}
    next_id = len(subs)
    for generation in range(1, rounds + 1):
        result = rebalance(assignor, ppt, subs)
        yield ppt, subs, result
        subs = resubscribe(subs, result, generation)
        event = rnd.random()
        if event < 0.25 and len(subs) > 1:
            del subs[rnd.choice(sorted(subs))]
        elif event < 0.5:
            subs[f"c{next_id:02d}"] = Subscription(rnd.sample(topics, rnd.randint(1, len(topics))),
                                                   generation_id=generation)
            next_id += 1
        elif event < 0.7:
            m = rnd.choice(sorted(subs))
            subs[m] = replace(subs[m], topics=rnd.sample(topics, rnd.randint(1, len(topics))))
        elif event < 0.8:
            t = rnd.choice(topics)
            ppt[t] += rnd.randint(1, 4)  # Kafka only ever adds partitions
        elif event < 0.9:
            # a member misses a rebalance and comes back with an old claim
            m = rnd.choice(sorted(subs))
            subs[m] = replace(subs[m], generation_id=generation - rnd.randint(1, 3))


@pytest.mark.parametrize("assignor", ALL, ids=lambda a: a.name)
@pytest.mark.parametrize("seed", range(15), ids=lambda s: f"seed={s}")
def test_random_group_histories(assignor, seed):
    for _ppt, _subs, _result in random_group_history(seed, assignor):
        pass  # every rebalance is checked by the autouse fixture; failures name the seed


@pytest.mark.parametrize("seed", range(15), ids=lambda s: f"seed={s}")
def test_sticky_moves_fewer_partitions_than_roundrobin(seed):
    """Over a history, on the same inputs, the sticky assignor takes fewer partitions away from
    their owners than round robin, which ignores ownership (a sticky assignor that ignored it
    too would fail this)."""
    moved = {"sticky": 0, "roundrobin": 0}
    for ppt, subs, sticky in random_group_history(seed, StickyAssignor()):
        roundrobin = RoundRobinAssignor().assign(ppt, subs)
        for m, s in subs.items():
            moved["sticky"] += len(set(s.owned_partitions) - set(sticky[m]))
            moved["roundrobin"] += len(set(s.owned_partitions) - set(roundrobin[m]))
    assert moved["sticky"] < moved["roundrobin"], f"seed={seed}: {moved}"
