"""The report's ``expiring_next_check`` (``report.partition_report``, no Spark needed) against
the store's own retention pass: on random histories of standalone groups and KIP-848
consumer groups whose members join, commit, heartbeat and leave, each group's count is what
the pass of a reopened store, at the check's time, expires of it. A live consumer group keeps
the offsets of the topics its members subscribe to; the report once judged every consumer
group as a standalone one (it read only GROUP_METADATA records) and counted those too."""

import os

from offsetlog import TopicPartition
from offsetlog.log.naming import list_partition_dirs, snapshot_dir
from offsetlog.recovery.snapshot import tombstone_floors
from offsetlog.spark.report import _Task, partition_report
from support.embedded_consumer import Member
from support.stores import open_store

PARTITIONS = 2
RETENTION = 60_000
#: each takes a fraction of a second; raise by hand for a longer search
HISTORIES = int(os.environ.get("OFFSETLOG_TEST_HISTORIES", 4))


def _random_history(path, rng, clock):
    members: dict[str, Member] = {}
    with open_store(path, clock=clock, partitions=PARTITIONS, retention_ms=RETENTION) as s:
        for _ in range(80):
            clock.advance(rng.choice([0, 1_000, 5_000, 10_000]))
            for name in list(members):  # live members keep their sessions
                if not members[name].beat(check=False):
                    del members[name]
            roll = rng.random()
            tp = TopicPartition(rng.choice(["t", "u"]), rng.randint(0, 1))
            if roll < 0.3:
                s.commit_sync(rng.choice(["s-0", "s-1"]), {tp: rng.randint(0, 99)})
            elif roll < 0.6 and members:
                m = members[rng.choice(sorted(members))]
                s.commit_sync(m.group, {tp: rng.randint(0, 99)}, generation_id=m.epoch,
                              member_id=m.member_id)
            elif roll < 0.8:
                name = rng.choice(["a", "b", "c", "d"])
                if name not in members:
                    members[name] = Member(s, name, group=rng.choice(["cg-0", "cg-1"]),
                                           topics=rng.choice([("t",), ("u",), ("t", "u")]))
            elif members:
                name = rng.choice(sorted(members))
                members.pop(name).leave(check=False)


def test_expiring_next_check_is_what_the_pass_of_a_reopened_store_expires(
        tmp_path, clock, seeded_random):
    judged = 0
    for h in range(HISTORIES):
        path = os.path.abspath(str(tmp_path / f"s{h}"))
        _random_history(path, seeded_random, clock)
        check = clock.now + seeded_random.choice([0, RETENTION // 2, 2 * RETENTION])
        floors = tombstone_floors(snapshot_dir(path))
        reported = {}
        for p, directory in list_partition_dirs(path):
            task = _Task(path, p, directory, clock.now, check, RETENTION, False, floors.get(p))
            for _, _, group, held, _, _, expiring in partition_report(task)["groups"]:
                reported[group] = (held, expiring)
        clock.advance(check - clock.now)
        with open_store(path, clock=clock, partitions=PARTITIONS, retention_ms=RETENTION) as s:
            before = {g: len(s.fetch(g)) for g in reported}
            s.expire_offsets()
            passed = {g: (before[g], before[g] - len(s.fetch(g))) for g in reported}
        assert {g: v for g, v in reported.items() if v[0]} == {
            g: v for g, v in passed.items() if v[0]}, h
        judged += sum(1 for g, (held, _) in reported.items() if held and g.startswith("cg-"))
    assert judged, "no consumer group held offsets in any history"
