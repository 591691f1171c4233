"""Apache Kafka as the judge of random sessions of a group whose members speak both protocols
(KIP-848's online migration): member ``a`` speaks the consumer group protocol
(ConsumerGroupHeartbeat), members ``k`` and ``l`` the classic one (JoinGroup, SyncGroup,
Heartbeat, LeaveGroup); ``k`` is static now and then and ``l`` always, so a new process of
either may take its place. Their joins and leaves turn the group from a classic group into a
consumer group and back (``a`` joining a classic group upgrades it; ``a`` leaving while ``k``
stays downgrades it), and between them each heartbeats, the classic members rejoin and sync,
all commit offsets at their epoch or generation, an older or a newer one, and a bystander
fetches, describes the group both ways and deletes it. Every answer is compared in full but
for ConsumerGroupHeartbeat's interval (``without_interval``: the test broker assigns in the
heartbeat, as offsetlog does). The requests are answered in turn, so no JoinGroup may be
parked: ``l`` is in the group only beside ``a`` (a classic group of two members would park
each one's JoinGroup until the other's), where the two classic members' partitions move
between them by the consumer group's revocations. A failing session prints its seed: rerun
it with ``OFFSETLOG_TEST_SEED``."""

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


class _Classic:
    """A classic member of the session: its name (its connection, and what its member id and
    generation are saved as), its instance id (None: dynamic) and whether it is in the group."""

    def __init__(self, name: str, inst: str | None) -> None:
        self.name, self.inst, self.joined = name, inst, False


def _classic_step(rng: random.Random, g: str, c: _Classic, roll: float, steps: list) -> str:
    """One request of classic member ``c`` by ``roll`` (0.0-0.35): a join (a new member id
    first, a static new process, or its own id again), a sync, a heartbeat or a leave.
    Returns which."""
    name, inst, gen = c.name, c.inst, c.name + "_gen"
    if roll < 0.14:  # joins (a new member id first) or rejoins with its own
        if inst and (not c.joined or rng.random() < 0.3):
            steps.append(Req(11, rng.choice((5, 7, 9)), join_body(g, "", inst=inst),
                             conn=name, save={name: lambda r: r.member_id,
                                              gen: lambda r: r.generation_id}))
            what = "static process"
        elif c.joined:
            steps.append(Req(11, 5, join_body(g, ref(name), inst=inst), conn=name,
                             save={gen: lambda r: r.generation_id}))
            what = "rejoin"
        else:
            steps += join(g, rng.choice((5, 7, 9)), as_=name, conn=name)
            what = "join"
        c.joined = True
        return what
    if roll < 0.22:  # syncs (naming assignments, as a leader does)
        steps.append(leader_sync(g, rng.choice((3, 5)), name, conn=name, inst=inst))
        return "sync"
    if roll < 0.32:  # heartbeats, at its generation or another
        steps.append(heartbeat(g, rng.choice((3, 4)) if inst else rng.choice((2, 4)), name,
                               conn=name, inst=inst,
                               gen=ref(gen, rng.choice((0, 0, 0, 1, -1)))))
        return "heartbeat"
    steps.append(leave(g, 3, name, conn=name, inst=inst))
    c.joined = False
    return "leave"


def random_mixed_session(rng: random.Random, g: str, seen: set | None = None) -> list:
    """``STEPS`` random requests of ``a`` (consumer protocol), ``k`` and ``l`` (classic) and a
    bystander, in group ``g``; ``seen`` collects the migrations the session makes."""
    seen = set() if seen is None else seen
    steps: list = []
    # (range orders static members by instance id, then the others by member id: a's sorts
    # before any id a target makes for k, on both)
    a_id = f"!{g}-a"
    a_in = a_known = False  # a is in the group / has joined once (its epoch is saved)
    # k is static now and then (instance id "K"): then a new process of it may join in its
    # place, without a member id. l is static always, and in the group only beside a: a
    # classic group of two members parks each JoinGroup until the other's (which the
    # requests, answered in turn, cannot do), and so a leaves only while l is out.
    k = _Classic("k", "K" if rng.random() < 0.4 else None)
    l_ = _Classic("l", "L")
    save_a = {**epoch_of("a_e"), **save_owned("a_o")}
    for _ in range(STEPS):
        roll = rng.random()
        # the classic member a classic request goes to: l when it is in, or may join
        c = l_ if (l_.joined or a_in) and rng.random() < 0.4 else k
        if roll < 0.14 and (not a_in or rng.random() < 0.3):  # a joins, or joins again
            topics = ("orders",) if rng.random() < 0.7 else ("orders", "events")
            steps.append(hb(g, a_id, 0, join=True, topics=topics, save=save_a))
            if (k.joined or l_.joined) and not a_in:
                seen.add("upgrade")
            a_in = a_known = True
        elif roll < 0.28 and a_in:  # a heartbeats, reporting what it owns or not
            owned = owned_of("a_o") if rng.random() < 0.8 else None
            steps.append(hb(g, a_id, ref("a_e"), owned=owned, save=save_a))
        elif roll < 0.32 and a_in and not l_.joined:  # a leaves (the group may turn classic)
            steps.append(hb(g, a_id, -1))
            if k.joined:
                seen.add("downgrade")
            a_in = False
        elif roll < 0.67 and (roll < 0.46 or c.joined):  # a classic member's request
            others, was_in = (k.joined if c is l_ else l_.joined), c.joined
            what = _classic_step(rng, g, c, roll - 0.32, steps)
            if what in ("join", "rejoin", "static process"):
                seen.add("classic join to a consumer group" if a_in else "classic join")
            if what == "static process":
                seen.add("static classic process")
            if c.joined and not was_in and others:
                seen.add("two classic members")
        elif roll < 0.74 and a_known:  # a's commit at its epoch, an older or a newer one
            topic, part = rng.choice((("orders", 0), ("orders", 3), ("events", 1)))
            steps.append(commit(g, 9, conn="a", topic=topic, partition=part,
                                offset=rng.randint(0, 99), member=a_id,
                                gen=ref("a_e", rng.choice((0, 0, 0, 1, -1)))))
        elif roll < 0.81 and c.joined:  # a classic member's commit at its generation or another
            topic, part = rng.choice((("orders", 0), ("orders", 3), ("events", 1)))
            steps.append(commit(g, rng.choice((7, 8)) if c.inst else rng.choice((2, 5, 8)),
                                conn=c.name, topic=topic,
                                partition=part, offset=rng.randint(0, 99),
                                member=ref(c.name), inst=c.inst,
                                gen=ref(c.name + "_gen", rng.choice((0, 0, 0, 1, -1)))))
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
    join, a consumer group downgraded by ``a``'s leave, a classic member joining either kind,
    a static one's new process, and ``l`` joining beside ``k``."""
    seen: set = set()
    rng = random.Random(7)
    for i in range(40):
        random_mixed_session(rng, f"g{i}", seen)
    assert seen == {"upgrade", "downgrade", "classic join", "classic join to a consumer group",
                    "static classic process", "two classic members"}
