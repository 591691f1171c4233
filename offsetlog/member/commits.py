"""How the member commits: a mixin of :class:`~offsetlog.member.GroupMember`.

Every commit goes to the store with the member's generation and member id (and instance id).
The coordinator accepts them in the member's generation while the group is Stable or preparing a
rebalance, and refuses them between the end of the join phase and the leader's SyncGroup
(``RebalanceInProgressError``), and from a member whose generation it has moved past
(``IllegalGenerationError``). A member in that gap holds its commits (:attr:`_deferred`) and
sends them, in call order, once the SyncGroup answer gives it its new generation; the gap lasts
as long as the leader's assignor, since the member answers JoinGroup and SyncGroup on the store's
threads without waiting for ``poll``. A commit refused outside that gap fences the member, as
Kafka's consumer treats it: out of the generation, its partitions are lost.

``commit_async`` callbacks, like Kafka's, run on the caller's thread: in the next ``poll``,
``commit_sync`` or ``close``.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Iterable
from concurrent.futures import Future
from dataclasses import dataclass

from offsetlog.errors import (
    FencedInstanceIdError,
    IllegalGenerationError,
    OffsetlogError,
    RebalanceInProgressError,
    UnknownMemberIdError,
)
from offsetlog.log.records import offset_commit_fields
from offsetlog.member.rebalance import MemberState
from offsetlog.store.futures import running_future
from offsetlog.types import OffsetAndMetadata, TopicPartition

log = logging.getLogger("offsetlog.member")

_PREPARING, _COMPLETING = MemberState.PREPARING_REBALANCE, MemberState.COMPLETING_REBALANCE

#: errors with which the coordinator fences a commit
_FENCES = (IllegalGenerationError, UnknownMemberIdError, RebalanceInProgressError,
           FencedInstanceIdError)

#: ``callback(offsets, exception_or_None)``
CommitCallback = Callable[[dict, BaseException | None], None]


@dataclass
class _Commit:
    offsets: dict
    future: Future
    callback: CommitCallback | None


class OwnedOffsets:
    """Mixin of both kinds of member (classic and consumer protocol): the offsets a commit
    sends, checked, or the positions of the partitions the member owns."""

    def _offsets_to_commit(self, offsets) -> dict:
        """``offsets`` checked (bad input raises at once, even for a commit that will be held),
        or the positions of the owned partitions."""
        with self._lock:
            self._check_open()
            if offsets is None:
                return self._positions_of(self._owned)
        # (the store's own check: its native pass for the usual offsets, check_offsets for
        # the rest; what it builds is not kept, the store builds it again when it commits)
        offset_commit_fields(self._group_id, offsets, 0, self._store.config.metadata_max_bytes)
        return dict(offsets)

    def _positions_of(self, partitions: Iterable[TopicPartition]) -> dict:
        with self._lock:
            return {tp: OffsetAndMetadata(self._positions[tp])
                    for tp in sorted(partitions) if tp in self._positions}


class CommitTracking(OwnedOffsets):
    """Mixin: positions to offsets, commits with the member's generation, auto-commit."""

    def _submit_commit(self, offsets: dict, callback: CommitCallback | None) -> Future:
        commit = _Commit(offsets, running_future(), callback)
        with self._lock:
            self._check_can_commit()
            self._commits_in_flight += 1
            if self._deferred or self._state is _COMPLETING:
                self._deferred.append(commit)  # sent once the SyncGroup is answered
            else:
                self._send_commit(commit)
        return commit.future

    def _check_can_commit(self) -> None:
        """(lock held) Raise unless the member may commit now or have its commit held."""
        self._check_open()
        if self._fatal is not None:
            raise self._fatal
        if not self._has_generation():
            if self._state in (_PREPARING, _COMPLETING) or self._rejoin_needed:
                raise RebalanceInProgressError(
                    f"member of group {self._group_id!r} is joining and has no generation "
                    "yet; poll() and commit again")
            raise UnknownMemberIdError(f"not a member of group {self._group_id!r}: "
                                       "subscribe() and poll() first")

    def _commit_now(self, offsets: dict, timeout: float) -> Future | None:
        """``commit_sync``'s commit: made with the store's ``commit_sync`` on this thread, the
        member's lock released (a round's end may need it: the member answers the group's
        calls on the store's threads), and done on return (None). A commit the member must
        hold (a rebalance between its JoinGroup and SyncGroup answers, or fenced because one
        began meanwhile) is held as ``commit_async``'s are: its future, which resolves once it
        is sent and durable. Through ``commit_async`` and its future, the usual commit took two
        thread hand-offs more: 2.4-3.4x the store's own p50, now 1.3x (bench/RESULTS.md,
        twenty-third session). A commit that times out here raises the store's
        ``CommitTimeoutError`` and stays queued in the store, no longer counted in flight:
        ``close`` does not wait for it, as Kafka's ``commitSync`` leaves its request."""
        while True:
            with self._lock:
                self._check_can_commit()
                if self._deferred or self._state is _COMPLETING:
                    commit = _Commit(offsets, running_future(), None)
                    self._commits_in_flight += 1
                    self._deferred.append(commit)  # sent once the SyncGroup is answered
                    return commit.future
                sent = (self._generation, self._member_id)
                instance = self._instance_id
                self._commits_in_flight += 1  # (close waits for it)
            try:
                self._store.commit_sync(self._group_id, offsets, generation_id=sent[0],
                                        member_id=sent[1], group_instance_id=instance,
                                        timeout=timeout)
                return None
            except _FENCES as e:
                with self._lock:
                    if self._state in (_PREPARING, _COMPLETING):
                        # as _send_commit: the coordinator is ahead of the member; held
                        commit = _Commit(offsets, running_future(), None)
                        self._commits_in_flight += 1
                        self._deferred.append(commit)
                        return commit.future
                    if (self._generation, self._member_id) != sent and self._has_generation():
                        continue  # a rebalance ended meanwhile: sent again, as held ones are
                    self._commit_fenced(e, sent)
                raise
            finally:
                with self._lock:
                    self._commits_in_flight -= 1
                    self._cond.notify_all()

    def _send_commit(self, commit: _Commit) -> None:
        """Commit with the current generation (lock held; the generation is valid and the
        member is not between JoinGroup and SyncGroup answers)."""
        sent = (self._generation, self._member_id)
        try:
            fut = self._store.commit_async(self._group_id, commit.offsets,
                                           generation_id=self._generation,
                                           member_id=self._member_id,
                                           group_instance_id=self._instance_id)
        except _FENCES as e:
            if self._state in (_PREPARING, _COMPLETING):
                # The coordinator is ahead of the member: the join phase completed but its
                # answer has not arrived yet. Send it again once the member knows its new
                # generation (the answer is on its way: every parked request is answered when
                # the coordinator moves on).
                self._deferred.append(commit)
                return
            self._commit_fenced(e, sent)
            self._finish_commit(commit, e)
            return
        except BaseException as e:
            self._finish_commit(commit, e)
            return
        fut.add_done_callback(lambda f: self._finish_commit(commit, f.exception()))

    def _commit_fenced(self, error: BaseException, sent: tuple[int, str]) -> None:
        """The coordinator fenced a commit of a member that thought itself current (lock
        held). As Kafka does: out of the generation -> partitions lost, rejoin."""
        if (self._generation, self._member_id) != sent:
            return
        log.info("%s: commit fenced: %r", self, error)
        if isinstance(error, FencedInstanceIdError):
            self._fence(error)
        elif isinstance(error, RebalanceInProgressError):
            self._rejoin_needed = True
            self._bump()
        else:
            self._reset(error, forget_member_id=isinstance(error, UnknownMemberIdError))

    def _finish_commit(self, commit: _Commit, error: BaseException | None) -> None:
        with self._cond:
            if commit.callback is not None:
                self._completed_callbacks.append((commit.callback, commit.offsets, error))
            self._commits_in_flight -= 1
            self._cond.notify_all()
        if error is None:
            commit.future.set_result(None)
        else:
            commit.future.set_exception(error)

    def _flush_deferred(self) -> None:
        """Send held commits now that the member knows its generation (lock held)."""
        if not self._deferred or self._state is _COMPLETING:
            return
        if not self._has_generation():
            self._fail_deferred(RebalanceInProgressError(
                "the member lost its generation before the commit could be sent"))
            return
        held, self._deferred = self._deferred, []
        for commit in held:
            self._send_commit(commit)

    def _fail_deferred(self, error: BaseException) -> None:
        held, self._deferred = self._deferred, []
        for commit in held:
            self._finish_commit(commit, error)

    def _commit_quietly(self, offsets: dict, timeout: float) -> None:
        """An auto-commit that must finish before what follows (a revocation, a close)."""
        if not offsets:
            return
        try:
            self._submit_commit(offsets, None).result(timeout=timeout)
        except Exception as e:
            log.warning("%s: auto-commit of %d offsets failed: %r", self, len(offsets), e)

    def _run_commit_callbacks(self) -> None:
        with self._lock:
            done, self._completed_callbacks = self._completed_callbacks, []
        for callback, offsets, error in done:
            try:
                callback(offsets, error)
            except Exception:
                log.exception("%s: commit callback %r raised", self, callback)

    def _maybe_auto_commit(self) -> None:
        with self._lock:
            if not self._auto_commit or self._next_auto_commit_ms is None:
                return
            now = self._clock()
            if now < self._next_auto_commit_ms or not self._owned:
                return
            if not self._has_generation() or self._state is _COMPLETING:
                return  # try again at the next poll
            self._next_auto_commit_ms = now + self._auto_commit_interval_ms
            offsets = self._positions_of(self._owned)
        if offsets:
            try:
                self._submit_commit(offsets, self._auto_commit_done)
            except OffsetlogError as e:
                log.warning("%s: auto-commit failed: %r", self, e)

    def _auto_commit_done(self, offsets: dict, error: BaseException | None) -> None:
        if error is not None:
            log.warning("%s: auto-commit of %d offsets failed: %r", self, len(offsets), error)
