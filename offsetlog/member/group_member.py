"""An embeddable consumer-group member (Kafka's ``KafkaConsumer`` group management and
``ConsumerCoordinator``), driving the coordinator of an :class:`~offsetlog.store.OffsetStore` in
the same process.

Theory of operation
-------------------

Three kinds of thread touch a member, and each has its own job:

* **the caller's thread** (``poll``, ``commit_*``, ``seek``, ``close``): everything the service
  sees. Listener callbacks and ``commit_async`` callbacks run here, inside ``poll`` (or
  ``close``), never elsewhere. ``poll`` starts a rebalance when one is needed (after the eager
  revocation and the auto-commit that precedes it), applies a completed one (cooperative
  revocation, assignment, positions from the committed offsets), reports lost partitions, and
  auto-commits when due.
* **the heartbeat thread** (or the test calling :meth:`GroupMember.tick`): heartbeats every
  ``heartbeat_interval_ms``, turns the answers into flags for ``poll`` (rejoin; partitions lost;
  fenced), and leaves the group when ``poll`` has not been called for ``max_poll_interval_ms``.
* **the store's threads**, which resolve the JoinGroup and SyncGroup futures: the member handles
  the answers at once, in future callbacks, as Kafka's network client does. A JoinGroup answer
  makes every member send its SyncGroup (the leader after running the assignor, on a short-lived
  thread of its own); a SyncGroup answer makes the member Stable, its new assignment waiting for
  ``poll``. Nothing here runs user code or blocks, so a group completes a rebalance as soon as
  its members have rejoined, whoever polls when (one test thread can drive several members).

Member states (Kafka's ``MemberState``): ``Unjoined`` -> ``PreparingRebalance`` (JoinGroup sent)
-> ``CompletingRebalance`` (JoinGroup answered, SyncGroup not yet) -> ``Stable``; errors lead
back to ``Unjoined``. ``offsetlog.member.rebalance`` has the steps and the error table,
``offsetlog.member.commits`` the commit rules.

Commits use the member's generation and id. The coordinator accepts them while the group
prepares a rebalance (with the generation the member still holds) and refuses them between the
join phase and the leader's SyncGroup; a commit that falls in that gap (the member is in
``CompletingRebalance``, or the coordinator moved on before the member heard of it) is held and
sent as soon as the member knows its new generation. So a cooperative member commits the
partitions it keeps throughout a rebalance, where Kafka's consumer fails such commits with
``RebalanceInProgressException``.

Locking: one re-entrant lock guards the member's state. It is never held while user code runs or
while waiting for the store; the store's locks are only ever taken inside it, never the reverse.
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable, Iterable, Mapping
from concurrent.futures import Future

from offsetlog.assignors import (
    NO_GENERATION,
    PartitionAssignor,
    RebalanceProtocol,
    get_assignor,
    select_rebalance_protocol,
)
from offsetlog.errors import CommitTimeoutError, StoreClosedError
from offsetlog.member.commits import CommitCallback, CommitTracking, _Commit
from offsetlog.member.errors import MemberClosedError, NotSubscribedError, PartitionNotAssignedError
from offsetlog.member.heartbeat import ClassicHeartbeat
from offsetlog.member.listener import RebalanceListener, invoke, note
from offsetlog.member.rebalance import MemberState, RebalanceSteps
from offsetlog.store.futures import resolved_future
from offsetlog.types import OffsetAndMetadata, TopicPartition
from offsetlog.validation import check_group_id, check_partition

log = logging.getLogger("offsetlog.member")

_UNJOINED, _PREPARING, _COMPLETING, _STABLE = MemberState


class GroupMember(RebalanceSteps, CommitTracking, ClassicHeartbeat):
    """One member of a consumer group, for a service that consumes in the same process as its
    :class:`~offsetlog.store.OffsetStore`.

    Example (docs/MEMBER.md has a runnable one)::

        member = GroupMember(store, "billing", partitions_per_topic={"orders": 6})
        member.subscribe(["orders"], listener=MyListener())
        while running:
            for tp in member.poll(timeout_ms=100):
                next_offset = process(tp, member.position(tp))
                member.record_consumed(tp, next_offset)
        member.close()

    :param store: an open store; its coordinator runs the group
    :param group_id: the group to join
    :param partitions_per_topic: topic -> partition count, or a callable returning that (called
        on the caller's thread when the member joins, and by the leader in ``poll`` to notice
        new partitions, which trigger a rebalance)
    :param client_id: prefix of the member id the coordinator gives a dynamic member
    :param group_instance_id: makes the member static (KIP-345): a restart within the session
        timeout keeps its assignment without a rebalance; it does not leave the group on close
    :param assignors: names (or instances) of assignors, most preferred first; the member runs
        the most advanced rebalance protocol they all support (``("cooperative-sticky",)``:
        cooperative; anything with an eager-only assignor: eager)
    :param session_timeout_ms: ms without a heartbeat before the coordinator evicts the member
    :param heartbeat_interval_ms: ms between heartbeats; below ``session_timeout_ms``
    :param max_poll_interval_ms: ms the service may go without calling ``poll`` before the
        member leaves the group (its partitions are then lost)
    :param rebalance_timeout_ms: ms the group waits for the member to rejoin a rebalance;
        defaults to ``max_poll_interval_ms``, as in Kafka
    :param enable_auto_commit: commit the positions of owned partitions every
        ``auto_commit_interval_ms`` (in ``poll``), before partitions are revoked, and on close
    :param auto_commit_interval_ms: ms between auto-commits
    :param clock: callable returning epoch ms; defaults to the store's clock
    :param heartbeat_thread: start the heartbeat thread on the first ``poll``; tests that drive
        time by hand pass False and call :meth:`tick`
    :param request_timeout_ms: real-time ms a blocking call (``commit_sync``, ``close``, a
        heartbeat) waits for the store
    :param group_protocol: ``"classic"`` (JoinGroup/SyncGroup, the assignor runs in the
        leader), or ``"consumer"`` (KIP-848: the store's coordinator assigns; the result is
        an :class:`~offsetlog.member.consumer_member.ConsumerGroupMember`, with the same
        methods, whose ``server_assignor`` and ``rack_id`` replace ``assignors``,
        ``session_timeout_ms`` and ``heartbeat_interval_ms``; docs/MEMBER.md)
    """

    def __new__(cls, *args, group_protocol: str = "classic", **kwargs):
        # group_protocol="consumer": a member of the consumer group protocol (KIP-848), as
        # Kafka's KafkaConsumer delegates to its AsyncKafkaConsumer for group.protocol=consumer
        if group_protocol == "consumer" and cls is GroupMember:
            from offsetlog.member.consumer_member import ConsumerGroupMember

            return ConsumerGroupMember(*args, **kwargs)
        if group_protocol not in ("classic", "consumer"):
            raise ValueError(f"group_protocol must be 'classic' or 'consumer', not "
                             f"{group_protocol!r}")
        return super().__new__(cls)

    def __init__(self, store, group_id: str, *,
                 partitions_per_topic: Mapping[str, int] | Callable[[], Mapping[str, int]],
                 client_id: str = "", group_instance_id: str | None = None,
                 assignors: Iterable[str | PartitionAssignor] = ("range",),
                 session_timeout_ms: int = 45_000, heartbeat_interval_ms: int = 3_000,
                 max_poll_interval_ms: int = 300_000, rebalance_timeout_ms: int | None = None,
                 enable_auto_commit: bool = True, auto_commit_interval_ms: int = 5_000,
                 clock: Callable[[], int] | None = None, heartbeat_thread: bool = True,
                 request_timeout_ms: int = 30_000, group_protocol: str = "classic") -> None:
        check_group_id(group_id)
        if not isinstance(client_id, str):
            raise TypeError(f"client_id must be a str, not {type(client_id).__name__}")
        if group_instance_id is not None and (not isinstance(group_instance_id, str)
                                              or not group_instance_id):
            raise ValueError("group_instance_id must be None or a non-empty str")
        if not (callable(partitions_per_topic) or isinstance(partitions_per_topic, Mapping)):
            raise TypeError("partitions_per_topic must be a mapping of topic -> partition "
                            "count, or a callable returning one")
        for name, value in (("session_timeout_ms", session_timeout_ms),
                            ("heartbeat_interval_ms", heartbeat_interval_ms),
                            ("max_poll_interval_ms", max_poll_interval_ms),
                            ("auto_commit_interval_ms", auto_commit_interval_ms),
                            ("request_timeout_ms", request_timeout_ms),
                            ("rebalance_timeout_ms", rebalance_timeout_ms)):
            if value is None and name == "rebalance_timeout_ms":
                continue
            if not isinstance(value, int) or isinstance(value, bool) or value <= 0:
                raise ValueError(f"{name} must be an int > 0, not {value!r}")
        if heartbeat_interval_ms >= session_timeout_ms:
            raise ValueError("heartbeat_interval_ms must be below session_timeout_ms")
        if isinstance(assignors, (str, PartitionAssignor)):
            assignors = (assignors,)
        self._assignors = tuple(get_assignor(a) if isinstance(a, str) else a for a in assignors)
        if not self._assignors:
            raise ValueError("at least one assignor is needed")
        for a in self._assignors:
            if not isinstance(a, PartitionAssignor):
                raise TypeError(f"assignors must be names or PartitionAssignor instances, "
                                f"not {a!r}")
        if len({a.name for a in self._assignors}) != len(self._assignors):
            raise ValueError("an assignor is listed twice")

        self._store = store
        self._group_id = group_id
        self._client_id = client_id
        self._instance_id = group_instance_id
        self._partitions_per_topic = partitions_per_topic
        self._protocol = select_rebalance_protocol(self._assignors)
        self._session_timeout_ms = session_timeout_ms
        self._heartbeat_interval_ms = heartbeat_interval_ms
        self._max_poll_interval_ms = max_poll_interval_ms
        self._rebalance_timeout_ms = (max_poll_interval_ms if rebalance_timeout_ms is None
                                      else rebalance_timeout_ms)
        self._auto_commit = bool(enable_auto_commit)
        self._auto_commit_interval_ms = auto_commit_interval_ms
        self._clock = clock if clock is not None else store.config.clock
        self._use_heartbeat_thread = bool(heartbeat_thread)
        self._request_timeout_s = request_timeout_ms / 1000.0

        self._lock = threading.RLock()
        self._cond = threading.Condition(self._lock)
        #: bumped (and waiters woken) on every change a waiter may care about
        self._version = 0
        # -- membership
        self._state = _UNJOINED
        self._member_id = ""
        self._generation = NO_GENERATION
        self._protocol_name: str | None = None
        self._is_leader = False
        self._join_future: Future | None = None
        self._sync_future: Future | None = None
        self._join_protocols: list[tuple[str, bytes]] = []
        self._counts: dict[str, int] = {}
        #: bumped at every JoinGroup round; a leader's assignment of an older round is dropped
        self._round = 0
        #: the leader's partition counts of the group's topics when it last assigned
        self._assignment_snapshot: dict[str, int] | None = None
        # -- what poll must do
        self._rejoin_needed = False
        self._needs_join_prepare = True
        self._pending_assignment: tuple[int, frozenset[TopicPartition]] | None = None
        self._async_error: BaseException | None = None
        self._fatal: BaseException | None = None
        # -- subscription and assignment
        self._topics: frozenset[str] = frozenset()
        self._listener = RebalanceListener()
        self._owned: set[TopicPartition] = set()
        self._owned_generation = NO_GENERATION
        self._previous: frozenset[TopicPartition] = frozenset()
        self._previous_generation = NO_GENERATION
        self._positions: dict[TopicPartition, int] = {}
        # -- timers, in the member clock's ms
        self._last_poll_ms: int | None = None
        self._last_heartbeat_ms: int | None = None
        self._next_auto_commit_ms: int | None = None
        # -- commits
        self._deferred: list[_Commit] = []
        self._commits_in_flight = 0
        self._completed_callbacks: list[tuple[CommitCallback, dict, BaseException | None]] = []
        # -- lifecycle
        self._closing = False
        self._closed = False
        self._in_poll = False
        self._hb_thread: threading.Thread | None = None
        self._hb_stop = threading.Event()

    def __repr__(self) -> str:
        return (f"<GroupMember group={self._group_id!r} member={self._member_id!r} "
                f"generation={self._generation} {self._state}>")

    def __enter__(self) -> "GroupMember":
        return self

    def __exit__(self, *exc) -> None:
        self.close()

    @property
    def group_id(self) -> str:
        return self._group_id

    @property
    def group_instance_id(self) -> str | None:
        return self._instance_id

    @property
    def member_id(self) -> str:
        """The id the coordinator gave this member (``""`` before it joined, or after it was
        evicted or left)."""
        return self._member_id

    @property
    def generation_id(self) -> int:
        """The generation the member is in (-1: none)."""
        return self._generation

    @property
    def state(self) -> MemberState:
        return self._state

    @property
    def is_leader(self) -> bool:
        return self._is_leader

    @property
    def protocol_name(self) -> str | None:
        """The assignor the group voted for in the member's generation."""
        return self._protocol_name

    @property
    def rebalance_protocol(self) -> RebalanceProtocol:
        return self._protocol

    @property
    def closed(self) -> bool:
        return self._closed

    def subscription(self) -> frozenset[str]:
        return self._topics

    def assignment(self) -> set[TopicPartition]:
        """The partitions this member owns now."""
        with self._lock:
            return set(self._owned)

    @property
    def rebalance_in_progress(self) -> bool:
        """Whether the member has a rebalance to go through or to finish: it must (re)join, a
        JoinGroup or SyncGroup is in flight, or ``poll`` has yet to apply its new assignment."""
        with self._lock:
            return bool(self._topics) and (self._state is not _STABLE or self._rejoin_needed
                                           or self._pending_assignment is not None)

    # -- subscribing and positions -----------------------------------------------------------

    def subscribe(self, topics: Iterable[str], listener: RebalanceListener | None = None
                  ) -> None:
        """Subscribe to ``topics`` (replacing any earlier subscription); the next ``poll``
        joins the group, or rejoins it if the topics changed.

        :param listener: gets the rebalance callbacks (any object with some of the
            :class:`RebalanceListener` methods); None: no callbacks
        """
        if isinstance(topics, str):
            raise TypeError("topics must be a list of topic names, not a single str")
        topics = frozenset(topics)
        if not topics:
            raise ValueError("subscribe to at least one topic (close() leaves the group)")
        for t in topics:
            if not isinstance(t, str) or not t:
                raise TypeError(f"topic names must be non-empty str, not {t!r}")
        with self._lock:
            self._check_open()
            self._listener = listener if listener is not None else RebalanceListener()
            if topics != self._topics:
                self._topics = topics
                self._rejoin_needed = True
                self._bump()

    def seek(self, tp: TopicPartition, offset: int) -> None:
        """Set the position of an owned partition: the offset of the next record to process,
        which is what auto-commit and ``commit_*()`` commit.

        :raises PartitionNotAssignedError: the member does not own ``tp``
        """
        tp = check_partition(tp)
        if not isinstance(offset, int) or isinstance(offset, bool) or offset < 0:
            raise ValueError(f"offset must be an int >= 0, not {offset!r}")
        with self._lock:
            self._check_open()
            if tp not in self._owned:
                raise PartitionNotAssignedError(tp)
            self._positions[tp] = offset

    def record_consumed(self, tp: TopicPartition, next_offset: int) -> None:
        """Say that everything of ``tp`` before ``next_offset`` has been processed (the same as
        ``seek(tp, next_offset)``; the name says what a service means by it)."""
        self.seek(tp, next_offset)

    def position(self, tp: TopicPartition) -> int | None:
        """The next offset to process of an owned partition: the last ``seek``, else the
        committed offset when it was assigned, else None (nothing committed yet).

        :raises PartitionNotAssignedError: the member does not own ``tp``
        """
        tp = check_partition(tp)
        with self._lock:
            if tp not in self._owned:
                raise PartitionNotAssignedError(tp)
            return self._positions.get(tp)

    def committed(self, tp: TopicPartition) -> OffsetAndMetadata | None:
        """The group's committed offset of ``tp`` in the store."""
        return self._store.committed(self._group_id, tp)

    # -- the processing loop and the heartbeat ---------------------------------------------

    def poll(self, timeout_ms: int = 0) -> set[TopicPartition]:
        """Run whatever the group needs from this member, on the caller's thread.

        Joins (or rejoins) the group when needed, runs the listener callbacks and the
        callbacks of completed ``commit_async`` calls, and auto-commits when due. It returns at
        once when the member owns partitions and the group needs nothing more from it;
        otherwise (a rebalance in progress, or no partitions) it waits up to ``timeout_ms`` of
        real time for that to change, as Kafka's ``poll`` waits for records. Call it at least
        every ``max_poll_interval_ms``.

        :return: the partitions the member owns now
        :raises FencedInstanceIdError: another member took this static member's instance id
            (after ``on_partitions_lost``); the member is unusable
        :raises NotSubscribedError: ``subscribe`` was never called
        :raises StoreClosedError: the store (and with it the group) is closed
        :raises: an exception of a listener callback (after the rebalance step it was part of
            completed), or a JoinGroup error the member cannot handle
            (``InconsistentGroupProtocolError``, ``InvalidSessionTimeoutError``, ...; the next
            ``poll`` tries again)
        """
        if not isinstance(timeout_ms, int) or isinstance(timeout_ms, bool) or timeout_ms < 0:
            raise ValueError(f"timeout_ms must be an int >= 0, not {timeout_ms!r}")
        deadline = time.monotonic() + timeout_ms / 1000.0
        with self._lock:
            self._check_open()
            if self._closing:
                raise MemberClosedError(f"the member of group {self._group_id!r} is closing")
            if self._store.closed:  # its group is gone with the store: nothing owned any more
                raise StoreClosedError(f"the store of group {self._group_id!r}'s member is "
                                       "closed")
            if self._in_poll:
                raise RuntimeError("poll() while poll() runs (from a rebalance callback, or "
                                   "another thread: a member is for one thread)")
            if not self._topics:
                raise NotSubscribedError("subscribe() before poll()")
            self._last_poll_ms = self._clock()
            self._in_poll = True
            if self._use_heartbeat_thread and self._hb_thread is None:
                self._hb_thread = threading.Thread(
                    target=self._heartbeat_loop, daemon=True,
                    name=f"offsetlog-member-heartbeat-{self._group_id}")
                self._hb_thread.start()
        errors: list[BaseException] = []
        try:
            self._run_commit_callbacks()
            self._check_metadata()
            self._drive(deadline, errors)
            self._maybe_auto_commit()
        finally:
            with self._lock:
                self._in_poll = False
        if errors:
            raise errors[0]
        return self.assignment()

    # -- commits -------------------------------------------------------------------------------

    def commit_sync(self, offsets: Mapping[TopicPartition, OffsetAndMetadata | int] | None = None,
                    *, timeout_ms: int | None = None) -> None:
        """Commit ``offsets`` (default: the positions of the owned partitions) with the
        member's generation and id; return once durable.

        :raises UnknownMemberIdError, IllegalGenerationError: the member is no longer in the
            group (its partitions are lost; ``poll`` rejoins)
        :raises RebalanceInProgressError: the member is rejoining without a generation, or the
            rebalance did not complete within the timeout
        :raises FencedInstanceIdError: another member took this static member's instance id
        :raises CommitTimeoutError: not durable within ``timeout_ms`` (default:
            ``request_timeout_ms``); it may still be applied
        :raises InvalidCommitError: bad offsets; nothing was written
        """
        offsets = self._offsets_to_commit(offsets)
        try:
            if offsets:
                timeout = self._request_timeout_s if timeout_ms is None else timeout_ms / 1000.0
                # The usual commit is the store's own commit_sync, made on this thread; one
                # held for a rebalance's end comes back as a future, as commit_async's do.
                fut = self._commit_now(offsets, timeout)
                if fut is not None:
                    try:
                        fut.result(timeout=timeout)
                    except TimeoutError:
                        raise CommitTimeoutError(
                            f"commit of {len(offsets)} offsets not done after {timeout}s"
                        ) from None
        finally:
            self._run_commit_callbacks()

    def commit_async(self, offsets: Mapping[TopicPartition, OffsetAndMetadata | int] | None = None,
                     callback: CommitCallback | None = None) -> Future:
        """Queue a commit of ``offsets`` (default: the positions of the owned partitions).

        :param callback: ``callback(offsets, exception_or_None)``, run on the caller's thread
            by a later ``poll``, ``commit_sync`` or ``close`` (as Kafka runs commit callbacks)
        :return: a Future that resolves once the commit is durable, or fails with the error
            that fenced it
        """
        offsets = self._offsets_to_commit(offsets)
        if not offsets:
            fut = resolved_future()
            if callback is not None:
                with self._lock:
                    self._completed_callbacks.append((callback, offsets, None))
            return fut
        return self._submit_commit(offsets, callback)

    # -- closing -------------------------------------------------------------------------------

    def close(self, *, timeout_ms: int | None = None) -> None:
        """Leave the group cleanly: auto-commit (if enabled), wait for pending async commits,
        revoke the owned partitions (``on_partitions_revoked``; ``on_partitions_lost`` if the
        member was out of the group or in the middle of a rebalance), and send LeaveGroup.

        A static member does not send LeaveGroup (as in Kafka): the group keeps its place, and
        its assignment, until its session times out, so a restart within that time causes no
        rebalance. Idempotent; errors are logged, not raised.
        """
        with self._lock:
            if self._closed or self._closing:
                return
            if self._in_poll:
                raise RuntimeError("close() while poll() runs (from a rebalance callback, or "
                                   "another thread: a member is for one thread)")
            self._closing = True
        timeout = self._request_timeout_s if timeout_ms is None else timeout_ms / 1000.0
        self._hb_stop.set()
        if self._hb_thread is not None and self._hb_thread is not threading.current_thread():
            self._hb_thread.join()
        try:
            with self._lock:
                commit = self._auto_commit and self._has_generation() and self._owned
            if commit:
                self._commit_quietly(self._positions_of(self._owned), timeout)
            deadline = time.monotonic() + timeout
            with self._cond:
                self._cond.wait_for(lambda: self._commits_in_flight == 0,
                                    max(deadline - time.monotonic(), 0))
            self._run_commit_callbacks()
            with self._lock:
                dropped = sorted(self._owned)
                lost = not self._has_generation() or self._state in (_PREPARING, _COMPLETING)
                self._owned.clear()
                self._positions.clear()
            if dropped:
                error = self._invoke("on_partitions_lost" if lost else "on_partitions_revoked",
                                     dropped)
                if error is not None:
                    log.error("%s: rebalance callback failed during close: %r", self, error)
            with self._lock:
                member_id = self._member_id
            if self._instance_id is None and member_id:
                try:
                    self._store.leave_group(self._group_id, member_id=member_id).result(timeout)
                except Exception as e:
                    log.info("%s: LeaveGroup on close failed: %r", self, e)
        finally:
            with self._lock:
                self._closed = True
                self._join_future = self._sync_future = None
                self._state = _UNJOINED
                self._fail_deferred(MemberClosedError("the member was closed"))
                self._bump()

    # -- plumbing ------------------------------------------------------------------------------

    def _partition_counts(self) -> dict[str, int]:
        source = self._partitions_per_topic
        counts = source() if callable(source) else source
        if not isinstance(counts, Mapping):
            raise TypeError("partitions_per_topic() must return a mapping of topic -> count")
        return dict(counts)

    def _invoke(self, method: str, partitions: list[TopicPartition]) -> BaseException | None:
        return invoke(self._listener, method, partitions, self)

    _note = staticmethod(note)

    def _has_generation(self) -> bool:
        return self._generation != NO_GENERATION and bool(self._member_id)

    def _bump(self) -> None:
        self._version += 1
        self._cond.notify_all()

    def _check_open(self) -> None:
        if self._closed:
            raise MemberClosedError(f"the member of group {self._group_id!r} is closed")
