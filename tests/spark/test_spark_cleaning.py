"""The report's per-partition counts (offsetlog.spark.cleaning, through
``report.partition_report``, no Spark needed) against the cleaner itself: on random histories
with transactions committed, aborted and left undecided, TRANSACTION_STATE tombstones,
deletes and compactions, KIP-848 members joining and leaving, ACLs and SCRAM credentials
created and deleted, ``reclaimable_now`` equals what a real cleaning of a copy drops at the
same time, and ``dead_records`` equals a plain count keyed by the cleaner's own function.
(The report once counted the records keyed by a member, a user or an ACL binding as never
superseded: its rows did not carry those keys.)"""

import contextlib
import os
from collections import defaultdict

from offsetlog import OffsetStore, TopicPartition
from offsetlog.acl import AclBinding, AclFilter, Operation, PatternType, Permission, ResourceType
from offsetlog.group.errors import GroupIdNotFoundError
from offsetlog.log.framing import encode_batch
from offsetlog.log.naming import list_partition_dirs, list_segments, snapshot_dir
from offsetlog.log.records import TRANSACTION_STATE, transaction_state
from offsetlog.partitioner import partition_for
from offsetlog.recovery.snapshot import tombstone_floors
from offsetlog.recovery.tools.inspect import iter_records
from offsetlog.server.scram import make_credential
from offsetlog.spark.report import _Task, partition_report
from support.embedded_consumer import Member
from support.spark_report import MIN, cleaned_copy, dead_records

PARTITIONS = 3
#: each takes a fraction of a second; raise by hand for a longer search
HISTORIES = int(os.environ.get("OFFSETLOG_TEST_HISTORIES", 4))


def _append_state_tombstone(path, tid, ts):
    """A TRANSACTION_STATE tombstone for ``tid`` at the end of its log partition (the engine
    has no call that writes one; the format allows it and the cleaner handles it)."""
    p = partition_for(tid, PARTITIONS)
    directory = dict(list_partition_dirs(path))[p]
    last = max((off for q, _, _, off, _ in iter_records(path) if q == p), default=-1)
    _, seg = list_segments(directory)[-1]
    with open(seg, "ab") as f:
        f.write(encode_batch(last + 1, [transaction_state(0, tid, None)], timestamp=ts))


def _acl(i):
    return AclBinding(ResourceType.TOPIC, f"t{i}", PatternType.LITERAL, "User:alice", "*",
                      Operation.READ, Permission.ALLOW)


def _other_keys(s, rng, members):
    """One change to the keys beside offsets: a KIP-848 member joins, beats or leaves (its
    group's records keyed by member), an ACL or a SCRAM credential is set or deleted."""
    roll = rng.random()
    if roll < 0.5:
        name = rng.choice(["m0", "m1", "m2"])
        member = members.get(name)
        if member is None:
            members[name] = Member(s, name, group=rng.choice(["cg-0", "cg-1"]))
        elif rng.random() < 0.3:
            member.leave(check=False)  # (a member whose session lapsed is gone already)
            del members[name]
        elif not member.beat(check=False):
            del members[name]
    elif roll < 0.75:
        if rng.random() < 0.7:
            s.acls.create([_acl(rng.randint(0, 2))])
        else:
            s.acls.delete([AclFilter(name=f"t{rng.randint(0, 2)}")])
    else:
        user = rng.choice(["u0", "u1"])
        value = (make_credential("SCRAM-SHA-256", str(rng.random()))
                 if rng.random() < 0.8 else None)
        s.registries.set_scram_credential(user, "SCRAM-SHA-256", value)


def random_txn_history(path, rng, clock):
    tids = [f"tx-{i}" for i in range(4)]
    groups = [f"g-{i}" for i in range(4)]
    for session in range(3):
        with OffsetStore.open(path, partitions=PARTITIONS, clock=clock, cleaner_backoff_ms=0,
                              retention_check_interval_ms=0, transaction_check_interval_ms=0,
                              segment_bytes=rng.choice([1024, 2048]),
                              delete_retention_ms=MIN) as s:
            handles, members = {}, {}
            for _ in range(60):
                clock.advance(rng.choice([0, 1_000, 20_000]))
                roll = rng.random()
                tid = rng.choice(tids)
                tp = TopicPartition("in", rng.randint(0, 2))
                if roll < 0.15:
                    _other_keys(s, rng, members)
                elif roll < 0.35:
                    s.commit_sync(rng.choice(groups), {tp: rng.randint(0, 99)})
                elif roll < 0.70:
                    txn = handles.get(tid)
                    if txn is None or rng.random() < 0.15:
                        txn = handles[tid] = s.init_transactions(tid)  # fences the old one
                    if txn.state != "in_transaction":
                        txn.begin()
                    txn.commit_offsets(rng.choice(groups), {tp: rng.randint(0, 99)})
                elif roll < 0.88:
                    txn = handles.get(tid)
                    if txn is not None and txn.state == "in_transaction":
                        txn.commit() if rng.random() < 0.6 else txn.abort()
                elif roll < 0.93:
                    with contextlib.suppress(GroupIdNotFoundError):  # none left to delete
                        s.delete_group(rng.choice(groups))
                else:
                    s.compact()
                    clock.advance(rng.choice([0, 2 * MIN]))
            if session == 2:  # a tombstone whose horizon will have passed, in a closed segment
                s.commit_sync("gone", {TopicPartition("in", 0): 1})
                s.delete_group("gone")
                for j in range(20):  # other keys of its log partition close the segment
                    s.commit_sync("gone", {TopicPartition("pad", j): j})
                s.compact()
                clock.advance(2 * MIN)
            if rng.random() < 0.75:  # else transactions stay undecided across the close
                for txn in handles.values():
                    if txn.state == "in_transaction":
                        txn.commit() if rng.random() < 0.6 else txn.abort()
            idle = [t for t in tids if handles.get(t) is None
                    or handles[t].state != "in_transaction"]
        # between sessions: forget an idle transactional id (a tombstone of its state)
        if idle and session < 2:
            _append_state_tombstone(path, rng.choice(idle), clock.now)
    return clock.now


def test_report_counts_equal_a_real_cleaning_on_random_transactional_histories(
        tmp_path, clock, seeded_random):
    seen = defaultdict(int)
    for h in range(HISTORIES):
        path = str(tmp_path / f"s{h}")
        now = random_txn_history(path, seeded_random, clock) + seeded_random.choice([0, 2 * MIN])
        floors = tombstone_floors(snapshot_dir(path))
        cleaned = cleaned_copy(path, now, str(tmp_path / f"copy{h}"))
        by_lp = defaultdict(list)
        for p, seg, batch, off, r in iter_records(os.path.abspath(path)):
            by_lp[p].append((seg, batch, off, r))
        for p, directory in list_partition_dirs(path):
            row = partition_report(_Task(os.path.abspath(path), p, directory, now, now, MIN,
                                         False, floors.get(p)))["partition"]
            dropped, result = cleaned[p]
            assert row[8] == dropped, (h, p, "reclaimable_now", result)
            assert row[4] == dead_records(by_lp[p]), (h, p, "dead_records")
            seen["cut"] += result.first_unstable_offset is not None
            seen["markers"] += result.markers_dropped
            seen["tombstones"] += result.tombstones_dropped
            seen["states"] += sum(r[1] == TRANSACTION_STATE and r[4] is None
                                  for *_, r in by_lp[p])
    # the histories exercise what they should (over all of them). Tombstones dropped at their
    # horizon and TRANSACTION_STATE tombstones are there in most runs, not all: the
    # deterministic scenario of test_spark_report.py checks those every time.
    assert seen["markers"] and seen["cut"], dict(seen)
