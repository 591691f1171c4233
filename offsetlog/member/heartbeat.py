"""The classic member's heartbeat: a mixin of :class:`~offsetlog.member.GroupMember`.

The heartbeat thread (or a test calling :meth:`tick` with a manual clock) sends a Heartbeat
every ``heartbeat_interval_ms`` while the member is Stable, and turns the answer into flags for
``poll``: rejoin (``RebalanceInProgressError``), partitions lost (``UnknownMemberIdError``,
``IllegalGenerationError``), fenced (``FencedInstanceIdError``). It also leaves the group when
``poll`` has not been called for ``max_poll_interval_ms``.
"""

from __future__ import annotations

import logging

from offsetlog.errors import (
    FencedInstanceIdError,
    IllegalGenerationError,
    OffsetlogError,
    RebalanceInProgressError,
    UnknownMemberIdError,
)
from offsetlog.member.rebalance import MemberState

log = logging.getLogger("offsetlog.member")

_UNJOINED, _PREPARING, _COMPLETING, _STABLE = MemberState


class ClassicHeartbeat:
    """Mixin: :meth:`tick` and the heartbeat thread's loop."""

    def tick(self, now_ms: int | None = None) -> None:
        """Do what the heartbeat thread does, once: heartbeat if ``heartbeat_interval_ms`` has
        passed since the last one (and wait for the answer), or leave the group if ``poll`` was
        not called within ``max_poll_interval_ms``. The thread calls it; tests with a manual
        clock call it instead of starting the thread.

        :param now_ms: the member clock's time to judge by (default: now)
        """
        with self._lock:
            if self._closed or self._closing or self._fatal is not None or not self._topics:
                return
            now = self._clock() if now_ms is None else now_ms
            state = self._state
            if (state in (_STABLE, _COMPLETING) and self._last_poll_ms is not None
                    and now - self._last_poll_ms > self._max_poll_interval_ms):
                self._leave_for_poll_timeout(now)
                return
            last = self._last_heartbeat_ms
            if state is not _STABLE or (last is not None
                                        and now - last < self._heartbeat_interval_ms):
                return
            self._last_heartbeat_ms = now
            sent = (self._generation, self._member_id)
            try:
                fut = self._store.heartbeat(self._group_id, member_id=self._member_id,
                                            generation_id=self._generation,
                                            group_instance_id=self._instance_id)
            except OffsetlogError as e:  # the store is closed or failed
                log.debug("heartbeat of %s not sent: %r", self, e)
                return
        try:
            response = fut.result(timeout=self._request_timeout_s)
        except Exception as e:
            log.debug("heartbeat of %s got no answer: %r", self, e)
            return
        with self._lock:
            error = response.error
            if error is None or (self._generation, self._member_id) != sent or self._closed:
                return  # fine, or about a generation the member has left behind already
            if isinstance(error, RebalanceInProgressError):
                if self._state is _STABLE and not self._rejoin_needed:
                    log.info("%s: the group is rebalancing; rejoining on the next poll", self)
                    self._rejoin_needed = True
                    self._bump()
            elif isinstance(error, FencedInstanceIdError):
                self._fence(error)
            elif isinstance(error, (UnknownMemberIdError, IllegalGenerationError)):
                log.info("%s: heartbeat answered %r; its partitions are lost", self, error)
                self._reset(error, forget_member_id=isinstance(error, UnknownMemberIdError))
            else:  # CoordinatorNotAvailable and the like: try again at the next interval
                log.debug("heartbeat of %s answered %r", self, error)

    def _heartbeat_loop(self) -> None:
        # wake often enough to heartbeat on time and to notice a stalled poll() promptly
        period = min(self._heartbeat_interval_ms, 100) / 1000.0
        while not self._hb_stop.wait(period):
            try:
                self.tick()
            except Exception:
                log.exception("%s: heartbeat failed", self)

