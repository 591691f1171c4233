"""Opening stores the way the tests want them, and the clock they share.

One place for the options every suite sets: the background retention pass and log cleaner are
off (tests drive expiry and compaction themselves, on files they created), and every group
coordinator names members from a counter, so runs repeat.
"""

from __future__ import annotations

import itertools
import threading

from offsetlog import OffsetStore
from offsetlog.group import GroupConfig


class ManualClock:
    """Epoch-ms clock that moves only when told (trio's MockClock)."""

    def __init__(self, start_ms: int = 1_700_000_000_000) -> None:
        self.now = start_ms
        self._lock = threading.Lock()

    def __call__(self) -> int:
        return self.now

    def advance(self, ms: int) -> int:
        with self._lock:
            self.now += ms
            return self.now


def counted_group_config(**settings) -> GroupConfig:
    """A ``GroupConfig`` whose member ids are ``<client_id>-<n>`` from a counter."""
    counter = itertools.count(1)
    return GroupConfig(member_id_factory=lambda prefix: f"{prefix}-{next(counter)}", **settings)


def open_store(path, **options) -> OffsetStore:
    """``OffsetStore.open`` with the background retention pass and cleaner off."""
    options.setdefault("retention_check_interval_ms", 0)
    options.setdefault("cleaner_backoff_ms", 0)
    return OffsetStore.open(str(path), **options)


def open_log_store(path, **options) -> OffsetStore:
    """``open_store`` without snapshots, for suites that test the log: a snapshot would let
    reopen skip the very bytes they damage (the snapshot suites ask for them)."""
    options.setdefault("snapshot_on_close", False)
    options.setdefault("snapshot_interval_records", 0)
    options.setdefault("snapshot_interval_ms", 0)
    return open_store(path, **options)


def open_group_store(path, clock, **options) -> OffsetStore:
    """``open_store`` with three log partitions and counted member ids, on ``clock``."""
    options.setdefault("partitions", 3)
    options.setdefault("group_config", counted_group_config())
    return open_store(path, clock=clock, **options)
