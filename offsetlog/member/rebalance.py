"""The rebalance as the member runs it (Kafka's ``AbstractCoordinator`` and
``ConsumerCoordinator`` join logic): a mixin of :class:`~offsetlog.member.GroupMember`, which
owns the state these methods read and write (see its constructor).

Two halves, on different threads (``offsetlog.member.group_member`` explains why):

* **on the caller's thread**, from ``poll``: :meth:`RebalanceSteps._drive` picks the next step
  (report lost partitions; apply a completed assignment; revoke and rejoin; wait) and runs the
  listener callbacks; nothing else calls user code;
* **on the store's threads**, as future callbacks: the JoinGroup and SyncGroup answers, which
  move the member from ``PreparingRebalance`` to ``CompletingRebalance`` to ``Stable`` without
  waiting for ``poll``; the leader's assignor runs on a short-lived thread of its own.

Errors the coordinator answers to JoinGroup, SyncGroup, Heartbeat (and a commit), and what the
member does (Kafka's choices):

========================  ===================================================================
``RebalanceInProgress``   join again at the next poll; the generation stands (also
                          ``CoordinatorNotAvailable``, the store closing)
``UnknownMemberId``       forget generation and member id: the owned partitions are lost
``IllegalGeneration``     forget the generation, keep the member id: lost, too
``FencedInstanceId``      lost, and the member is unusable: ``poll`` raises it
``MemberIdRequired``      (KIP-394) join again at once with the id the answer carries
anything else             ``poll`` raises it once; the next ``poll`` joins again
========================  ===================================================================
"""

from __future__ import annotations

import logging
import threading
import time
from concurrent.futures import Future
from enum import StrEnum

from offsetlog.assignors import NO_GENERATION, RebalanceProtocol
from offsetlog.errors import (
    FencedInstanceIdError,
    IllegalGenerationError,
    OffsetlogError,
    RebalanceInProgressError,
    UnknownMemberIdError,
)
from offsetlog.group.consumer_protocol import PROTOCOL_TYPE, decode_assignment
from offsetlog.group.errors import CoordinatorNotAvailableError, MemberIdRequiredError
from offsetlog.member.protocol import join_protocols, leader_assignments, topic_snapshot
from offsetlog.types import TopicPartition

log = logging.getLogger("offsetlog.member")


class MemberState(StrEnum):
    """Where the member is in the group protocol (Kafka's ``MemberState``)."""

    #: not in a generation, and no JoinGroup in flight
    UNJOINED = "Unjoined"
    #: JoinGroup sent, waiting for the join phase to complete
    PREPARING_REBALANCE = "PreparingRebalance"
    #: JoinGroup answered (the member knows its new generation); SyncGroup not yet answered
    COMPLETING_REBALANCE = "CompletingRebalance"
    #: in a generation, with its assignment (which ``poll`` may not have applied yet)
    STABLE = "Stable"


_UNJOINED, _PREPARING, _COMPLETING, _STABLE = MemberState


class RebalanceSteps:
    """Mixin: joining, syncing, applying assignments, and falling out of the group."""

    # -- on the caller's thread --------------------------------------------------------------

    def _drive(self, deadline: float, errors: list[BaseException]) -> None:
        """Run the rebalance steps that are due, in this order: report lost partitions; raise
        what must be raised; apply a completed assignment; revoke and rejoin. Return when the
        member is Stable with partitions; otherwise wait (until ``deadline``) for a change."""
        while True:
            with self._cond:
                if self._closed:
                    return
                owned = sorted(self._owned)
                if owned and not self._has_generation():
                    # evicted, left, or fenced: the partitions may be someone else's already
                    self._owned.clear()
                    self._positions.clear()
                    self._previous, self._previous_generation = frozenset(), NO_GENERATION
                    action = "lost"
                elif self._fatal is not None:
                    raise self._fatal
                elif self._async_error is not None:
                    error, self._async_error = self._async_error, None
                    errors.append(error)
                    return
                elif self._pending_assignment is not None and self._state is _STABLE:
                    pending, self._pending_assignment = self._pending_assignment, None
                    action = "assign"
                elif self._rejoin_needed and self._state in (_UNJOINED, _STABLE):
                    action = "join"
                    prepare = self._needs_join_prepare
                    self._needs_join_prepare = False
                elif self._state is _STABLE and self._owned:
                    return  # work to do: the service's partitions
                else:
                    # a rebalance in flight, or nothing owned: wait (like Kafka's poll waiting
                    # for records) until something changes or the time is up
                    remaining = deadline - time.monotonic()
                    if remaining <= 0:
                        return
                    version = self._version
                    self._cond.wait_for(lambda: self._version != version, remaining)
                    continue
            if action == "lost":
                log.info("%s: partitions lost: %s", self, ", ".join(map(str, owned)))
                self._note(errors, self._invoke("on_partitions_lost", owned))
            elif action == "assign":
                self._on_join_complete(*pending, errors)
            else:
                if prepare:
                    self._on_join_prepare(errors)
                counts = self._partition_counts()
                with self._lock:
                    if (not self._closed and self._state in (_UNJOINED, _STABLE)
                            and self._rejoin_needed and self._pending_assignment is None):
                        self._counts = counts
                        self._send_join()

    def _on_join_prepare(self, errors: list[BaseException]) -> None:
        """Before a JoinGroup (Kafka's ``onJoinPrepare``): auto-commit, then revoke everything
        (eager) or the partitions of topics no longer subscribed (cooperative)."""
        with self._lock:
            owned = set(self._owned)
            commit = self._auto_commit and owned and self._has_generation()
        if commit:
            self._commit_quietly(self._positions_of(owned), self._request_timeout_s)
        with self._lock:
            if not self._has_generation():
                return  # lost, not revoked: _drive has reported them already
            if self._protocol is RebalanceProtocol.EAGER:
                revoked = sorted(self._owned)
            else:
                revoked = sorted(tp for tp in self._owned if tp.topic not in self._topics)
            self._is_leader = False
        if revoked or self._protocol is RebalanceProtocol.EAGER:
            self._note(errors, self._invoke("on_partitions_revoked", revoked))
        with self._lock:
            self._owned.difference_update(revoked)
            for tp in revoked:
                self._positions.pop(tp, None)

    def _on_join_complete(self, generation: int, assigned: frozenset[TopicPartition],
                          errors: list[BaseException]) -> None:
        """Apply an assignment (Kafka's ``onJoinComplete``)."""
        with self._lock:
            if any(tp.topic not in self._topics for tp in assigned):
                log.info("%s: assignment %s does not match the subscription %s; rejoining",
                         self, sorted(assigned), sorted(self._topics))
                self._rejoin_needed = True
                self._needs_join_prepare = True
                return
            owned = set(self._owned)
        added = sorted(assigned - owned)
        revoked = sorted(owned - assigned)
        if revoked:
            # cooperative: hand these over; the follow-up rebalance gives them to their new
            # owners once this member has rejoined without them (eager members own nothing here)
            if self._auto_commit:
                self._commit_quietly(self._positions_of(revoked), self._request_timeout_s)
            self._note(errors, self._invoke("on_partitions_revoked", revoked))
            with self._lock:
                self._owned.difference_update(revoked)
                for tp in revoked:
                    self._positions.pop(tp, None)
                self._rejoin_needed = True
        committed = {}
        if added:
            try:
                committed = self._store.fetch(self._group_id, added)
            except OffsetlogError as e:
                self._note(errors, e)
        with self._lock:
            if self._generation != generation or self._closed:
                return  # reset meanwhile (heartbeat thread): _drive reports the loss next
            self._owned = set(assigned)
            for tp in added:
                if tp in committed:
                    self._positions[tp] = committed[tp].offset
            self._owned_generation = generation
            self._previous, self._previous_generation = assigned, generation
            self._needs_join_prepare = True
            if self._auto_commit:
                self._next_auto_commit_ms = self._clock() + self._auto_commit_interval_ms
        log.info("%s: assigned %s", self, ", ".join(map(str, sorted(assigned))) or "nothing")
        self._note(errors, self._invoke("on_partitions_assigned", added))

    def _check_metadata(self) -> None:
        """The leader rejoins when a topic of the group changed its partition count since it
        assigned (Kafka's metadata snapshot check)."""
        with self._lock:
            snapshot = self._assignment_snapshot
            if (snapshot is None or not self._is_leader or self._state is not _STABLE
                    or not callable(self._partitions_per_topic)):
                return
        counts = self._partition_counts()
        if {t: counts.get(t, 0) for t in snapshot} != snapshot:
            with self._lock:
                log.info("%s: partition counts changed; the leader rejoins", self)
                self._assignment_snapshot = None
                self._rejoin_needed = True
                self._bump()

    # -- JoinGroup and SyncGroup, answered on the store's threads ---------------------------

    def _send_join(self) -> None:
        """Send JoinGroup (lock held)."""
        self._join_protocols = join_protocols(
            self._assignors, self._protocol, self._topics, owned=self._owned,
            owned_generation=self._owned_generation, previous=self._previous,
            previous_generation=self._previous_generation)
        self._state = _PREPARING
        self._round += 1
        self._rejoin_needed = False
        self._is_leader = False
        self._bump()
        self._join_again()

    def _join_again(self) -> None:
        try:
            fut = self._store.join_group(
                self._group_id, protocols=self._join_protocols, member_id=self._member_id,
                group_instance_id=self._instance_id, client_id=self._client_id,
                session_timeout_ms=self._session_timeout_ms,
                rebalance_timeout_ms=self._rebalance_timeout_ms, protocol_type=PROTOCOL_TYPE,
                require_known_member_id=True)
        except Exception as e:
            self._failed_request(e)
            return
        self._join_future = fut
        fut.add_done_callback(self._on_join_response)

    def _on_join_response(self, fut: Future) -> None:
        try:
            with self._cond:
                if fut is not self._join_future or self._closed:
                    return
                self._join_future = None
                try:
                    response = fut.result()
                except Exception as e:
                    self._failed_request(e)
                    return
                error = response.error
                if error is None:
                    self._member_id = response.member_id
                    self._generation = response.generation_id
                    self._protocol_name = response.protocol_name
                    self._is_leader = response.is_leader
                    self._state = _COMPLETING
                    if response.is_leader and not response.skip_assignment:
                        # An assignor may be slow (or a custom one): keep it off the store's
                        # thread, which every group's commits wait for.
                        threading.Thread(target=self._assign_and_sync,
                                         args=(response, self._round, self._counts),
                                         name=f"offsetlog-member-assign-{self._group_id}",
                                         daemon=True).start()
                    else:
                        self._send_sync(None)
                elif isinstance(error, MemberIdRequiredError):
                    self._member_id = response.member_id
                    self._join_again()
                else:
                    self._request_error("JoinGroup", error)
                self._flush_deferred()
                self._bump()
        except Exception:  # a bug here must not vanish into the store's thread
            log.exception("%s: handling the JoinGroup answer failed", self)

    def _assign_and_sync(self, response, join_round: int, counts: dict[str, int]) -> None:
        """The leader's part: run the assignor the group voted for over every member's
        subscription, then send SyncGroup with all the assignments."""
        assignments = snapshot = error = None
        try:
            assignor = next(a for a in self._assignors if a.name == response.protocol_name)
            assignments = leader_assignments(assignor, self._protocol, counts, response.members)
            snapshot = topic_snapshot(counts, response.members)
        except Exception as e:
            error = e
        with self._cond:
            if (self._closed or join_round != self._round or self._state is not _COMPLETING
                    or self._sync_future is not None):
                return  # the member moved on meanwhile
            if error is not None:
                log.error("%s: the assignor failed: %r", self, error)
                self._failed_request(error)
                return
            self._assignment_snapshot = snapshot
            self._send_sync(assignments)
            self._bump()

    def _send_sync(self, assignments: dict[str, bytes] | None) -> None:
        try:
            fut = self._store.sync_group(
                self._group_id, member_id=self._member_id, generation_id=self._generation,
                group_instance_id=self._instance_id, protocol_type=PROTOCOL_TYPE,
                protocol_name=self._protocol_name, assignments=assignments)
        except Exception as e:
            self._failed_request(e)
            return
        self._state = _COMPLETING
        self._sync_future = fut
        fut.add_done_callback(self._on_sync_response)

    def _on_sync_response(self, fut: Future) -> None:
        try:
            with self._cond:
                if fut is not self._sync_future or self._closed:
                    return
                self._sync_future = None
                try:
                    response = fut.result()
                    error = response.error
                    assigned = (frozenset(decode_assignment(response.assignment))
                                if error is None else None)
                except Exception as e:
                    self._failed_request(e)
                    return
                if error is None:
                    self._state = _STABLE
                    self._pending_assignment = (self._generation, assigned)
                    self._last_heartbeat_ms = self._clock()
                else:
                    self._request_error("SyncGroup", error)
                self._flush_deferred()
                self._bump()
        except Exception:
            log.exception("%s: handling the SyncGroup answer failed", self)

    def _request_error(self, what: str, error: BaseException) -> None:
        """A JoinGroup or SyncGroup answered with an error (lock held)."""
        log.info("%s: %s answered %r", self, what, error)
        if isinstance(error, UnknownMemberIdError):
            self._reset(error, forget_member_id=True)
        elif isinstance(error, IllegalGenerationError):
            self._reset(error, forget_member_id=False)
        elif isinstance(error, FencedInstanceIdError):
            self._fence(error)
        elif isinstance(error, (RebalanceInProgressError, CoordinatorNotAvailableError)):
            self._state = _UNJOINED  # join again (the next poll); the generation stands
            self._rejoin_needed = True
        else:  # InconsistentGroupProtocol, InvalidSessionTimeout, GroupMaxSizeReached, ...
            self._failed_request(error)

    def _failed_request(self, error: BaseException) -> None:
        """A request could not be sent or answered usefully: poll raises ``error`` once and
        the member joins again at the poll after (lock held)."""
        self._state = _UNJOINED
        self._rejoin_needed = True
        self._join_future = self._sync_future = None
        if not self._closed and not self._closing:
            self._async_error = error
        self._bump()

    # -- falling out of the generation ---------------------------------------------------------

    def _reset(self, error: BaseException, *, forget_member_id: bool) -> None:
        """The member is no longer in its generation (lock held): forget the generation (and
        the member id, unless the coordinator still knows it); the next poll reports the owned
        partitions lost and rejoins (Kafka's ``resetStateAndGeneration``)."""
        self._generation = NO_GENERATION
        if forget_member_id:
            self._member_id = ""
        self._state = _UNJOINED
        self._rejoin_needed = True
        self._pending_assignment = None
        self._is_leader = False
        self._join_future = self._sync_future = None
        self._fail_deferred(error)
        self._bump()

    def _fence(self, error: BaseException) -> None:
        """Another member took this static member's instance id: lost, and unusable."""
        log.error("%s: fenced: %r", self, error)
        self._reset(error, forget_member_id=True)
        self._rejoin_needed = False
        self._fatal = error

    def _leave_for_poll_timeout(self, now: int) -> None:
        """Kafka's heartbeat thread does this when ``poll`` stalls (lock held): leave the group
        (a static member only stops heartbeating), so the others need not wait a session
        timeout for this member's partitions."""
        log.warning("%s: poll() not called for %d ms (max_poll_interval_ms=%d); leaving the "
                    "group", self, now - self._last_poll_ms, self._max_poll_interval_ms)
        member_id = self._member_id
        self._reset(UnknownMemberIdError("the member left the group: poll() was not called "
                                         "within max_poll_interval_ms"), forget_member_id=True)
        if self._instance_id is None and member_id:
            try:
                self._store.leave_group(self._group_id, member_id=member_id)
            except OffsetlogError as e:
                log.info("%s: LeaveGroup failed: %r", self, e)
