"""Apache Kafka as the judge of random sessions of a group whose members speak both protocols
(KIP-848's online migration): member ``a`` speaks the consumer group protocol
(ConsumerGroupHeartbeat), member ``k`` the classic one (JoinGroup, SyncGroup, Heartbeat,
LeaveGroup), static now and then, when a new process of it may take its place. Their joins
and leaves turn the group from a classic group into a consumer group and back (``a`` joining
a classic group upgrades it; ``a`` leaving while ``k`` stays downgrades it), and between them
each heartbeats, ``k`` rejoins and syncs, both commit offsets at their epoch or generation, an
older or a newer one, and a bystander fetches, describes the group both ways and deletes it.
Every answer is compared in full but for ConsumerGroupHeartbeat's interval
(``without_interval``: the test broker assigns in the heartbeat, as offsetlog does). ``k`` is
the only classic member, so no JoinGroup is ever parked: the requests are answered in turn. A
failing session prints its seed: rerun it with ``OFFSETLOG_TEST_SEED``."""

from __future__ import annotations

import random

import pytest

from support.kafka_consumer_steps import (
    DESCRIBE,
    epoch_of,
    hb,
    owned_of,
    save_owned,
    without_interval,
)
from support.kafka_diff import Req, compare
from support.kafka_steps import (
    commit,
    delete_group,
    describe,
    fetch,
    heartbeat,
    in_name_order,
    join,
    join_body,
    leader_sync,
    leave,
    ref,
    session_counts,
)

#: sessions per run and steps
SESSIONS, STEPS = session_counts(10, 16)
SIDE = "c"  #: the bystander's connection


def random_mixed_session(rng: random.Random, g: str, seen: set | None = None) -> list:
    """``STEPS`` random requests of ``a`` (consumer protocol), ``k`` (classic) and a
    bystander, in group ``g``; ``seen`` collects the migrations the session makes."""
    seen = set() if seen is None else seen
    steps: list = []
    # (range orders members by id: a's sorts before any id a target makes for k, on both)
    a_id = f"!{g}-a"
    a_in = a_known = False  # a is in the group / has joined once (its epoch is saved)
    k_joined = False  # k has a member id and a generation (saved as k, k_gen)
    # k is static now and then (instance id "K"): then a new process of it may join in its
    # place, without a member id
    k_inst = "K" if rng.random() < 0.4 else None
    save_a = {**epoch_of("a_e"), **save_owned("a_o")}
    for _ in range(STEPS):
        roll = rng.random()
        if roll < 0.14 and (not a_in or rng.random() < 0.3):  # a joins, or joins again
            topics = ("orders",) if rng.random() < 0.7 else ("orders", "events")
            steps.append(hb(g, a_id, 0, join=True, topics=topics, save=save_a))
            if k_joined and not a_in:
                seen.add("upgrade")
            a_in = a_known = True
        elif roll < 0.28 and a_in:  # a heartbeats, reporting what it owns or not
            owned = owned_of("a_o") if rng.random() < 0.8 else None
            steps.append(hb(g, a_id, ref("a_e"), owned=owned, save=save_a))
        elif roll < 0.32 and a_in:  # a leaves (the group may turn classic again)
            steps.append(hb(g, a_id, -1))
            if k_joined:
                seen.add("downgrade")
            a_in = False
        elif roll < 0.46:  # k joins (a new member id first) or rejoins with its own
            seen.add("classic join to a consumer group" if a_in else "classic join")
            if k_inst and (not k_joined or rng.random() < 0.3):
                seen.add("static classic process")
                steps.append(Req(11, rng.choice((5, 7, 9)), join_body(g, "", inst=k_inst),
                                 conn="k", save={"k": lambda r: r.member_id,
                                                 "k_gen": lambda r: r.generation_id}))
            elif k_joined:
                steps.append(Req(11, 5, join_body(g, lambda c: c["k"], inst=k_inst), conn="k",
                                 save={"k_gen": lambda r: r.generation_id}))
            else:
                steps += join(g, rng.choice((5, 7, 9)), as_="k", conn="k")
            k_joined = True
        elif roll < 0.54 and k_joined:  # k syncs (naming assignments, as a leader does)
            steps.append(leader_sync(g, rng.choice((3, 5)), "k", conn="k", inst=k_inst))
        elif roll < 0.64 and k_joined:  # k heartbeats, at its generation or another
            steps.append(heartbeat(g, rng.choice((3, 4)) if k_inst else rng.choice((2, 4)), "k",
                                   conn="k", inst=k_inst,
                                   gen=ref("k_gen", rng.choice((0, 0, 0, 1, -1)))))
        elif roll < 0.67 and k_joined:  # k leaves
            steps.append(leave(g, 3, "k", conn="k", inst=k_inst))
            k_joined = False
        elif roll < 0.74 and a_known:  # a's commit at its epoch, an older or a newer one
            topic, part = rng.choice((("orders", 0), ("orders", 3), ("events", 1)))
            steps.append(commit(g, 9, conn="a", topic=topic, partition=part,
                                offset=rng.randint(0, 99), member=a_id,
                                gen=ref("a_e", rng.choice((0, 0, 0, 1, -1)))))
        elif roll < 0.81 and k_joined:  # k's commit at its generation or another
            topic, part = rng.choice((("orders", 0), ("orders", 3), ("events", 1)))
            steps.append(commit(g, rng.choice((7, 8)) if k_inst else rng.choice((2, 5, 8)),
                                conn="k", topic=topic,
                                partition=part, offset=rng.randint(0, 99),
                                member=lambda c: c["k"], inst=k_inst,
                                gen=ref("k_gen", rng.choice((0, 0, 0, 1, -1)))))
        elif roll < 0.86:
            steps.append(fetch(g, rng.randint(2, 9), conn=SIDE,
                               topics=(("orders", [0, 3]), ("events", [0, 1]))))
        elif roll < 0.91:
            steps.append(describe(g, rng.randint(0, 5), conn=SIDE))
        elif roll < 0.96:
            steps.append(Req(DESCRIBE, rng.randint(0, 1), dict(
                group_ids=[g], include_authorized_operations=False), conn=SIDE))
        else:
            steps.append(delete_group(g, rng.randint(0, 2), conn=SIDE))
    return steps


@pytest.mark.parametrize("n", range(SESSIONS))
def test_random_mixed_group_session_answers_as_kafka(targets, gid, n, seeded_random):
    compare(*targets, random_mixed_session(seeded_random, gid),
            view=lambda answers: without_interval(in_name_order(answers)))


def test_the_sessions_migrate_both_ways():
    """(No Kafka.) Forty sessions make every migration: a classic group upgraded by ``a``'s
    join, a consumer group downgraded by ``a``'s leave, ``k`` joining either kind."""
    seen: set = set()
    rng = random.Random(7)
    for i in range(40):
        random_mixed_session(rng, f"g{i}", seen)
    assert seen == {"upgrade", "downgrade", "classic join", "classic join to a consumer group",
                    "static classic process"}
