"""Random membership churn (seeded): members join, close, stall, stop polling and restart, and
at every step no partition has two owners among the group's current members; once the churn
stops, the group settles with every partition owned exactly once.

Replay a failure with ``OFFSETLOG_TEST_SEED=<seed>`` (printed on failure).
"""

from __future__ import annotations

import pytest

from test_member_harness import GROUP, MAX_POLL, SESSION, Harness, check_exact_cover, partitions

TOPICS = {"t": 7, "u": 3}
ALL = partitions("t", 7) | partitions("u", 3)


def check_no_double_owner(h: Harness) -> None:
    d = h.store.describe_group(GROUP)
    in_group = {m.member_id for m in d.members} if d is not None else set()
    owner = {}
    for m in h.live():
        if m.member_id not in in_group:
            continue  # evicted or replaced and not told yet: it will report them lost
        for tp in m.assignment():
            assert tp not in owner, f"{tp} owned by {owner[tp]} and {m.member_id}: {h.describe()}"
            owner[tp] = m.member_id


@pytest.mark.parametrize("assignors", [("range",), ("sticky",), ("cooperative-sticky",)])
def test_random_churn_keeps_single_ownership(store_dir, clock, seeded_random, assignors):
    rng = seeded_random
    h = Harness(store_dir, clock, topics=TOPICS)
    names = iter(f"m{i}" for i in range(1000))
    resume: dict[int, int] = {}  # id(member) -> step at which it comes back to life
    try:
        for _ in range(2):
            h.member(next(names), assignors=assignors)
        for step in range(160):
            live = h.live()
            r = rng.random()
            if r < 0.06 and len(live) < 5:
                static = rng.random() < 0.4
                h.member(next(names), assignors=assignors,
                         group_instance_id=f"inst-{rng.randrange(1000)}" if static else None)
            elif r < 0.09 and len(live) > 1:
                victim = rng.choice(live)
                victim.close()
            elif r < 0.11 and live:
                victim = rng.choice(live)
                (h.stalled if rng.random() < 0.5 else h.not_polling).add(id(victim))
                resume[id(victim)] = step + rng.choice([4, (SESSION + MAX_POLL) // 500])
            elif r < 0.13:
                static = [m for m in live if m.group_instance_id and id(m) not in resume]
                if static:  # a static member's process restarts
                    old = rng.choice(static)
                    old.close()
                    h.member(next(names), assignors=assignors,
                             group_instance_id=old.group_instance_id)
            for key, at in list(resume.items()):
                if at <= step:
                    h.stalled.discard(key)
                    h.not_polling.discard(key)
                    del resume[key]
            h.step()
            check_no_double_owner(h)
        h.stalled.clear()
        h.not_polling.clear()
        h.run_until(h.stable, max_ms=300_000)
        check_no_double_owner(h)
        check_exact_cover(h.live(), ALL)
    finally:
        h.close()
