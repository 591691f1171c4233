"""The public value types: what a commit names and what it stores."""

from __future__ import annotations

from typing import Iterable, NamedTuple


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


def committed_view(entries: Iterable) -> dict[TopicPartition, OffsetAndMetadata]:
    """What ``fetch`` shows of table entries ``((topic, partition), entry)``: the offset, its
    metadata and its leader epoch (the entry's timestamps stay inside)."""
    return {TopicPartition(t, p): OffsetAndMetadata(e[0], e[1], e[2]) for (t, p), e in entries}
