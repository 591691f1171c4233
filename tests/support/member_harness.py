"""A harness that drives GroupMembers deterministically (``tests/member/`` uses it).

How time moves: the store and every member share a :class:`ManualClock`; members run without
their heartbeat thread, and :meth:`Harness.step` does what the threads would: advance the clock,
fire the coordinator's deadlines, tick (heartbeat) and poll the members that are "alive", then
:meth:`Harness.settle` until the store has delivered every answer it owes (JoinGroup and
SyncGroup answers are delivered by the store's writer thread once durable, and a leader runs
its assignor on a thread of its own). The harness counts those answers rather than waiting a
fixed real time, so a heavily loaded machine, where the writer thread may not run for many ms,
sees the same states as an idle one. Member ids come from a counter (``<client_id>-<n>``), so
every run is the same.
"""

from __future__ import annotations

import threading
import time

from offsetlog import OffsetStore, TopicPartition
from offsetlog.group import GroupConfig
from offsetlog.member import GroupMember, RebalanceListener

GROUP = "svc"
SESSION = 10_000
HEARTBEAT = 1_000
MAX_POLL = 30_000
STEP = 500


def partitions(topic: str, n: int) -> set[TopicPartition]:
    return {TopicPartition(topic, p) for p in range(n)}


class Recorder(RebalanceListener):
    """Records every callback as ``(kind, partitions, generation)``; ``on_revoked`` and
    ``on_assigned`` (if given) run inside the callbacks as ``hook(member, partitions)``."""

    def __init__(self, on_revoked=None, on_assigned=None) -> None:
        self.member: GroupMember | None = None
        self.events: list[tuple[str, list[TopicPartition], int]] = []
        self.on_revoked = on_revoked
        self.on_assigned = on_assigned

    def _add(self, kind, parts):
        self.events.append((kind, list(parts), self.member.generation_id if self.member else -1))

    def on_partitions_revoked(self, parts):
        self._add("revoked", parts)
        if self.on_revoked is not None:
            self.on_revoked(self.member, parts)

    def on_partitions_assigned(self, parts):
        self._add("assigned", parts)
        if self.on_assigned is not None:
            self.on_assigned(self.member, parts)

    def on_partitions_lost(self, parts):
        self._add("lost", parts)

    def kinds(self) -> list[str]:
        return [k for k, _, _ in self.events]

    def clear(self) -> None:
        self.events.clear()


class Harness:
    def __init__(self, store_dir, clock, *, topics: dict[str, int] | None = None,
                 store_partitions: int = 3, **store_kw) -> None:
        self.store_dir = store_dir
        self.clock = clock
        self.topics = dict(topics or {"t": 6})
        self._store_partitions = store_partitions
        self._store_kw = store_kw
        self._ids = iter(range(1, 1_000_000))
        self._owed_lock = threading.Lock()
        self.store = self._open()
        self.members: list[GroupMember] = []
        #: members that neither tick nor poll (a stalled process)
        self.stalled: set[int] = set()
        #: members that tick (heartbeat thread alive) but do not poll (a stuck processing loop)
        self.not_polling: set[int] = set()
        #: the service's processing, run after every poll of every polling member
        self.work = None

    def _open(self) -> OffsetStore:
        cfg = GroupConfig(member_id_factory=lambda prefix: f"{prefix}-{next(self._ids)}")
        store = OffsetStore.open(self.store_dir, partitions=self._store_partitions,
                                 clock=self.clock, group_config=cfg,
                                 retention_check_interval_ms=0, cleaner_backoff_ms=0,
                                 **self._store_kw)
        self._count_answers(store)
        return store

    def _count_answers(self, store: OffsetStore) -> None:
        """Count every coordinator call (request or deadline poll) from the moment it is queued
        until its answers have been handed to the members. The answer futures run the members'
        callbacks inside the delivery, so when the count is back to zero the members have
        handled them (and any request they sent meanwhile was counted before that)."""
        writer = store._writer
        submit = writer.submit_computed
        #: this store's calls not yet delivered (a reopened store gets a fresh count)
        self._owed = owed = [0]

        def counted_submit(part, compute, timestamp, on_done):
            def counted_done(item):
                try:
                    on_done(item)
                finally:
                    with self._owed_lock:
                        owed[0] -= 1
            with self._owed_lock:
                owed[0] += 1
            try:
                submit(part, compute, timestamp, counted_done)
            except BaseException:
                with self._owed_lock:
                    owed[0] -= 1
                raise

        writer.submit_computed = counted_submit

    def answers_owed(self) -> bool:
        """Whether an answer is on its way to a member: a coordinator call not yet delivered,
        or a leader's assignor still running (its SyncGroup is counted once sent)."""
        if self.store.closed:
            return False  # nothing more will be delivered
        with self._owed_lock:
            if self._owed[0]:
                return True
        return any(t.name.startswith("offsetlog-member-assign-") for t in threading.enumerate())

    def await_answers(self, timeout_s: float = 60.0) -> None:
        """Wait (real time) until the store owes the members nothing; parked JoinGroups and
        SyncGroups are not owed: they wait for the clock or for other members."""
        deadline = time.monotonic() + timeout_s
        while self.answers_owed():
            if time.monotonic() > deadline:
                raise AssertionError(f"group answers still owed after {timeout_s}s")
            time.sleep(0.0005)

    def member(self, name: str, *, topics=None, listener: Recorder | None = None,
               **kw) -> GroupMember:
        kw.setdefault("session_timeout_ms", SESSION)
        kw.setdefault("heartbeat_interval_ms", HEARTBEAT)
        kw.setdefault("max_poll_interval_ms", MAX_POLL)
        kw.setdefault("enable_auto_commit", False)
        kw.setdefault("partitions_per_topic", self.topics)
        m = GroupMember(self.store, GROUP, client_id=name,
                        heartbeat_thread=False, **kw)
        listener = listener if listener is not None else Recorder()
        listener.member = m
        m.listener = listener  # for the tests' convenience
        m.subscribe(list(topics or self.topics), listener)
        self.members.append(m)
        return m

    def live(self) -> list[GroupMember]:
        return [m for m in self.members if not m.closed]

    def remove(self, m: GroupMember) -> None:
        self.members.remove(m)

    # -- driving time ----------------------------------------------------------------------

    def settle(self) -> None:
        """Poll the polling members until nothing changes any more: every answer the store owes
        (and the requests those answers make the members send) has been delivered."""
        quiet, last = 0, None
        for _ in range(500):
            self.store.flush()
            self.await_answers()
            for m in self.live():
                if id(m) not in self.stalled and id(m) not in self.not_polling:
                    m.poll()
                    if self.work is not None:
                        self.work(m)
            snap = [(m.state, m.generation_id, m.member_id, frozenset(m.assignment()))
                    for m in self.live()]
            quiet = quiet + 1 if snap == last and not self.answers_owed() else 0
            last = snap
            if quiet >= 2:
                return
        raise AssertionError("the group never settled")

    def step(self, ms: int = STEP) -> None:
        self.clock.advance(ms)
        self.store.poll_groups()
        self.await_answers()  # what the deadlines caused reaches the members before they tick
        for m in self.live():
            if id(m) not in self.stalled:
                m.tick()
        self.settle()

    def run_until(self, predicate, *, max_ms: int = 120_000, ms: int = STEP) -> None:
        self.settle()
        elapsed = 0
        while not predicate():
            if elapsed >= max_ms:
                raise AssertionError(f"condition not reached in {max_ms} ms of clock: "
                                     + self.describe())
            self.step(ms)
            elapsed += ms

    def run_for(self, ms: int, *, step: int = STEP) -> None:
        for _ in range(ms // step):
            self.step(step)

    def stable(self, members=None) -> bool:
        """The group is Stable and every given member is in its generation with nothing left
        to apply. Without ``members``: every live, non-stalled member, the group has no other
        member (a closed static member stays in the group until its session ends), and no
        SyncGroup is owed (a static member replaced before it synced leaves one owed under its
        old id, and the group rebalances at the sync deadline)."""
        check_all = members is None
        if check_all:
            members = [m for m in self.live() if id(m) not in self.stalled]
        d = self.store.describe_group(GROUP)
        if d is None or d.state != "Stable":
            return False
        ids = {md.member_id for md in d.members}
        if check_all and (ids != {m.member_id for m in members} or self.sync_owed()):
            return False
        return all(not m.rebalance_in_progress and m.generation_id == d.generation
                   and m.member_id in ids for m in members)

    def sync_owed(self) -> set[str]:
        """Member ids the coordinator still waits for a SyncGroup from (its soft state, which
        ``describe_group`` does not show)."""
        part = self.store._parts[self.store.partition_of(GROUP)]
        with part.lock:
            group = part.coordinator._groups.get(GROUP)
            return set(group.pending_sync) if group is not None else set()

    def describe(self) -> str:
        d = self.store.describe_group(GROUP)
        group = None if d is None else (d.state, d.generation, [m.member_id for m in d.members])
        return f"group={group} members=" + "; ".join(
            f"{m.member_id or '?'}:{m.state}/{m.generation_id}/{sorted(map(str, m.assignment()))}"
            for m in self.members)

    def close(self) -> None:
        for m in self.live():
            m.close()
        self.store.close()


def check_exact_cover(members, expected: set[TopicPartition]) -> None:
    """Every partition owned by exactly one member, and nothing else owned."""
    seen: dict[TopicPartition, str] = {}
    for m in members:
        for tp in m.assignment():
            assert tp not in seen, f"{tp} owned by {seen[tp]} and {m.member_id}"
            seen[tp] = m.member_id
    assert set(seen) == expected, f"owned {sorted(seen)} != {sorted(expected)}"


# -- the basic contract -------------------------------------------------------------------
