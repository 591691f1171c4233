"""The topic registry: the topics this server reports in Metadata and accepts offsets for.

The registry is the store's TOPIC records (docs/FORMAT.md), so it survives restarts; this
class keeps a read-only copy for the event loop (refreshed after every creation) and makes
the creations, which wait for an fsync and so run on a worker thread.
"""

from __future__ import annotations

import os
import threading

from offsetlog.errors import TopicAlreadyExistsError


class TopicRegistry:
    def __init__(self, store) -> None:
        self._store = store
        self._lock = threading.Lock()
        self.topics: dict[str, dict] = store.topics()
        self.by_id: dict[bytes, str] = {v["topic_id"]: k for k, v in self.topics.items()}

    def partitions(self, name: str) -> int | None:
        """The partition count of ``name``, or None if it is not registered."""
        value = self.topics.get(name)
        return None if value is None else value["partitions"]

    def has_partition(self, name: str, partition: int) -> bool:
        count = self.partitions(name)
        return count is not None and 0 <= partition < count

    def topic_id(self, name: str) -> bytes | None:
        value = self.topics.get(name)
        return None if value is None else value["topic_id"]

    def create(self, name: str, partitions: int, *, exist_ok: bool = False) -> dict:
        """Register ``name`` (blocking: waits for the record's fsync). A fresh random topic
        id, never all zeros (Kafka's "no id").

        :raises TopicAlreadyExistsError: unless ``exist_ok``
        :raises InvalidTopicError: a name or count Kafka would refuse
        """
        with self._lock:
            try:
                self._store.create_topic(name, partitions, topic_id=_new_id())
            except TopicAlreadyExistsError:
                if not exist_ok:
                    raise
            self._refresh()
            return self.topics[name]

    def _refresh(self) -> None:
        topics = self._store.topics()
        self.by_id = {v["topic_id"]: k for k, v in topics.items()}
        self.topics = topics  # one assignment: readers see the old or the new dict


def _new_id() -> bytes:
    while True:
        tid = os.urandom(16)
        if any(tid):
            return tid
