"""How long the sticky assignors take on a large group: the figure ``offsetlog bench`` reports.

The scenario is the one that matters in production: a big, balanced group in which one member
leaves. 1000 members all subscribe to 100 topics of 100 partitions (10 000 partitions); the
previous assignment (each member's ``owned_partitions``, generation 1) is what the sticky assignor
itself produced for the full group; then the member in the middle leaves and the assignment is
recomputed. Building the inputs and the previous assignment is not timed.

Run it directly for a quick figure: ``python -m offsetlog.bench.assignors [members topics partitions]``.
"""

from __future__ import annotations

import sys
import time

from offsetlog.assignors import CooperativeStickyAssignor, StickyAssignor, Subscription

#: the assignors timed, by the name the result is reported under
ASSIGNORS = {"sticky": StickyAssignor, "cooperative-sticky": CooperativeStickyAssignor}


def member_leaves_scenario(members: int = 1000, topics: int = 100, partitions: int = 100
                           ) -> tuple[dict[str, int], dict[str, Subscription]]:
    """``(partitions_per_topic, subscriptions)`` after one member left a balanced group."""
    names = [f"topic-{t:04d}" for t in range(topics)]
    partitions_per_topic = dict.fromkeys(names, partitions)
    ids = [f"consumer-{m:05d}" for m in range(members)]
    before = StickyAssignor().assign(partitions_per_topic, {m: Subscription(names) for m in ids})
    leaving = ids[members // 2]
    subscriptions = {m: Subscription(names, owned_partitions=before[m], generation_id=1)
                     for m in ids if m != leaving}
    return partitions_per_topic, subscriptions


def mixed_subscriptions_scenario(members: int = 1000, topics: int = 100, partitions: int = 100
                                 ) -> tuple[dict[str, int], dict[str, Subscription]]:
    """Like :func:`member_leaves_scenario`, but every fourth member reads only the first half of
    the topics, so the sticky assignors take their general (slower) path."""
    names = [f"topic-{t:04d}" for t in range(topics)]
    partitions_per_topic = dict.fromkeys(names, partitions)
    ids = [f"consumer-{m:05d}" for m in range(members)]
    topics_of = {m: names[: max(1, topics // 2)] if i % 4 == 0 else names for i, m in enumerate(ids)}
    before = StickyAssignor().assign(partitions_per_topic, {m: Subscription(topics_of[m]) for m in ids})
    leaving = ids[members // 2]
    subscriptions = {m: Subscription(topics_of[m], owned_partitions=before[m], generation_id=1)
                     for m in ids if m != leaving}
    return partitions_per_topic, subscriptions


def run_assignor_benchmark(members: int = 1000, topics: int = 100, partitions: int = 100
                           ) -> dict[str, float]:
    """Seconds each sticky assignor takes to reassign after one member leaves (one run each).

    :return: ``{"sticky": seconds, "cooperative-sticky": seconds}``
    """
    partitions_per_topic, subscriptions = member_leaves_scenario(members, topics, partitions)
    seconds: dict[str, float] = {}
    for name, cls in ASSIGNORS.items():
        assignor = cls()
        start = time.perf_counter()
        assignor.assign(partitions_per_topic, subscriptions)
        seconds[name] = time.perf_counter() - start
    return seconds


if __name__ == "__main__":  # pragma: no cover
    args = [int(a) for a in sys.argv[1:4]]
    for assignor_name, s in run_assignor_benchmark(*args).items():
        print(f"{assignor_name:>20}: {s:.3f} s")
