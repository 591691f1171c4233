"""The offsetlog side of the commit cases, through the public API only (``OffsetStore``).

The other cases run in child processes: recovery (``OffsetStore.open``) in
``offsetlog.bench.recovery_child``, memory (``OffsetTable.apply_batch``) in ``offsetlog.bench.memory_child``.
"""

from __future__ import annotations

import itertools
import time
from collections.abc import Callable

from offsetlog import OffsetAndMetadata, OffsetStore, TopicPartition
from offsetlog.bench.common import run_threads
from offsetlog.bench.workload import (
    FIRST_OFFSET,
    GROUP,
    MEMBER_GROUP,
    TOPIC,
    many_group,
    many_partition,
    thread_group,
    thread_partitions,
)
from offsetlog.member import GroupMember


def open_store(path: str, **options) -> OffsetStore:
    """A store as a user opens one for durable commits (``fsync="always"``)."""
    options.setdefault("fsync", "always")
    return OffsetStore.open(path, **options)


# -- 1. latency --------------------------------------------------------------------------------

def commit_sync_op(store: OffsetStore, group: str = GROUP,
                   partitions: list[int] | None = None, *,
                   leader_epoch: int | None = None) -> Callable[[], None]:
    """One single-offset ``commit_sync`` per call, in turn over ``partitions``, offsets rising;
    with ``leader_epoch``, each offset an ``OffsetAndMetadata`` carrying it (what Kafka's
    clients commit once they have read a record: its leader's epoch)."""
    tps = [TopicPartition(TOPIC, p) for p in (partitions or [0])]
    counter = itertools.count(FIRST_OFFSET)
    commit = store.commit_sync
    n = len(tps)

    if leader_epoch is not None:
        def with_epoch() -> None:
            off = next(counter)
            commit(group, {tps[off % n]: OffsetAndMetadata(off, "", leader_epoch)})
        return with_epoch

    def op() -> None:
        off = next(counter)
        commit(group, {tps[off % n]: off})

    return op


def member_commit_op(store: OffsetStore, group: str = MEMBER_GROUP
                     ) -> tuple[Callable[[], None], Callable[[], None]]:
    """``(op, close)``: one single-offset ``commit_sync`` per call of a ``GroupMember`` of
    ``group``, the one member, owning the topic's partition 0 (a consumer group member's
    commit: its generation and member id checked by the coordinator). ``store``'s group
    config should make a group's first join wait 0 ms."""
    member = GroupMember(store, group, partitions_per_topic={TOPIC: 1}, client_id="bench",
                         enable_auto_commit=False)
    member.subscribe([TOPIC])
    deadline = time.monotonic() + 30.0
    while not member.poll(timeout_ms=50):
        if time.monotonic() > deadline:
            member.close()
            raise RuntimeError(f"the bench's member of {group!r} never got its partition")
    tp = TopicPartition(TOPIC, 0)
    counter = itertools.count(FIRST_OFFSET)
    commit = member.commit_sync

    def op() -> None:
        commit({tp: next(counter)})

    return op, member.close


# -- 2. throughput: N threads ------------------------------------------------------------------

def commit_sync_threads(path: str, n: int, *, one_group: bool, many_groups: bool = False,
                        groups: list[str] | None = None, partitions: int | None = None,
                        **window) -> float:
    """Commits/s of ``n`` threads calling ``commit_sync`` on one store.

    Each thread commits its own partitions (one offset per call, in turn), either all of one
    group (one log partition, the consumers of one group) or each of its own group;
    ``many_groups`` is issue 16's shape: thread k commits group ``group-k``, partition
    ``k % 8``; ``groups`` (with ``many_groups``) names thread k's group instead of
    ``group-k``. ``partitions``: the store's log partitions (default: the store's, 50).
    ``window``: see ``run_threads``.
    """
    store = open_store(path) if partitions is None else open_store(path, partitions=partitions)
    try:
        def make_op(i: int):
            if many_groups:
                group = groups[i] if groups is not None else many_group(i)
                return commit_sync_op(store, group, [many_partition(i)]), lambda: None
            return commit_sync_op(store, thread_group(i, one_group=one_group),
                                  thread_partitions(i)), lambda: None

        calls, ns = run_threads(n, make_op, **window)
    finally:
        store.close()
    return calls / (ns / 1e9)


# -- 3. async ----------------------------------------------------------------------------------

def commit_async_stream(path: str, n_records: int, keys: list[tuple[str, int]], *,
                        warmup: int = 2000, api_frame: bool = True) -> float:
    """Records/s of one thread calling ``commit_async`` with one offset per call.

    The clock runs from the first call until every future has resolved (every commit durable);
    afterwards the last offset of every key is checked with ``fetch``.

    Without ``api_frame`` (for information), the calls go straight to the native entry that
    ``OffsetStore.commit_async`` makes its one call to (``CommitRouter.commit_async``, the
    usual call's arguments given positionally): the same commits, without the public method's
    Python frame, to show what that frame costs.
    """
    tps = [TopicPartition(t, p) for t, p in keys]
    nkeys = len(tps)
    store = open_store(path)
    try:
        commit, entry = store.commit_async, store._router.commit_async
        group = GROUP
        for i in range(warmup):  # opens the segment, warms the async thread
            commit(group, {tps[i % nkeys]: FIRST_OFFSET + i})
        store.flush()
        base = FIRST_OFFSET + warmup
        t0 = time.perf_counter_ns()
        if api_frame:
            futures = [commit(group, {tps[i % nkeys]: base + i}) for i in range(n_records)]
        else:
            futures = [entry(group, {tps[i % nkeys]: base + i}, None, -1, "", None)
                       for i in range(n_records)]
        for f in futures:
            f.result()
        elapsed = time.perf_counter_ns() - t0
        last = {tps[i % nkeys]: base + i for i in range(max(0, n_records - nkeys), n_records)}
        got = store.fetch(group, last)
        if any(got[tp].offset != off for tp, off in last.items()):
            raise AssertionError("commit_async: the store does not hold the last offsets")
    finally:
        store.close()
    return n_records / (elapsed / 1e9)
