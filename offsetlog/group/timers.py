"""Deadlines as data: a priority queue of named timers, with no clock and no threads.

A timer is a key (any hashable, e.g. ``("session", group_id, member_id)``) and a deadline in
epoch ms. Scheduling a key again replaces its deadline; cancelling forgets it. :meth:`pop_due`
hands back due timers earliest first (equal deadlines in the order they entered the queue),
which is what lets ``GroupCoordinator.poll(now)`` behave the same whether it is called at every
deadline or once, late.

Heartbeats and commits push a member's session deadline later on every call, so that case must
be cheap: moving a deadline *later* only records the new deadline; the entry already in the heap
stays, and when it surfaces it is re-queued at the recorded deadline (the lazy rescheduling of
timer wheels). Only an earlier deadline pushes a new entry. Cancelled and superseded entries are
dropped when they surface. Every operation is O(1) or O(log n).
"""

from __future__ import annotations

import heapq
import itertools
from collections.abc import Hashable

#: the kinds of the group coordinator's timers, whose keys are ``(kind, group_id[, member_id])``
#: (``offsetlog.group.rebalance`` says what each is)
TIMER_JOIN, TIMER_SYNC, TIMER_SESSION, TIMER_PENDING = "join", "sync", "session", "pending"


class TimerQueue:
    def __init__(self) -> None:
        self._heap: list[tuple[int, int, Hashable]] = []
        self._deadlines: dict[Hashable, int] = {}  # key -> its current deadline
        self._queued: dict[Hashable, int] = {}  # key -> deadline of its earliest heap entry
        self._seq = itertools.count()

    def schedule(self, key: Hashable, deadline_ms: int) -> None:
        self._deadlines[key] = deadline_ms
        queued = self._queued.get(key)
        if queued is None or deadline_ms < queued:
            self._queued[key] = deadline_ms
            heapq.heappush(self._heap, (deadline_ms, next(self._seq), key))

    def cancel(self, key: Hashable) -> None:
        self._deadlines.pop(key, None)  # its heap entry is dropped when it surfaces

    def deadline(self, key: Hashable) -> int | None:
        return self._deadlines.get(key)

    def _settle(self) -> None:
        """Pop entries until the top one is a live timer at its current deadline."""
        heap, deadlines, queued = self._heap, self._deadlines, self._queued
        while heap:
            at, _, key = heap[0]
            current = deadlines.get(key)
            if current == at:
                return
            heapq.heappop(heap)
            if queued.get(key) != at:
                continue  # a superseded entry: the key has an earlier one
            if current is None:  # cancelled
                del queued[key]
            else:  # moved later: queue it again at its deadline
                queued[key] = current
                heapq.heappush(heap, (current, next(self._seq), key))

    def next_deadline(self) -> int | None:
        self._settle()
        return self._heap[0][0] if self._heap else None

    def pop_due(self, now_ms: int) -> tuple[Hashable, int] | None:
        """Remove and return ``(key, deadline)`` of the earliest timer due at ``now_ms``."""
        self._settle()
        if not self._heap or self._heap[0][0] > now_ms:
            return None
        at, _, key = heapq.heappop(self._heap)
        del self._deadlines[key]
        if self._queued.get(key) == at:
            del self._queued[key]
        return key, at

    def __len__(self) -> int:
        return len(self._deadlines)
