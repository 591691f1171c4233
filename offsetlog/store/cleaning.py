"""The store's cleaning part: when and how the log cleaner runs on a live store.

The cleaner itself (``offsetlog.compaction.cleaner``) works on a partition directory without
any lock; this part gives it what only the store knows: the active segment's base (what is
closed), the snapshots' tombstone floor, and a swap lock that pauses the partition's writer
for the renames. One cleaning per partition at a time; a partition whose cleaning failed is
marked uncleanable (Kafka's term) and skipped by the background pass until a cleaning
succeeds.
"""

from __future__ import annotations

import logging
import os
import threading
from collections.abc import Iterable
from typing import Callable

from offsetlog.compaction.cleaner import CleanResult, clean_partition
from offsetlog.store import background
from offsetlog.store.commit_queue import PartitionWriter
from offsetlog.store.part import StoreCore, StorePart
from offsetlog.validation import check_partition_numbers, check_time_ms

log = logging.getLogger("offsetlog.store")


class Cleaning(StorePart):
    """``compact()`` and the background cleaner of one store."""

    #: tests set this to a callable(step) to crash a cleaning at a chosen step
    fault_hook = None

    def __init__(self, core: StoreCore, tombstone_floor: Callable[[int], int | None],
                 stop: threading.Event) -> None:
        super().__init__(core)
        self._tombstone_floor = tombstone_floor
        self._locks = [threading.Lock() for _ in self._parts]  # one cleaning per partition
        self.thread: threading.Thread | None = None
        if self.config.cleaner_backoff_ms:
            self.thread = background.start("offsetlog-cleaner", lambda: background.every(
                stop, self.config.cleaner_backoff_ms / 1000.0, self.run_pass,
                f"{self.path}: cleaner pass", log))

    def compact(self, partitions: Iterable[int] | None, now_ms: int | None) -> list[CleanResult]:
        self._check_open()
        now = self._clock() if now_ms is None else check_time_ms(now_ms)
        wanted = check_partition_numbers(partitions, len(self._parts))
        results = []
        for p in wanted:
            r = self.clean(self._parts[p], now)
            if r is not None:
                results.append(r)
        return results

    def clean(self, part: PartitionWriter, now: int) -> CleanResult | None:
        """Clean one partition's closed segments now; None if it has none."""
        plog = part.log
        with self._locks[part.index]:
            with part.lock:
                active_base = plog.active_base
            if active_base is None or len(plog.segments) < 2:
                return None
            # Read after active_base is fixed: a snapshot taken meanwhile only raises it.
            floor = self._tombstone_floor(part.index)
            try:
                result = clean_partition(
                    plog.directory, part.index, active_base=active_base, now_ms=now,
                    delete_retention_ms=self.config.delete_retention_ms,
                    segment_bytes=self.config.segment_bytes,
                    swap_lock=lambda: self._writer.exclusive(part),
                    on_swapped=plog.replace_segments, fault_hook=self.fault_hook,
                    keep_tombstones_from=floor)
            except Exception as e:
                plog.uncleanable = f"{type(e).__name__}: {e}"
                log.error("%s: log partition %d marked uncleanable: %s", self.path,
                          part.index, plog.uncleanable)
                raise
            plog.clean_bytes = sum(os.path.getsize(p) for b, p in plog.segments
                                   if b < active_base)
            plog.last_cleaned_ms = now
            plog.uncleanable = None
            return result

    def run_pass(self) -> None:
        """Clean every partition whose dirty ratio is over the threshold."""
        for part in self._parts:
            self._check_open()
            plog = part.log
            if (plog.uncleanable is None and len(plog.segments) >= 2
                    and plog.dirty_ratio() > self.config.min_cleanable_dirty_ratio):
                try:
                    self.clean(part, self._clock())
                except Exception:
                    pass  # logged and marked uncleanable; the other partitions go on
