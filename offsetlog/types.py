"""The public value types: what a commit names and what it stores."""

from __future__ import annotations

from typing import NamedTuple


class TopicPartition(NamedTuple):
    """A partition of a topic, as Kafka names it. Hashable and ordered (topic, then partition)."""

    topic: str
    partition: int

    def __str__(self) -> str:  # matches Kafka's TopicPartition.toString: "topic-3"
        return f"{self.topic}-{self.partition}"


class OffsetAndMetadata(NamedTuple):
    """What a consumer commits for one partition: the next offset to read, free-form metadata
    (at most 4096 UTF-16 code units) and the leader epoch of the last record read, if known."""

    offset: int
    metadata: str = ""
    leader_epoch: int | None = None
