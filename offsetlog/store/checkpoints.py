"""The store's recovery points (``<store>/RECOVERY-POINTS``, ``offsetlog.log.recovery_points``):
each log partition's offset below which every record is durable, checkpointed so that
recovery can tell a write a power cut persisted out of order (a hole, then valid batches that
were never acknowledged) from corruption of what was.

Written when the store opens (recovery left every partition durable), by a background pass
every ``fsync_interval_ms`` when a point moved, and when the store closes. Each point is the
partition's ``PartitionLog.durable_offset()`` at that moment, so the file only ever lags the
truth: under ``fsync="always"`` by at most one interval of acknowledged commits, under
``"interval"`` by the time since the last background fsync as well, under ``"never"`` back to
the last sync (open, a roll, a snapshot, close). Kafka checkpoints its recovery points the
same way (``log.flush.offset.checkpoint.interval.ms``, a minute by default).
"""

from __future__ import annotations

import logging
import threading
from typing import Sequence

from offsetlog.log import recovery_points
from offsetlog.store import background
from offsetlog.store.commit_queue import PartitionWriter

log = logging.getLogger(__name__)


def durable_points(parts: Sequence[PartitionWriter]) -> recovery_points.Points:
    return {part.index: part.log.durable_offset() for part in parts}


def write_at_open(path: str, parts: Sequence[PartitionWriter],
                  found: recovery_points.Points) -> None:
    """After recovery: every partition is durable to its end (recovery fsynced what it kept);
    written unless the file (``found``, as recovery read it) says so already. A failure is
    logged and the store opens anyway: the file on disk only lags.

    Once the file holds every partition's point, the partitions are ``followable``: a commit
    may write beside a lone commit's write (native/src/follow.rs), since a crash between the
    two leaves a hole past the point, which recovery cuts as a torn tail. Without the file
    such a hole would read as corruption, so a store that could not write it has no
    followers."""
    points = {part.index: part.log.next_offset for part in parts}
    try:
        if found != points:
            recovery_points.write(path, points)
    except OSError as e:
        log.warning("%s: could not write %s (%s); the store opens without it, and commits "
                    "that share a log partition take turns at the disk", path,
                    recovery_points.RECOVERY_POINTS_FILE, e)
        return
    for part in parts:
        part.followable = True


class RecoveryPoints:
    """The background pass and the close-time write of one open store's recovery points."""

    def __init__(self, path: str, parts: Sequence[PartitionWriter], interval_ms: int,
                 stop: threading.Event) -> None:
        self._path = path
        self._parts = parts
        self._written = {part.index: part.log.next_offset for part in parts}  # (open's)
        self.thread = background.start("offsetlog-recovery-points", lambda: background.every(
            stop, interval_ms / 1000.0, self.checkpoint, f"{path}: recovery points", log))

    def checkpoint(self) -> None:
        """Write the points if any moved since the last write."""
        points = durable_points(self._parts)
        if points != self._written:
            recovery_points.write(self._path, points)
            self._written = points

    def on_close(self) -> None:
        """The last write, once the store's final syncs are done (or failed: each point is
        then where its last sync left it). A failure is logged: the file on disk only lags."""
        try:
            self.checkpoint()
        except OSError as e:
            log.error("%s: could not write %s on close: %r", self._path,
                      recovery_points.RECOVERY_POINTS_FILE, e)
