"""What every part of a store is given, once (``OffsetStore`` makes one ``StoreCore``)."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Callable

from offsetlog.store.commit_queue import PartitionWriter
from offsetlog.store.config import StoreConfig
from offsetlog.store.group_commit import GroupCommitter


@dataclass(frozen=True)
class StoreCore:
    """The store's directory, settings, log partitions, the one writer they are written
    through, and the check that the store is still open."""

    path: str
    config: StoreConfig
    parts: list[PartitionWriter]
    writer: GroupCommitter
    check_open: Callable[[], None]


class StorePart:
    """A part of ``OffsetStore`` (groups, transactions, snapshots, cleaning): it owns its own
    state and reaches the log partitions only through the writer and their locks."""

    def __init__(self, core: StoreCore) -> None:
        self.path = core.path
        self.config = core.config
        self._parts = core.parts
        self._writer = core.writer
        self._clock = core.config.clock
        self._check_open = core.check_open
