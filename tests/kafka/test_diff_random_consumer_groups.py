"""Apache Kafka as the judge of random sessions of the consumer group protocol (KIP-848): two
members of one group (one static now and then) joining (one topic or two), heartbeating with
what they own, at a fenced epoch, joining again, leaving for good or for now and coming back,
committing offsets at their epoch, an older or a future one (OffsetCommit v9 and the classic
versions below it) and fetching them at their epoch or a stale one; beside standalone commits,
fetches, OffsetDelete, DeleteGroups, describes of the same group and a transactional producer
committing its offsets. Each session runs against both targets and is compared answer by
answer in full (support/kafka_diff.py): epochs, assignments and describes too, the test broker
computing assignments in the heartbeat as offsetlog does (offsetlog.bench.kafka_broker's
BASE_PROPERTIES), all but the heartbeat interval (docs/GROUPS.md). Each member's epoch and
partitions are the ones its own target last answered. A failing session prints its seed:
rerun it with ``OFFSETLOG_TEST_SEED``."""

from __future__ import annotations

import random

import pytest

from support.kafka_consumer_steps import DESCRIBE, epoch_of, hb, owned_of, save_owned
from support.kafka_diff import Req, compare
from support.kafka_steps import (
    add_offsets,
    commit,
    delete_group,
    describe,
    end,
    fetch,
    in_name_order,
    init,
    offset_delete,
    ref,
    session_counts,
    stable_fetch,
    txn_commit,
    txn_settled,
)

#: sessions per run (about a fifth of a second each against both targets) and steps
SESSIONS, STEPS = session_counts(10, 16)
SIDE = "c"  #: the bystander's connection


def random_consumer_session(rng: random.Random, g: str) -> list:
    """``STEPS`` random requests of members ``a`` and ``b`` of consumer group ``g`` and of a
    bystander."""
    steps: list = []
    inside: set[str] = set()  # members in the group (joined, not left)
    known: set[str] = set()  # members that joined once (their epoch is saved)
    # the group exists as a consumer group (a member joined since the last deletion):
    # OffsetDelete only then, for the simple group's sake (test_diff_random_sessions.py)
    exists = False

    # member a is static now and then (its instance id "A"): it may leave for now (epoch -2)
    # and come back, as the same member or restarted under a new member id, and a second
    # process of the same instance is refused while it is in
    inst = {"a": "A" if rng.random() < 0.4 else None, "b": None}
    ids = {"a": f"{g}-a", "b": f"{g}-b"}
    away: set[str] = set()  # static members that left for now (still in the group)
    old_ids: list[tuple[str, str]] = []  # (who, a member id it had before a restart)
    restarts = 0

    def save(who):
        return {**epoch_of(who + "_e"), **save_owned(who + "_o")}

    # a transactional producer beside them, committing the group's offsets in transactions
    tid = f"{g}-t"
    steps.append(init(tid, 4))

    for _ in range(STEPS):
        who = rng.choice("ab")
        mid, conn, instance = ids[who], who, inst[who]
        if rng.random() < 0.15:  # a step of the transaction
            roll = rng.random()
            if roll < 0.3:
                steps.append(add_offsets(tid, g, rng.randint(0, 3)))
            elif roll < 0.75:  # a member's (at its epoch or a newer one) or no member's
                v = rng.randint(0, 4)
                named = who in known and v >= 3 and rng.random() < 0.7
                gen = ref(who + "_e", rng.choice((0, 0, 1))) if named else -1
                steps.append(txn_commit(tid, g, v, topic=rng.choice(("orders", "events")),
                                        offset=rng.randint(0, 99),
                                        member=mid if named else "", gen=gen))
            else:  # (then waits for Kafka to complete it: see txn_settled)
                # aborted only while the consumer group exists: Kafka keeps the simple group a
                # transactional commit made after an abort took its only offsets, offsetlog
                # does not (pinned: test_a_group_whose_aborted_transaction_held_its_only_offsets)
                committed = rng.random() < 0.6 or not exists
                steps += [end(tid, committed, rng.randint(0, 4)), txn_settled(tid),
                          stable_fetch(g, rng.randint(7, 9))]
            continue
        roll = rng.random()
        if (who not in inside or who in away) and (roll < 0.35 or not known):
            if who in away and rng.random() < 0.6:  # restarted: a new member id
                restarts += 1
                old_ids.append((who, mid))
                mid = ids[who] = f"{g}-{who}{restarts}"
            topics = ("orders",) if rng.random() < 0.7 else ("orders", "events")
            steps.append(hb(g, mid, 0, join=True, topics=topics, conn=conn, inst=instance,
                            save=save(who)))
            inside.add(who)
            known.add(who)
            away.discard(who)
            exists = True
        elif roll < 0.3:  # (inside) a heartbeat, reporting what it owns or not
            owned = owned_of(who + "_o") if rng.random() < 0.7 else None
            steps.append(hb(g, mid, ref(who + "_e"), owned=owned, conn=conn, inst=instance,
                            save=save(who)))
        elif roll < 0.35 and instance and who in inside and who not in away:
            # a second process of the instance while the first is in: UNRELEASED_INSTANCE_ID
            restarts += 1
            steps.append(hb(g, f"{g}-{who}-x{restarts}", 0, join=True, conn=SIDE,
                            inst=instance))
        elif roll < 0.35 and old_ids:  # a member id from before a restart
            old_who, old = rng.choice(old_ids)
            steps.append(hb(g, old, ref(old_who + "_e"), owned=[], conn=SIDE, inst=inst[old_who]))
        elif roll < 0.4 and who in known:  # from the future: FENCED_MEMBER_EPOCH
            steps.append(hb(g, mid, ref(who + "_e", 1), owned=owned_of(who + "_o"), conn=conn,
                            inst=instance))
        elif roll < 0.45 and who in inside and who not in away:  # joins again with epoch 0
            steps.append(hb(g, mid, 0, join=True, conn=conn, inst=instance, save=save(who)))
        elif roll < 0.49 and instance and who in inside and who not in away:
            steps.append(hb(g, mid, -2, conn=conn, inst=instance))  # leaves for now
            away.add(who)
        elif roll < 0.53:  # leaves (or, already gone, is told it is unknown)
            steps.append(hb(g, mid, -1, conn=conn, inst=instance))
            inside.discard(who)
            away.discard(who)
        elif roll < 0.68 and who in known:  # the member's commit at its epoch, an older or
            # a newer one (an older one is judged by when each partition was assigned, KIP-1251)
            delta = rng.choice((0, 0, 0, 1, -1, -2))
            v = 9 if rng.random() < 0.7 else rng.randint(2, 8)
            topic, part = rng.choice((("orders", 0), ("orders", 3), ("events", 1)))
            steps.append(commit(g, v, conn=conn, topic=topic, partition=part,
                                offset=rng.randint(0, 99), member=mid,
                                gen=ref(who + "_e", delta)))
        elif roll < 0.74 and who in known:  # the member's fetch (v9: with its epoch)
            fetch_step = fetch(g, 9, conn=conn, topics=(("orders", [0, 3]),))
            fetch_step.body["groups"][0].update(member_id=mid,
                                                member_epoch=ref(who + "_e", rng.choice((0, -1))))
            steps.append(fetch_step)
        elif roll < 0.8:
            steps.append(commit(g, rng.choice((2, 5, 8, 9)), conn=SIDE, topic="events",
                                partition=0, offset=rng.randint(0, 99)))
        elif roll < 0.86:
            steps.append(fetch(g, rng.randint(2, 9), conn=SIDE,
                               topics=None if rng.random() < 0.5 else
                               (("orders", [0, 3]), ("events", [0, 1]))))
        elif roll < 0.91 and exists:
            steps.append(offset_delete(g, rng.choice(("orders", "events")), [0, 1, 3],
                                       conn=SIDE))
        elif roll < 0.95:
            steps.append(delete_group(g, rng.randint(0, 2), conn=SIDE))
            if not inside:
                exists = False
        elif roll < 0.98:
            steps.append(Req(DESCRIBE, rng.randint(0, 1), dict(
                group_ids=[g], include_authorized_operations=False), conn=SIDE))
        else:
            steps.append(describe(g, rng.randint(0, 5), conn=SIDE))
    return steps


def _view(answers: list) -> list:
    """Every answer in full, topics in name order, but for the heartbeat interval (offsetlog
    answers shorter ones while a member waits for partitions or revokes: docs/GROUPS.md,
    "Heartbeat intervals")."""
    return [{k: v for k, v in a.items() if k != "heartbeat_interval"}
            if "heartbeat_interval" in a else a for a in in_name_order(answers)]


@pytest.mark.parametrize("n", range(SESSIONS))
def test_random_consumer_group_session_answers_as_kafka(targets, gid, n, seeded_random):
    compare(*targets, random_consumer_session(seeded_random, gid), view=_view)
