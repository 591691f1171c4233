"""``GroupMember.commit_sync``'s own commit (``CommitTracking._commit_now``): the store's
``commit_sync`` made on the caller's thread with the member's lock released, and what it does
when the group moves on between the member reading its generation and the coordinator
checking it. The store's threads are stood in for by a store whose commit first does what
they would have done meanwhile."""

from __future__ import annotations

import pytest

from offsetlog import TopicPartition
from offsetlog.errors import IllegalGenerationError, RebalanceInProgressError
from offsetlog.member import MemberState
from support.member_harness import GROUP

TP = TopicPartition("t", 0)


class Meanwhile:
    """The member's store, whose commits first run ``first`` (once), and are recorded."""

    def __init__(self, store, first) -> None:
        self._store = store
        self._first = first
        self.generations: list[int] = []

    def commit_sync(self, group_id, offsets, **kw):
        self.generations.append(kw["generation_id"])
        first, self._first = self._first, None
        if first is not None:
            first()
        return self._store.commit_sync(group_id, offsets, **kw)

    def __getattr__(self, name):
        return getattr(self._store, name)


def test_the_usual_commit_is_the_stores_own_and_leaves_nothing_in_flight(harness):
    a = harness.member("a")
    harness.run_until(harness.stable)
    a._store = store = Meanwhile(harness.store, None)
    a.commit_sync({TP: 5})
    assert store.generations == [a.generation_id]
    assert a._commits_in_flight == 0 and not a._deferred
    assert harness.store.fetch(GROUP)[TP].offset == 5


def test_a_commit_fenced_by_a_rebalance_that_ended_meanwhile_is_sent_again(harness):
    """The member took its new generation while its commit was on its way with the old one:
    sent again with the new one, as a commit held over the rebalance would have been."""
    a = harness.member("a")
    harness.run_until(harness.stable)
    gen = a.generation_id

    def rebalance_ends():
        with a._lock:
            a._generation += 1  # (the SyncGroup answer of a rebalance, arriving meanwhile)
        raise IllegalGenerationError("the coordinator moved on")

    a._store = store = Meanwhile(harness.store, None)
    store.commit_sync = _raising_first(store, rebalance_ends)
    with pytest.raises(IllegalGenerationError):  # (the coordinator does not know gen + 1)
        a.commit_sync({TP: 6})
    assert store.generations == [gen, gen + 1]
    assert a._commits_in_flight == 0


def test_a_commit_fenced_as_a_rebalance_began_is_held_until_it_ends(harness):
    """The member heard its JoinGroup answer while its commit was on its way: held, and
    answered once the member can send it (here: failed when the member closes)."""
    a = harness.member("a")
    harness.run_until(harness.stable)

    def rebalance_begins():
        with a._lock:
            a._state = MemberState.COMPLETING_REBALANCE
        raise RebalanceInProgressError("the group is rebalancing")

    store = Meanwhile(harness.store, None)
    store.commit_sync = _raising_first(store, rebalance_begins)
    a._store = store
    held = a._commit_now({TP: 7}, 5.0)
    assert held is not None and not held.done()
    assert len(a._deferred) == 1 and a._commits_in_flight == 1
    with a._lock:
        a._fail_deferred(RebalanceInProgressError("lost its generation"))
    assert isinstance(held.exception(5), RebalanceInProgressError)
    assert a._commits_in_flight == 0 and harness.store.fetch(GROUP) == {}  # nothing written


def _raising_first(store: Meanwhile, first):
    """``store.commit_sync`` whose first call records its generation and runs ``first``
    (which raises) instead of committing."""
    real = Meanwhile.commit_sync.__get__(store)
    calls = []

    def commit_sync(group_id, offsets, **kw):
        if not calls:
            calls.append(kw["generation_id"])
            store.generations.append(kw["generation_id"])
            first()
        return real(group_id, offsets, **kw)

    return commit_sync
