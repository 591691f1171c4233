"""An embeddable member on the consumer group protocol (KIP-848): Kafka's ``AsyncKafkaConsumer``
group membership (``group.protocol=consumer``) for a service whose store runs the group in the
same process. Made by ``GroupMember(store, group, group_protocol="consumer", ...)``.

Theory of operation
-------------------

The coordinator computes the assignment (``store.consumer_groups``, offsetlog.group.consumer);
the member only heartbeats and reconciles, as Kafka's ``ConsumerMembershipManager`` does:

* **heartbeat** (the heartbeat thread, or a test calling :meth:`tick`): a
  ConsumerGroupHeartbeat every ``heartbeat_interval_ms`` the coordinator names, reporting the
  partitions the member *owns now*; the first (epoch 0) carries the subscription, the
  rebalance timeout and the server assignor. An answer with an assignment leaves it for
  ``poll``; one that fences the member (FENCED_MEMBER_EPOCH, UNKNOWN_MEMBER_ID) marks its
  partitions lost. Heartbeats stop until ``poll`` has dealt with that, so the member never
  rejoins while the service still holds partitions.
* **poll** (the caller's thread) reconciles: partitions no longer in the assignment are
  revoked (auto-commit first, then ``on_partitions_revoked``) and only then dropped from what
  the heartbeat reports; new ones get their committed positions and
  ``on_partitions_assigned``. It then asks for a heartbeat at once, to acknowledge. The
  coordinator gives a partition to a member only once its previous owner has reported it no
  longer owns it, so no partition is ever owned by two members (tests/member/
  test_consumer_member.py checks that after every step).

Commits carry the member epoch (``commit_sync``'s ``generation_id``, as OffsetCommit's
``generation_id_or_member_epoch``); a STALE_MEMBER_EPOCH because a heartbeat moved the epoch on
meanwhile is retried once with the new epoch, as Kafka's consumer does. The session timeout and
heartbeat interval are the coordinator's (``group.consumer.*``), not the member's: passing the
classic ``session_timeout_ms``, ``heartbeat_interval_ms`` or ``assignors`` is an error, as
Kafka refuses ``session.timeout.ms`` and ``partition.assignment.strategy`` with this protocol.

Locking: one re-entrant lock; never held while user code runs or while waiting for the store.
"""

from __future__ import annotations

import logging
import threading
import time
import uuid
from collections.abc import Callable, Iterable, Mapping
from concurrent.futures import Future

from offsetlog.errors import FencedInstanceIdError, OffsetlogError, UnknownMemberIdError
from offsetlog.group.consumer.errors import (
    FencedMemberEpochError,
    InvalidRequestError,
    StaleMemberEpochError,
    UnreleasedInstanceIdError,
    UnsupportedAssignorError,
)
from offsetlog.group.errors import GroupMaxSizeReachedError
from offsetlog.member.commits import OwnedOffsets
from offsetlog.member.errors import MemberClosedError, NotSubscribedError, PartitionNotAssignedError
from offsetlog.member.listener import RebalanceListener, invoke
from offsetlog.types import OffsetAndMetadata, TopicPartition
from offsetlog.validation import check_group_id, check_partition

log = logging.getLogger("offsetlog.member")

#: answers after which the member must give up its partitions and join again (epoch 0)
_FENCED = (FencedMemberEpochError, UnknownMemberIdError)
#: answers after which the member cannot go on (Kafka's consumer treats them as fatal)
_FATAL = (FencedInstanceIdError, UnreleasedInstanceIdError, GroupMaxSizeReachedError,
          UnsupportedAssignorError, InvalidRequestError)
#: settings of the classic protocol that this one takes from the coordinator instead
CLASSIC_ONLY = ("assignors", "session_timeout_ms", "heartbeat_interval_ms")


class ConsumerGroupMember(OwnedOffsets):
    """One member of a consumer-protocol group; see the module docstring. The parameters
    are :class:`~offsetlog.member.GroupMember`'s, except that the coordinator sets the session
    timeout and heartbeat interval and runs the assignor:

    :param server_assignor: the assignor to ask the coordinator for (``"uniform"``,
        ``"range"``; Kafka's ``group.remote.assignor``); None: the coordinator's default
    :param rack_id: the member's rack (kept and shown; the assignors do not use it)
    """

    def __init__(self, store, group_id: str, *,
                 partitions_per_topic: Mapping[str, int] | Callable[[], Mapping[str, int]],
                 client_id: str = "", group_instance_id: str | None = None,
                 server_assignor: str | None = None, rack_id: str | None = None,
                 max_poll_interval_ms: int = 300_000, rebalance_timeout_ms: int | None = None,
                 enable_auto_commit: bool = True, auto_commit_interval_ms: int = 5_000,
                 clock: Callable[[], int] | None = None, heartbeat_thread: bool = True,
                 request_timeout_ms: int = 30_000, **classic) -> None:
        check_group_id(group_id)
        for name in classic:
            if name in CLASSIC_ONLY:
                raise ValueError(f"{name} is not supported with group_protocol='consumer': the "
                                 "coordinator sets it (group.consumer.* settings)")
            raise TypeError(f"unexpected keyword argument {name!r}")
        if group_instance_id is not None and (not isinstance(group_instance_id, str)
                                              or not group_instance_id):
            raise ValueError("group_instance_id must be None or a non-empty str")
        for name, value in (("max_poll_interval_ms", max_poll_interval_ms),
                            ("auto_commit_interval_ms", auto_commit_interval_ms),
                            ("request_timeout_ms", request_timeout_ms)):
            if not isinstance(value, int) or isinstance(value, bool) or value <= 0:
                raise ValueError(f"{name} must be an int > 0, not {value!r}")
        self._store, self._group_id, self._client_id = store, group_id, client_id
        self._instance_id, self._rack_id = group_instance_id, rack_id
        self._server_assignor = server_assignor
        self._partitions_per_topic = partitions_per_topic
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
        # membership: a member id of its own (ConsumerGroupHeartbeat v1), kept across rejoins
        self._member_id = f"{client_id}-{uuid.uuid4()}" if client_id else str(uuid.uuid4())
        self._epoch = 0
        self._heartbeat_interval_ms = 0  # until the coordinator says: heartbeat at once
        self._last_heartbeat_ms: int | None = None
        self._ack_needed = False
        self._subscription_changed = False
        self._target: frozenset[TopicPartition] | None = None  # an assignment poll must apply
        self._lost_pending = False  # fenced: poll must drop the partitions before a rejoin
        self._fatal: BaseException | None = None
        # subscription and assignment
        self._topics: frozenset[str] = frozenset()
        self._listener: object = RebalanceListener()
        self._owned: set[TopicPartition] = set()
        self._positions: dict[TopicPartition, int] = {}
        self._last_poll_ms: int | None = None
        self._next_auto_commit_ms: int | None = None
        self._completed: list[tuple] = []  # (callback, offsets, error) for the caller's thread
        self._closing = self._closed = False
        self._hb_thread: threading.Thread | None = None
        self._hb_stop = threading.Event()

    def __repr__(self) -> str:
        return (f"<ConsumerGroupMember group={self._group_id!r} member={self._member_id!r} "
                f"epoch={self._epoch}>")

    def __enter__(self) -> "ConsumerGroupMember":
        return self

    def __exit__(self, *exc) -> None:
        self.close()

    # -- views ---------------------------------------------------------------------------

    group_protocol = "consumer"

    @property
    def group_id(self) -> str:
        return self._group_id

    @property
    def group_instance_id(self) -> str | None:
        return self._instance_id

    @property
    def member_id(self) -> str:
        return self._member_id

    @property
    def member_epoch(self) -> int:
        """The member's epoch (0: not in the group)."""
        return self._epoch

    generation_id = member_epoch  # what commits carry, under the classic name

    @property
    def closed(self) -> bool:
        return self._closed

    def subscription(self) -> frozenset[str]:
        return self._topics

    def assignment(self) -> set[TopicPartition]:
        with self._lock:
            return set(self._owned)

    @property
    def rebalance_in_progress(self) -> bool:
        """Whether the member has joining or reconciling left to do."""
        with self._lock:
            return bool(self._topics) and (self._epoch <= 0 or self._target is not None
                                           or self._lost_pending or self._ack_needed)

    # -- subscribing and positions -------------------------------------------------------

    def subscribe(self, topics: Iterable[str], listener=None) -> None:
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
                self._subscription_changed = True
                self._ack_needed = True
                self._cond.notify_all()

    def seek(self, tp: TopicPartition, offset: int) -> None:
        tp = check_partition(tp)
        if not isinstance(offset, int) or isinstance(offset, bool) or offset < 0:
            raise ValueError(f"offset must be an int >= 0, not {offset!r}")
        with self._lock:
            self._check_open()
            if tp not in self._owned:
                raise PartitionNotAssignedError(tp)
            self._positions[tp] = offset

    def record_consumed(self, tp: TopicPartition, next_offset: int) -> None:
        self.seek(tp, next_offset)

    def position(self, tp: TopicPartition) -> int | None:
        tp = check_partition(tp)
        with self._lock:
            if tp not in self._owned:
                raise PartitionNotAssignedError(tp)
            return self._positions.get(tp)

    def committed(self, tp: TopicPartition) -> OffsetAndMetadata | None:
        return self._store.committed(self._group_id, tp)

    # -- the heartbeat -------------------------------------------------------------------

    def tick(self, now_ms: int | None = None) -> None:
        """Heartbeat if one is due (the coordinator's interval passed, or an acknowledgement
        is owed) and take its answer in; leave the group if ``poll`` was not called within
        ``max_poll_interval_ms``. The heartbeat thread calls it; manual-clock tests too."""
        with self._lock:
            if (self._closed or self._closing or self._fatal is not None or not self._topics
                    or self._lost_pending):
                return
            now = self._clock() if now_ms is None else now_ms
            if (self._epoch > 0 and self._last_poll_ms is not None
                    and now - self._last_poll_ms > self._max_poll_interval_ms):
                log.warning("%s: poll() not called for max_poll_interval_ms; leaving the group",
                            self)
                self._send_leave()
                self._lost_pending = True
                self._cond.notify_all()
                return
            last = self._last_heartbeat_ms
            if not (self._ack_needed or last is None
                    or now - last >= self._heartbeat_interval_ms):
                return
            request = self._request()
            self._last_heartbeat_ms, self._ack_needed = now, False
            sent = (self._member_id, self._epoch)
            try:
                fut = self._store.consumer_groups.heartbeat(self._group_id,
                                                            topics=self._counts(), **request)
            except OffsetlogError as e:  # the store is closed or failed
                log.debug("heartbeat of %s not sent: %r", self, e)
                return
        try:
            response = fut.result(timeout=self._request_timeout_s)
        except Exception as e:
            log.debug("heartbeat of %s got no answer: %r", self, e)
            return
        with self._lock:
            if (self._member_id, self._epoch) != sent or self._closed or self._closing:
                return  # about an epoch this member has left behind
            self._take(response, request)
            self._cond.notify_all()

    def _request(self) -> dict:
        joining = self._epoch == 0
        request = dict(member_id=self._member_id, member_epoch=self._epoch,
                       instance_id=self._instance_id, rack_id=self._rack_id,
                       client_id=self._client_id,
                       owned=frozenset() if joining else frozenset(self._owned))
        if joining or self._subscription_changed:
            request.update(subscribed_topic_names=sorted(self._topics),
                           rebalance_timeout_ms=self._rebalance_timeout_ms,
                           server_assignor=self._server_assignor)
        return request

    def _take(self, response, request: dict) -> None:
        error = response.error
        if error is None:
            if "subscribed_topic_names" in request:
                self._subscription_changed = False
            self._epoch = response.member_epoch
            self._heartbeat_interval_ms = response.heartbeat_interval_ms
            if response.assignment is not None:
                target = frozenset(TopicPartition(t, p) for t, p in response.assignment)
                if target != self._owned or self._target is not None:
                    self._target = target
        elif isinstance(error, _FENCED):
            log.info("%s: heartbeat answered %r; its partitions are lost", self, error)
            self._lost_pending, self._target = True, None
        elif isinstance(error, _FATAL):
            self._fatal = error
            self._lost_pending = bool(self._owned)
        else:  # not available, loading and the like: the next interval tries again
            log.debug("heartbeat of %s answered %r", self, error)

    def _send_leave(self) -> Future | None:
        """Leave (epoch -1; -2 for a static member): the answer's future, or None."""
        epoch = -2 if self._instance_id is not None else -1
        fut = None
        try:
            fut = self._store.consumer_groups.heartbeat(
                self._group_id, topics=self._counts(), member_id=self._member_id,
                member_epoch=epoch, instance_id=self._instance_id, client_id=self._client_id)
        except OffsetlogError as e:
            log.info("%s: leaving failed: %r", self, e)
        self._epoch = 0
        return fut

    def _heartbeat_loop(self) -> None:
        while not self._hb_stop.wait(0.02):
            try:
                self.tick()
            except Exception:
                log.exception("%s: heartbeat failed", self)

    # -- poll ----------------------------------------------------------------------------

    def poll(self, timeout_ms: int = 0) -> set[TopicPartition]:
        """Reconcile on the caller's thread: drop lost partitions, revoke and assign as the
        coordinator's latest answer says (running the listener), run ``commit_async``
        callbacks, auto-commit when due. Waits up to ``timeout_ms`` while the member owns
        nothing or is still reconciling.

        :return: the partitions the member owns now
        :raises FencedInstanceIdError, UnreleasedInstanceIdError, ...: a fatal answer (after
            ``on_partitions_lost``); the member is unusable
        """
        if not isinstance(timeout_ms, int) or isinstance(timeout_ms, bool) or timeout_ms < 0:
            raise ValueError(f"timeout_ms must be an int >= 0, not {timeout_ms!r}")
        deadline = time.monotonic() + timeout_ms / 1000.0
        with self._lock:
            self._check_open()
            if not self._topics:
                raise NotSubscribedError("subscribe() before poll()")
            self._last_poll_ms = self._clock()
            if self._use_heartbeat_thread and self._hb_thread is None:
                self._hb_thread = threading.Thread(
                    target=self._heartbeat_loop, daemon=True,
                    name=f"offsetlog-consumer-member-{self._group_id}")
                self._hb_thread.start()
        errors: list[BaseException] = []
        while True:
            self._run_callbacks()
            self._reconcile(errors)
            self._maybe_auto_commit()
            with self._lock:
                if self._fatal is not None:
                    raise self._fatal
                busy = self._target is not None or self._lost_pending
                left = deadline - time.monotonic()
                if errors or left <= 0 or (self._owned and not busy):
                    break
                self._cond.wait(min(left, 0.05))
        if errors:
            raise errors[0]
        return self.assignment()

    def _reconcile(self, errors: list) -> None:
        with self._lock:
            lost = sorted(self._owned) if self._lost_pending else []
            target = self._target
        if lost or (target is None and self._lost_pending):
            self._note(errors, invoke(self._listener, "on_partitions_lost", lost, self))
            with self._lock:
                self._owned.clear()
                self._positions.clear()
                self._lost_pending = False
                if self._fatal is None:
                    self._epoch, self._ack_needed = 0, True  # rejoin, same member id
                self._cond.notify_all()
            return
        if target is None:
            return
        with self._lock:
            revoked = sorted(self._owned - target)
            added = sorted(target - self._owned)
        if revoked:
            if self._auto_commit:
                self._commit_quietly(self._positions_of(revoked))
            self._note(errors, invoke(self._listener, "on_partitions_revoked", revoked, self))
            with self._lock:
                self._owned.difference_update(revoked)
                for tp in revoked:
                    self._positions.pop(tp, None)
        if added:
            committed = self._store.fetch(self._group_id, added)
            with self._lock:
                for tp in added:
                    if tp in committed:
                        self._positions[tp] = committed[tp].offset
                self._owned.update(added)
            self._note(errors, invoke(self._listener, "on_partitions_assigned", added, self))
        with self._lock:
            if self._target is target:
                self._target = None
            self._ack_needed = True  # tell the coordinator at once
            self._cond.notify_all()

    @staticmethod
    def _note(errors: list, error: BaseException | None) -> None:
        if error is not None:
            errors.append(error)

    # -- commits -------------------------------------------------------------------------

    def commit_sync(self, offsets=None, *, timeout_ms: int | None = None) -> None:
        """Commit ``offsets`` (default: the positions of the owned partitions) at the member's
        epoch; return once durable.

        :raises StaleMemberEpochError, UnknownMemberIdError: the member's epoch or membership
            moved on (a STALE_MEMBER_EPOCH is retried once with the member's newer epoch)
        """
        offsets = self._offsets_to_commit(offsets)
        try:
            if offsets:
                self._commit(offsets, timeout_ms)
        finally:
            self._run_callbacks()

    def _commit(self, offsets: dict, timeout_ms: int | None = None) -> None:
        for attempt in (1, 2):
            epoch = self._epoch
            try:
                self._store.commit_sync(self._group_id, offsets, generation_id=epoch,
                                        member_id=self._member_id,
                                        timeout=(self._request_timeout_s if timeout_ms is None
                                                 else timeout_ms / 1000.0))
                return
            except StaleMemberEpochError:
                if attempt == 2 or self._epoch == epoch:
                    raise

    def commit_async(self, offsets=None, callback=None) -> Future:
        """Commit in the background; ``callback(offsets, exception_or_None)`` runs on the
        caller's thread in a later ``poll``, ``commit_sync`` or ``close``."""
        offsets = self._offsets_to_commit(offsets)
        fut: Future = Future()
        fut.set_running_or_notify_cancel()

        def run():
            error = None
            try:
                self._commit(offsets)
            except BaseException as e:  # noqa: BLE001 - handed to the caller
                error = e
            with self._lock:
                if callback is not None:
                    self._completed.append((callback, offsets, error))
            fut.set_exception(error) if error is not None else fut.set_result(None)

        threading.Thread(target=run, daemon=True, name="offsetlog-member-commit").start()
        return fut

    def _commit_quietly(self, offsets: dict) -> None:
        if offsets:
            try:
                self._commit(offsets)
            except OffsetlogError as e:
                log.info("%s: auto-commit failed: %r", self, e)

    def _maybe_auto_commit(self) -> None:
        if not self._auto_commit:
            return
        now = self._clock()
        with self._lock:
            if self._next_auto_commit_ms is None:
                self._next_auto_commit_ms = now + self._auto_commit_interval_ms
                return
            if now < self._next_auto_commit_ms or self._epoch <= 0:
                return
            self._next_auto_commit_ms = now + self._auto_commit_interval_ms
            offsets = self._positions_of(self._owned)
        self._commit_quietly(offsets)

    def _run_callbacks(self) -> None:
        with self._lock:
            done, self._completed = self._completed, []
        for callback, offsets, error in done:
            try:
                callback(offsets, error)
            except Exception:
                log.exception("%s: commit callback raised", self)

    # -- closing -------------------------------------------------------------------------

    def close(self, *, timeout_ms: int | None = None) -> None:
        """Auto-commit (if enabled), revoke the owned partitions (``on_partitions_revoked``, or
        ``on_partitions_lost`` if fenced) and leave the group: epoch -1, or -2 for a static
        member, whose place and partitions the group keeps until its session runs out.
        Idempotent."""
        with self._lock:
            if self._closed or self._closing:
                return
            self._closing = True
        self._hb_stop.set()
        if self._hb_thread is not None and self._hb_thread is not threading.current_thread():
            self._hb_thread.join()
        try:
            with self._lock:
                owned, lost = sorted(self._owned), self._lost_pending or self._epoch <= 0
            if owned and self._auto_commit and not lost:
                self._commit_quietly(self._positions_of(owned))
            self._run_callbacks()
            if owned:
                invoke(self._listener, "on_partitions_lost" if lost else
                       "on_partitions_revoked", owned, self)
            with self._lock:
                self._owned.clear()
                self._positions.clear()
                fut = self._send_leave() if self._epoch > 0 else None
            if fut is not None:
                try:
                    fut.result(self._request_timeout_s if timeout_ms is None
                               else timeout_ms / 1000.0)
                except Exception as e:
                    log.info("%s: leaving on close failed: %r", self, e)
        finally:
            with self._lock:
                self._closed = True
                self._cond.notify_all()

    def _counts(self) -> dict[str, int]:
        source = self._partitions_per_topic
        counts = source() if callable(source) else source
        if not isinstance(counts, Mapping):
            raise TypeError("partitions_per_topic() must return a mapping of topic -> count")
        return dict(counts)

    def _check_open(self) -> None:
        if self._closed:
            raise MemberClosedError(f"the member of group {self._group_id!r} is closed")
