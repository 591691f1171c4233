"""Heartbeat sequences against Apache Kafka and ``offsetlog serve``, compared where the group
settles: members join one by one and leave, each heartbeating as a well-behaved client does
(reporting what it owns, taking what it is given), until the group is Stable with every member
at its target; then ConsumerGroupDescribe's state, members, assignments and targets must be the
same on both, the group's and every member's epoch included (the test broker assigns in the
heartbeat, as offsetlog does: docs/GROUPS.md). At every heartbeat no partition is owned by two
members."""

from __future__ import annotations

import time

import pytest

from support.consumer_settle import Member, settle
from support.kafka_diff import RETRIABLE
from support.wire_raw import call


def scenario(port: int, group: str, assignor: str) -> list:
    """Join a, b, c (c statically, on two topics), then b leaves: where the group settles."""
    def mk(name, topics=("orders",), instance=None):
        return Member(port, group, f"{group}-{name}", topics, assignor, instance)
    a = mk("a")
    out = [settle([a])]
    b = mk("b")
    out.append(settle([a, b]))
    c = mk("c", topics=("orders", "events"), instance="C")
    out.append(settle([a, b, c]))
    b.leave()
    out.append(settle([a, c]))
    for m in (a, c):
        m.leave()
    return out


@pytest.mark.parametrize("assignor", ["range", "uniform"])
def test_groups_settle_where_kafkas_do(targets, gid, assignor):
    kafka = scenario(targets[0], gid, assignor)
    ours = scenario(targets[1], gid, assignor)
    def names(views):
        return [[(m[0].rsplit("-", 1)[1], m[1], m[2]) for m in v["members"]] for v in views]
    if assignor == "range":
        assert kafka == ours
        # what the case is about, on Kafka's answers
        assert names(kafka)[1] == [("a", None, [("orders", 0), ("orders", 1)]),
                                   ("b", None, [("orders", 2), ("orders", 3)])]
    else:
        # uniform: Kafka breaks ties between equally good assignments in hash order, so
        # only the shape is compared: the same members, each with as many partitions
        def shape(views):
            return [(v["state"], v["assignor"], [(m[0], m[1], len(m[2])) for m in v["members"]],
                     v["epochs"]) for v in views]
        assert shape(kafka) == shape(ours)


class _Transaction:
    """A transactional producer of ``group``'s offsets: TxnOffsetCommit (v3, naming the
    member) in one transaction, committed by ``end``."""

    def __init__(self, sock, group: str) -> None:
        self.sock, self.group, self.tid = sock, group, f"{group}-t"
        deadline = time.monotonic() + 30
        while True:  # (Kafka's transaction coordinator loads its partition at first use)
            r = call(sock, 22, 4, transactional_id=self.tid, transaction_timeout=60_000,
                     producer_id=-1, producer_epoch=-1)
            if r.error_code not in RETRIABLE or time.monotonic() > deadline:
                break
            time.sleep(0.1)
        assert r.error_code == 0, r
        self.ids = dict(transactional_id=self.tid, producer_id=r.producer_id,
                        producer_epoch=r.producer_epoch)
        r = call(sock, 25, 3, group_id=group, **self.ids)
        assert r.error_code == 0, r

    def commit(self, member: str, epoch: int, partitions: list) -> object:
        return call(self.sock, 28, 3, group_id=self.group, generation_id=epoch,
                    member_id=member, group_instance_id=None,
                    topics=[dict(name="orders", partitions=partitions)], **self.ids)

    def end(self) -> None:
        r = call(self.sock, 26, 3, committed=True, **self.ids)
        assert r.error_code == 0, r


def _stable_offsets(sock, group: str):
    """OffsetFetch with require_stable, asked until no partition is pending (Kafka writes a
    transaction's markers after it answers EndTxn)."""
    deadline = time.monotonic() + 30
    while True:
        fetched = call(sock, 9, 9, require_stable=True, groups=[dict(
            group_id=group, member_id=None, member_epoch=-1,
            topics=[dict(name="orders", partition_indexes=[0, 1, 2, 3])])])
        parts = [p for t in fetched.groups[0].topics for p in t.partitions]
        if all(p.error_code == 0 for p in parts) or time.monotonic() > deadline:
            return fetched
        time.sleep(0.05)


def commits_at_older_epochs(port: int, group: str, transactional: bool = False
                            ) -> tuple[int, list]:
    """a joins alone (all of orders), then b (a keeps orders-0,1, b gets 2,3): where that
    settles, a's OffsetCommit v9 (or, ``transactional``, TxnOffsetCommit v3 in one
    transaction, then committed) at each epoch from one before the one it got orders-0 at to
    one past its own, of its partition, of b's, and of both; then what was committed.
    Returns (the epoch a got orders-0 at, how far a's epoch moved, the answers by epoch
    relative to that one)."""
    a = Member(port, group, f"{group}-a", ("orders",), "range")
    settle([a])
    first = a.epoch
    b = Member(port, group, f"{group}-b", ("orders",), "range")
    settle([a, b])
    txn = _Transaction(a.sock, group) if transactional else None
    out = []
    for epoch in range(first - 1, a.epoch + 2):
        for parts in ([0], [2], [0, 2], [2, 0]):
            partitions = [dict(partition_index=p,
                               committed_offset=100 * (epoch - first) + 10 + p,
                               committed_leader_epoch=-1, committed_metadata="")
                          for p in parts]
            if txn is not None:
                r = txn.commit(a.member_id, epoch, partitions)
            else:
                r = call(a.sock, 8, 9, group_id=group, generation_id_or_member_epoch=epoch,
                         member_id=a.member_id, group_instance_id=None,
                         topics=[dict(name="orders", partitions=partitions)])
            out.append((epoch - first, parts, [(p.partition_index, int(p.error_code))
                                               for t in r.topics for p in t.partitions]))
    if txn is not None:
        txn.end()
    fetched = _stable_offsets(a.sock, group)
    out.append([(p.partition_index, p.committed_offset - 10 - p.partition_index
                 if p.committed_offset >= 0 else None)
                for t in fetched.groups[0].topics for p in t.partitions])
    moved = a.epoch - first
    a.leave()
    b.leave()
    return first, moved, out


def test_a_commit_at_an_older_epoch_is_judged_by_assignment_epochs(targets, gid):
    """KIP-1251 (Kafka 4.3+): a member's commit at an older epoch than its own is taken when
    every partition it names was given to the member at that epoch or before; otherwise the
    whole commit is STALE_MEMBER_EPOCH and nothing of it is written. The epochs themselves
    are compared too (a new group starts at 1, its first member joins at 2)."""
    kafka = commits_at_older_epochs(targets[0], gid)
    ours = commits_at_older_epochs(targets[1], gid + "-o")
    assert kafka == ours
    first, moved, answers = kafka
    stale, ok = 113, 0
    assert first == 2
    # what the case is about, on Kafka's answers: a moved one epoch on, and at the epoch it got
    # orders-0 at, orders-0 alone commits and b's orders-2 (alone or beside it) does not
    assert moved == 1
    assert (0, [0], [(0, ok)]) in answers and (0, [0, 2], [(0, stale), (2, stale)]) in answers
    assert (-1, [0], [(0, stale)]) in answers and (2, [0], [(0, stale)]) in answers


def test_a_transactional_commit_at_an_older_epoch(targets, gid):
    """TxnOffsetCommit of a member at an epoch older than its own, where the group has
    settled: compared with Kafka 4.4 epoch by epoch, as the OffsetCommit case above is, the
    transaction committed at the end and what it wrote fetched."""
    kafka = commits_at_older_epochs(targets[0], gid, transactional=True)
    ours = commits_at_older_epochs(targets[1], gid + "-o", transactional=True)
    assert kafka == ours
    _, moved, answers = kafka
    assert moved == 1
    # what the case is about, on Kafka's answers: KIP-1251's rule holds for transactions too
    # (at the epoch a got orders-0 at, orders-0 is taken and b's orders-2 is not), with
    # TxnOffsetCommit's ILLEGAL_GENERATION for the refusal
    illegal, ok = 22, 0
    assert (0, [0], [(0, ok)]) in answers and (0, [2], [(2, illegal)]) in answers
    assert (-1, [0], [(0, illegal)]) in answers and (2, [0], [(0, illegal)]) in answers
