"""Which log partition holds a group: Kafka's ``Utils.abs(groupId.hashCode()) % partitions``.

Java's ``String.hashCode`` runs over UTF-16 code units (a character outside the BMP counts as
two surrogates) with 32-bit signed overflow, and Kafka's ``Utils.abs`` maps
``Integer.MIN_VALUE`` to 0 rather than leaving it negative. Matching both exactly means a
group lands on the same partition here as on a Kafka cluster with the same partition count.
"""

from __future__ import annotations

from functools import lru_cache

DEFAULT_PARTITIONS = 50
_MASK = 0xFFFFFFFF


def java_string_hashcode(s: str) -> int:
    """``s.hashCode()`` as Java computes it, as a signed 32-bit int."""
    h = 0
    if s.isascii():
        for ch in s.encode("ascii"):
            h = (31 * h + ch) & _MASK
    else:
        data = s.encode("utf-16-be", "surrogatepass")
        for i in range(0, len(data), 2):
            h = (31 * h + ((data[i] << 8) | data[i + 1])) & _MASK
    return h - (1 << 32) if h & 0x80000000 else h


def kafka_abs(n: int) -> int:
    """Kafka's ``Utils.abs``: ``abs`` except that ``Integer.MIN_VALUE`` gives 0."""
    return 0 if n == -(1 << 31) else abs(n)


@lru_cache(maxsize=65536)
def _partition_for(group_id: str, partitions: int) -> int:
    return kafka_abs(java_string_hashcode(group_id)) % partitions


def partition_for(group_id: str, partitions: int = DEFAULT_PARTITIONS) -> int:
    """The log partition of ``group_id`` among ``partitions``, exactly as Kafka places it.

    >>> partition_for("my-group")
    12
    """
    if not isinstance(group_id, str):
        raise TypeError(f"group_id must be str, not {type(group_id).__name__}")
    if not isinstance(partitions, int) or isinstance(partitions, bool) or partitions < 1:
        raise ValueError(f"partitions must be a positive int, not {partitions!r}")
    return _partition_for(group_id, partitions)
