"""Apache Kafka as the judge of random sessions: one classic group's member joining,
heartbeating, committing and leaving, beside standalone commits, fetches, OffsetDelete,
DeleteGroups and DescribeGroups of the same group id; and one transactional producer's
transactions (InitProducerId, AddOffsetsToTxn, TxnOffsetCommit, EndTxn) beside plain commits
and fetches of their group; at random versions; each session run
against both targets and compared answer by answer (support/kafka_diff.py). The fixed cases
of test_diff_groups.py and test_diff_offsets.py each check one situation; these mix them, so
that a state one request leaves behind meets the requests the fixed cases never send after
it. A failing session prints its seed: rerun it with ``OFFSETLOG_TEST_SEED``."""

from __future__ import annotations

import random

import pytest

from support.kafka_diff import compare
from support.kafka_steps import (
    add_offsets,
    commit,
    delete_group,
    describe,
    end,
    fetch,
    formed,
    heartbeat,
    in_name_order,
    init,
    leader_sync,
    leave,
    offset_delete,
    ref,
    session_counts,
    stable_fetch,
    sync,
    txn_commit,
    txn_settled,
)

#: sessions per run (about a quarter of a second each against both targets) and steps per session
SESSIONS, STEPS = session_counts(12, 14)
TOPICS = (("orders", 4), ("events", 2), ("no-such-topic", 1))


def random_session(rng: random.Random, g: str) -> list:
    """``STEPS`` random requests about group ``g``; member steps only once a member has
    joined (they name it, after it left too)."""
    steps: list = []
    joined = in_group = False
    # the group has group metadata (formed, and no DeleteGroups sent since): OffsetDelete
    # only then, since Kafka keeps a group of offsets only ("simple group") after its last
    # offset is deleted and offsetlog does not (docs/PROTOCOL.md;
    # test_a_group_whose_last_offset_was_deleted pins it)
    managed = False
    inst = None  # the member's instance id: a static member (the commits and heartbeats say it)
    for _ in range(STEPS):
        topic, count = rng.choice(TOPICS)
        part = rng.randrange(count + (rng.random() < 0.1))  # now and then one it lacks
        roll = rng.random()
        member_step = 0.3 <= roll < 0.62
        if (roll < 0.15 and not in_group) or (member_step and not joined):
            # a new member, joined and synced (never beside the last one: the join would
            # wait out the rebalance timeout for it); static now and then (JoinGroup v5+)
            inst = "i1" if rng.random() < 0.3 else None
            steps += formed(g, rng.choice([5] if inst else [3, 4, 5]), inst=inst)
            joined = in_group = managed = True
        elif roll < 0.15:
            steps.append(describe(g, rng.randint(0, 5)))
        elif roll < 0.3:
            steps.append(commit(g, rng.randint(2, 9), topic=topic, partition=part,
                                offset=rng.randint(0, 99)))
        elif roll < 0.45:  # the member's commit, at its generation or a wrong one
            v = rng.randint(2, 9)
            steps.append(commit(g, v, topic=topic, partition=part, offset=rng.randint(0, 99),
                                member=ref("m"), inst=inst if v >= 7 else None,
                                gen=ref("m_gen") if rng.random() < 0.8 else 99))
        elif roll < 0.5:
            v = rng.randint(0, 4)
            steps.append(heartbeat(g, v, inst=inst if v >= 3 else None))
        elif roll < 0.55:  # SyncGroup again (a leader's, or without assignments)
            v = rng.randint(0, 5)
            step = leader_sync(g, v) if rng.random() < 0.5 else sync(g, v)
            if inst and v >= 3:
                step.body["group_instance_id"] = inst
            steps.append(step)
        elif roll < 0.62:
            v = rng.randint(0, 5)
            steps.append(leave(g, v, inst=inst if v >= 3 else None))
            in_group = False
        elif roll < 0.75:
            v = rng.randint(2, 9)  # (v0-1 have no "all topics"; v8+ batch groups)
            steps.append(fetch(g, v, topics=None if rng.random() < 0.4 else
                               ((topic, [part, (part + 1) % count]),),
                               stable=v >= 7 and rng.random() < 0.5))
        elif roll < 0.83 and managed:
            steps.append(offset_delete(g, topic, [part]))
        elif roll < 0.9:
            steps.append(delete_group(g, rng.randint(0, 2)))
            managed = False
        else:
            steps.append(describe(g, rng.randint(0, 5)))
    return steps


def random_txn_session(rng: random.Random, g: str, tid: str) -> list:
    """``STEPS`` random requests of transactional id ``tid``'s producer and of group ``g``.
    An EndTxn is followed by waits for its transaction to complete and its markers to be
    written (Kafka does both after it answers; ``txn_settled``, ``stable_fetch``); no InitProducerId while a transaction may be open (Kafka
    bumps the epoch twice then, offsetlog once: a pinned difference, test_diff_txn.py)."""
    steps: list = [init(tid, rng.randint(0, 5))]
    open_ = False  # AddOffsetsToTxn sent since the last EndTxn
    for _ in range(STEPS):
        topic, count = rng.choice(TOPICS[:2])
        part, offset = rng.randrange(count), rng.randint(0, 99)
        roll = rng.random()
        if roll < 0.1 and not open_:
            steps.append(init(tid, rng.randint(0, 5)))
        elif roll < 0.3:
            steps.append(add_offsets(tid, g, rng.randint(0, 3)))
            open_ = True
        elif roll < 0.5:  # (before AddOffsetsToTxn too: refused on both)
            steps.append(txn_commit(tid, g, rng.randint(0, 4), topic=topic, offset=offset))
        elif roll < 0.62:
            steps.append(end(tid, rng.random() < 0.6, rng.randint(0, 4)))
            steps.append(txn_settled(tid))
            steps.append(stable_fetch(g, rng.randint(7, 9)))
            open_ = False
        elif roll < 0.8:
            steps.append(commit(g, rng.randint(2, 9), topic=topic, partition=part,
                                offset=offset))
        elif open_:  # pending offsets are not shown; require_stable refuses them
            v = rng.randint(2, 9)
            steps.append(fetch(g, v, topics=((topic, [part]),), stable=v >= 7))
        else:
            steps.append(stable_fetch(g, rng.randint(7, 9)))
    return steps


@pytest.mark.parametrize("n", range(SESSIONS))
def test_random_session_answers_as_kafka(targets, gid, n, seeded_random):
    compare(*targets, random_session(seeded_random, gid), view=in_name_order)


@pytest.mark.parametrize("n", range(SESSIONS))
def test_random_transactional_session_answers_as_kafka(targets, gid, n, seeded_random):
    compare(*targets, random_txn_session(seeded_random, gid, gid + "-t"), view=in_name_order)
