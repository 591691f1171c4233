"""Many threads committing at once, sync and async, to overlapping groups and keys.

Every commit carries its origin in its metadata (``"<thread>:<seq>"``, offsets = seq, so they
grow within a thread), which lets the tests say which commit a value came from:

* per key, call order within a thread: a thread's private keys always show its latest
  finished commit, and a sync commit is visible the moment it returns, never overwritten by an
  earlier async commit of the same thread;
* every future resolves, every callback runs exactly once, with the offsets it was given;
* shared keys end on the last commit of *some* thread; private keys on their thread's last;
* a reopen replays to the identical state.
"""

from __future__ import annotations

import collections
import threading
import time
from concurrent.futures import wait

import pytest

import offsetlog.log.segment as segment_mod
from offsetlog.log.records import PLAIN_COMMIT_BOUND
from support.durability_helpers import (
    OAM,
    TP,
    Seeded,
    open_store,
    replace_sync,
    segment_files,
    store_state,
)

GROUPS = ["g-alpha", "g-beta", "g-gamma", "g-delta", "g-epsilon"]
SHARED = [TP("shared", p) for p in range(4)]


def origin(value: OAM) -> tuple[int, int]:
    tid, seq = value.metadata.split(":")
    return int(tid), int(seq)


class Worker:
    """One committing thread; records what it did for the checks afterwards."""

    def __init__(self, tid: int, store, rng: Seeded, calls: int, callbacks, errors) -> None:
        self.tid = tid
        self.store = store
        self.rng = rng
        self.calls = calls
        self.callbacks = callbacks
        self.errors = errors
        self.futures = []
        #: (group, tp) -> the last seq this thread committed there
        self.last: dict[tuple[str, TP], int] = {}
        self.private = [TP(f"t{tid}", p) for p in range(3)]
        self.thread = threading.Thread(target=self.run, name=f"committer-{tid}")

    def run(self) -> None:
        try:
            self._run()
        except BaseException as e:  # reported by the test, with the seed
            self.errors.append((self.tid, repr(e)))

    def _run(self) -> None:
        rng, tid = self.rng, self.tid
        for seq in range(1, self.calls + 1):
            group = rng.choice(GROUPS[:3] if tid % 2 else GROUPS)
            keys = rng.sample(self.private, rng.randrange(1, 3)) + rng.sample(
                SHARED, rng.randrange(0, 3))
            offsets = {tp: OAM(seq, f"{tid}:{seq}") for tp in keys}
            for tp in keys:
                self.last[(group, tp)] = seq
            if rng.random() < 0.5:
                self.store.commit_sync(group, offsets)
                # Visible at once, and not overwritten by this thread's earlier async commits.
                mine = [tp for tp in keys if tp.topic == f"t{tid}"]
                got = self.store.fetch(group, mine)
                if set(got) != set(mine):
                    raise AssertionError(f"after sync {tid}:{seq} {group} misses "
                                         f"{set(mine) - set(got)}")
                for tp, v in got.items():
                    if origin(v) != (tid, seq):
                        raise AssertionError(f"after sync {tid}:{seq} {group}/{tp} shows "
                                             f"{v.metadata}")
            else:
                def callback(arg, exc, key=(tid, seq), sent=offsets):
                    self.callbacks[key].append((arg is sent, exc))

                self.futures.append(((tid, seq), self.store.commit_async(
                    group, offsets, callback=callback)))
            if rng.random() < 0.05:
                time.sleep(0.001)


def run_workers(store, rng: Seeded, *, threads: int, calls: int):
    callbacks: dict = collections.defaultdict(list)
    errors: list = []
    workers = [Worker(t, store, Seeded(rng.randrange(1 << 32)), calls, callbacks, errors)
               for t in range(threads)]
    for w in workers:
        w.thread.start()
    for w in workers:
        w.thread.join(timeout=120)
        assert not w.thread.is_alive(), rng.why(f"committer {w.tid} hangs")
    assert errors == [], rng.why(str(errors[:5]))
    return workers, callbacks


def expected_private(workers) -> dict[str, dict[TP, int]]:
    """group -> private key -> seq of its last commit (only its own thread writes it)."""
    out: dict[str, dict[TP, int]] = {}
    for w in workers:
        for (group, tp), seq in w.last.items():
            if tp.topic != "shared":
                out.setdefault(group, {})[tp] = seq
    return out


def check_final_state(store, workers, rng: Seeded) -> None:
    last_shared = collections.defaultdict(set)
    for w in workers:
        for (group, tp), seq in w.last.items():
            if tp.topic == "shared":
                last_shared[(group, tp)].add((w.tid, seq))
    private = expected_private(workers)
    for group in GROUPS:
        got = store.fetch(group)
        mine = {tp: origin(v) for tp, v in got.items() if tp.topic != "shared"}
        assert mine == {tp: (int(tp.topic[1:]), seq)
                        for tp, seq in private.get(group, {}).items()}, rng.why(group)
        for tp, v in got.items():
            if tp.topic == "shared":
                assert origin(v) in last_shared[(group, tp)], rng.why(
                    f"{group}/{tp} ends on {v.metadata}, not any thread's last commit")
                assert v.offset == origin(v)[1]
        assert {tp for tp in got if tp.topic == "shared"} == {
            tp for (g, tp) in last_shared if g == group}, rng.why(group)


@pytest.mark.parametrize("threads,calls,partitions,slow_sync_ms", [
    (16, 200, 3, 0), (32, 100, 50, 0), (24, 150, 1, 0),
    (24, 100, 3, 2),  # a slow disk: big group-commit rounds, many waiters per round
])
def test_concurrent_sync_and_async_commits_keep_per_thread_order(
        tmp_path, monkeypatch, threads, calls, partitions, slow_sync_ms):
    rng = Seeded()
    if slow_sync_ms:
        real_sync = segment_mod._sync

        def slow_sync(fd):
            time.sleep(slow_sync_ms / 1000)
            real_sync(fd)

        replace_sync(monkeypatch, slow_sync)
    store = open_store(tmp_path, partitions=partitions, segment_bytes=64 * 1024)
    try:
        workers, callbacks = run_workers(store, rng, threads=threads, calls=calls)
        futures = [f for w in workers for _, f in w.futures]
        done, pending = wait(futures, timeout=20)
        assert not pending, rng.why(
            f"{len(pending)} of {len(futures)} async commits never resolved with no further "
            "traffic to lead them (see test_async_commit_queued_behind_a_sync_round_resolves_...)")
        assert all(f.exception() is None for f in futures), rng.why()
        check_final_state(store, workers, rng)
        before = store_state(store)
        assert segment_files(tmp_path), "the commits reached the log"
    finally:
        store.close()
    # close() ran every queued callback: each exactly once, with its own offsets, no error.
    expected = {key for w in workers for key, _ in w.futures}
    assert set(callbacks) == expected, rng.why()
    bad = {k: v for k, v in callbacks.items() if v != [(True, None)]}
    assert not bad, rng.why(f"callbacks not run exactly once cleanly: {list(bad.items())[:5]}")
    with open_store(tmp_path) as again:
        assert again.recovery_report.truncations == []
        assert store_state(again) == before, rng.why("reopen replays to a different state")


def test_async_commits_from_one_thread_apply_in_call_order(tmp_path):
    """A burst of async commits to one key, then sync: every step only moves forward."""
    rng = Seeded()
    with open_store(tmp_path, partitions=3) as store:
        tp = TP("t", 0)
        seen = []
        stop = threading.Event()

        def watch():  # a reader never sees the key go backwards
            while not stop.is_set():
                v = store.committed("g", tp)
                if v is not None:
                    seen.append(v.offset)

        watcher = threading.Thread(target=watch)
        watcher.start()
        try:
            futures = [store.commit_async("g", {tp: i, TP("t", 1 + i % 3): i})
                       for i in range(1, 2001)]
            store.commit_sync("g", {tp: 5000})
        finally:
            stop.set()
            watcher.join()
        assert store.committed("g", tp) == OAM(5000)
        done, pending = wait(futures, timeout=60)
        assert not pending
        assert seen == sorted(seen), rng.why("an earlier async commit overwrote a later one")


def test_every_callback_runs_once_even_when_closing_with_commits_queued(tmp_path):
    store = open_store(tmp_path, partitions=3)
    calls = collections.Counter()
    lock = threading.Lock()

    def callback(arg, exc):
        assert exc is None
        with lock:
            calls[arg[TP("t", 0)]] += 1

    futures = [store.commit_async(f"g{i % 7}", {TP("t", 0): i}, callback=callback)
               for i in range(3000)]
    store.close()  # drains the queues and runs the callbacks before returning
    assert all(f.done() and f.exception() is None for f in futures)
    assert calls == collections.Counter(range(3000))
    with open_store(tmp_path) as again:
        for g in range(7):
            last = max(i for i in range(3000) if i % 7 == g)
            assert again.committed(f"g{g}", TP("t", 0)) == OAM(last)


def test_a_raising_callback_does_not_stop_the_others(tmp_path):
    with open_store(tmp_path) as store:
        ran = []

        def bad(arg, exc):
            ran.append("bad")
            raise RuntimeError("user bug")

        def good(arg, exc):
            ran.append("good")

        store.commit_async("g", {TP("t", 0): 1}, callback=bad).result(timeout=30)
        store.commit_async("g", {TP("t", 0): 2}, callback=good).result(timeout=30)
    assert ran == ["bad", "good"]


def test_async_commit_queued_behind_a_sync_round_resolves_without_more_traffic(
        tmp_path, monkeypatch):
    """Two sync committers finish in one round while an async commit is queued behind it, and
    nobody writes afterwards: the async commit must still be led (regression test: the writer
    once handed leftover async work on only when no sync committer was counted as waiting,
    and counted those whose items the round had just finished)."""
    store = open_store(tmp_path, partitions=1)
    real = segment_mod._sync
    gate, entered = threading.Semaphore(0), threading.Semaphore(0)

    def gated_sync(fd):
        entered.release()
        assert gate.acquire(timeout=30)
        real(fd)

    replace_sync(monkeypatch, gated_sync)

    def sync_commit(k):
        store.commit_sync("g", {TP("t", k): k})

    try:
        leader = threading.Thread(target=sync_commit, args=(1,))
        leader.start()
        assert entered.acquire(timeout=30)  # round 1 is syncing
        followers = [threading.Thread(target=sync_commit, args=(k,)) for k in (2, 3)]
        for t in followers:
            t.start()
        time.sleep(0.3)  # both followers queued and waiting
        gate.release()  # round 1 ends; a follower leads round 2 with both followers' items
        assert entered.acquire(timeout=30)
        future = store.commit_async("g", {TP("t", 4): 4})  # queued during round 2
        gate.release()
        for t in [leader, *followers]:
            t.join(timeout=30)
        for _ in range(10):
            gate.release()  # any later round may sync freely
        future.result(timeout=3)
        assert store.committed("g", TP("t", 4)) == OAM(4)
    finally:
        monkeypatch.undo()
        for _ in range(10):
            gate.release()
        store.close()


def test_commit_racing_close_never_writes_after_the_lock_is_released(tmp_path):
    """Deterministic: the racing commit is held inside the injected clock, which
    _prepare_commit calls after its closed check; close() runs; another store opens the
    directory and commits; only then does the racing commit go on."""
    gate = threading.Event()
    inside = threading.Event()

    def clock():
        if threading.current_thread().name == "racing-commit":
            inside.set()
            gate.wait(30)
        return 1_700_000_000_000

    store = open_store(tmp_path, partitions=1, clock=clock)
    store.commit_sync("g", {TP("t", 0): 1})
    outcome = {}

    def racing():
        try:
            store.commit_sync("g", {TP("t", 0): 2})
            outcome["racing"] = "acknowledged"
        except Exception as e:  # StoreClosedError is the expected answer
            outcome["racing"] = e

    racer = threading.Thread(target=racing, name="racing-commit")
    racer.start()
    assert inside.wait(30)
    closer = threading.Thread(target=store.close)  # may wait for in-flight calls: not here
    closer.start()
    closer.join(0.5)
    if closer.is_alive():  # close() waits for the racing commit: let it finish first
        gate.set()
        closer.join(30)
        racer.join(30)
    assert not closer.is_alive()
    other = open_store(tmp_path)  # the directory is free: a restart in the same process
    try:
        other.commit_sync("g", {TP("t", 1): 3})  # acknowledged
        gate.set()
        racer.join(30)
        assert not racer.is_alive()
    finally:
        other.close()
    with open_store(tmp_path) as again:
        state = again.fetch("g")
        report = again.recovery_report
    assert state.get(TP("t", 1)) == OAM(3), (
        f"an acknowledged commit was lost: {state}, racing commit: {outcome}, {report}")
    if outcome["racing"] == "acknowledged":
        assert state[TP("t", 0)] == OAM(2), "the racing commit was acknowledged but lost"
    else:
        assert state[TP("t", 0)] == OAM(1)


@pytest.mark.parametrize("mode", ["sync", "async"])
def test_exclusive_is_granted_after_at_most_the_round_in_flight(tmp_path, mode):
    """A cleaner's swap (``exclusive``) must not starve behind a steady stream of commits:
    once it asks, no new round may start, so at most the round already being written lands
    before it is granted (found by the compaction latency bench: a swap waited 107 s)."""
    threads = 4
    store = open_store(tmp_path, partitions=1)
    part = store._parts[0]
    stop = threading.Event()

    def committer(t: int) -> None:
        i = 0
        while not stop.is_set():
            i += 1
            if mode == "sync":
                store.commit_sync("g", {TP(f"t{t}", 0): i})
            else:
                store.commit_async("g", {TP(f"t{t}", 0): i}).result()

    workers = [threading.Thread(target=committer, args=(t,)) for t in range(threads)]
    for w in workers:
        w.start()
    try:
        worst = 0
        for _ in range(30):
            time.sleep(0.01)
            asked = part.log.next_offset
            with store._writer.exclusive(part):
                worst = max(worst, part.log.next_offset - asked)
    finally:
        stop.set()
        for w in workers:
            w.join()
        store.close()
    # one record per commit, one commit in flight per thread: a round holds at most `threads`
    assert worst <= threads, f"{worst} records were written after exclusive() asked"


def test_a_callback_queued_after_close_stopped_the_callback_thread_still_runs(tmp_path):
    """A synchronous committer that led a round may finish resolving it after close() has
    drained and stopped the callback thread; its callbacks then run in its own thread
    rather than being queued for a thread that is gone."""
    store = open_store(tmp_path, partitions=1)
    writer = store._writer
    store.close()
    ran = []
    writer.callbacks.run_one(lambda arg, exc: ran.append((arg, exc, threading.current_thread())),
                          "offsets", None)
    assert ran == [("offsets", None, threading.current_thread())]


def test_cancelling_a_commit_future_neither_cancels_the_commit_nor_stops_the_writer(tmp_path):
    """A queued commit is written whatever its caller does with the future: ``cancel()`` says
    so by returning False (a cancelled future would also refuse the outcome the writer sets
    on it, which used to kill the async writer thread and hang every later commit)."""
    with open_store(tmp_path, partitions=1) as store:
        futures = [store.commit_async("g", {TP("t", i % 5): i}) for i in range(2000)]
        assert not any(f.cancel() for f in futures)
        store.commit_sync("g", {TP("t", 9): 1}, timeout=30)
        done, pending = wait(futures, timeout=30)
        assert not pending and all(f.exception() is None for f in futures)
        assert not any(f.cancelled() for f in futures)
        assert store.committed("g", TP("t", 4)) == OAM(1999)


@pytest.mark.parametrize("max_bytes", [1024, 4096, 1 << 20])
def test_a_shared_future_resolves_only_once_every_commit_it_carries_is_applied(
        tmp_path, max_bytes):
    """Consecutive ``commit_async`` calls share a future; when it resolves, every one of
    them must be in the table. Small ``max_group_commit_bytes`` make rounds end constantly,
    so a future whose commits were split over two rounds would resolve early and fail here."""
    with open_store(tmp_path, partitions=1, max_group_commit_bytes=max_bytes) as store:
        carried: dict[int, list[tuple[TP, int]]] = collections.defaultdict(list)
        checked: dict[int, int] = {}
        futures = []
        early = []
        lock = threading.Lock()

        def check(fut):  # runs the moment the future resolves, in the leader's thread
            with lock:
                items = list(carried[id(fut)])
                checked[id(fut)] = len(items)
            for tp, offset in items:
                if store.committed("g", tp).offset < offset:
                    early.append((tp, offset))

        stop = threading.Event()

        def sync_committer():  # its items end runs of async items at random places
            n = 0
            while not stop.is_set():
                n += 1
                store.commit_sync("g", {TP("sync", 0): n})

        other = threading.Thread(target=sync_committer)
        other.start()
        try:
            for i in range(3000):
                tp = TP("t", i % 7)
                with lock:  # a future that resolves before add_done_callback runs it here
                    fut = store.commit_async("g", {tp: i})
                    carried[id(fut)].append((tp, i))
                    first = len(carried[id(fut)]) == 1
                if first:
                    futures.append(fut)
                    fut.add_done_callback(check)
                if i % 20 == 0:
                    time.sleep(0.0002)  # let the sync committer in between runs
        finally:
            stop.set()
            other.join()
        wait(futures, timeout=60)
        assert not early, "a future resolved before every commit it carries was applied"
        # ...and no commit joined a future after it resolved
        assert all(checked[id(f)] == len(carried[id(f)]) for f in futures)
        assert len(futures) < 3000  # shared
        if max_bytes == 1024:  # a future holds at most max_bytes of payloads, as bounded
            per_commit = PLAIN_COMMIT_BOUND + len("g") + len("t")
            assert max(len(c) for c in carried.values()) <= 1024 // per_commit


def test_every_sleeping_committer_is_woken_with_chained_and_direct_wakeups_mixed(tmp_path):
    """A round's committers that sleep with no deadline, outside the main thread, are woken
    one by one, each by the one before it; those with a deadline, and the main thread, are
    woken by the leader. Whatever the mix in a round, every one of them must wake: a broken
    link would leave the rest of its round asleep for ever."""
    with open_store(tmp_path, partitions=1) as store:
        errors = []

        def committer(tid: int, timeout) -> None:
            try:
                for seq in range(300):
                    store.commit_sync("g", {TP(f"t{tid}", 0): seq}, timeout=timeout)
            except BaseException as e:  # reported below
                errors.append((tid, repr(e)))

        threads = [threading.Thread(target=committer, args=(i, None if i % 4 else 60.0),
                                    daemon=True)  # a stuck one must not hang the run
                   for i in range(16)]
        for t in threads:
            t.start()
        for seq in range(300):  # the main thread takes part too (never chained)
            store.commit_sync("g", {TP("main", 0): seq})
        deadline = time.monotonic() + 60
        for t in threads:
            t.join(timeout=max(0.0, deadline - time.monotonic()))
        assert not [t for t in threads if t.is_alive()], "committers left asleep"
        assert not errors
        for i in range(16):
            assert store.committed("g", TP(f"t{i}", 0)) == OAM(299)


def test_commits_from_done_callbacks_on_the_writer_thread_amid_chained_committers(
        tmp_path, monkeypatch):
    """The async writer thread may commit from a future's done-callback; it then leads
    rather than sleeps, so it must never be a link of a round's wake-up chain (the committers
    after it would sleep for ever)."""
    from offsetlog.store.group_commit import GroupCommitter
    lead_until_done = GroupCommitter._lead_until_done

    def late(self, *args):  # widen the window in which another leader's round takes it
        time.sleep(0.002)
        return lead_until_done(self, *args)

    monkeypatch.setattr(GroupCommitter, "_lead_until_done", late)
    # "g" (the sync committers and the callbacks' commits) and "h" (the async commits, led
    # by the writer thread, which then runs their done-callbacks) are on log partitions 1, 0
    with open_store(tmp_path, partitions=2) as store:
        assert store.partition_of("g") != store.partition_of("h")
        errors = []
        stop = threading.Event()

        def committer(tid: int) -> None:
            seq = 0
            try:
                while not stop.is_set():
                    seq += 1
                    store.commit_sync("g", {TP(f"t{tid}", 0): seq})
            except BaseException as e:  # reported below
                errors.append((tid, repr(e)))

        threads = [threading.Thread(target=committer, args=(i,), daemon=True)
                   for i in range(8)]
        for t in threads:
            t.start()
        done = []

        def from_callback(fut) -> None:
            try:
                store.commit_sync("g", {TP("cb", 0): len(done)})  # no deadline
                done.append(threading.current_thread().name)
            except BaseException as e:  # reported below
                errors.append(("callback", repr(e)))

        try:
            for i in range(400):
                store.commit_async("h", {TP("async", i % 3): i}).add_done_callback(
                    from_callback)
                if i % 50 == 0:
                    time.sleep(0.002)
            store.flush()
        finally:
            stop.set()
        deadline = time.monotonic() + 60
        for t in threads:
            t.join(timeout=max(0.0, deadline - time.monotonic()))
        assert not [t for t in threads if t.is_alive()], "committers left asleep"
        assert not errors
        assert any(name == "offsetlog-async-writer" for name in done)


def test_a_future_resolved_by_its_caller_does_not_stop_the_writer(tmp_path):
    with open_store(tmp_path, partitions=1) as store:
        futures = [store.commit_async("g", {TP("t", i % 5): i}) for i in range(500)]
        futures[0].set_result("mine")  # misuse: the store resolves its futures itself
        store.commit_sync("g", {TP("t", 9): 1}, timeout=30)
        done, pending = wait(futures, timeout=30)
        assert not pending
        assert store.committed("g", TP("t", 4)) == OAM(499)


def test_a_callback_raising_systemexit_does_not_stop_the_other_callbacks(tmp_path):
    with open_store(tmp_path) as store:
        ran = []

        def bad(arg, exc):
            raise SystemExit("a user's callback")

        store.commit_async("g", {TP("t", 0): 1}, callback=bad).result(timeout=30)
        store.commit_async("g", {TP("t", 0): 2},
                           callback=lambda arg, exc: ran.append(arg)).result(timeout=30)
    assert ran == [{TP("t", 0): 2}]  # close() ran the queued callbacks before returning
