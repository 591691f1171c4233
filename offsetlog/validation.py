"""Checks on what callers hand to the store. Everything is checked before anything is written,
so a rejected call writes nothing; one bad offset rejects the whole call (see docs/DESIGN.md,
"All-or-nothing commits": Kafka instead answers per partition)."""

from __future__ import annotations

import math
import threading
from collections.abc import Iterable, Mapping

from offsetlog.errors import (
    InvalidArgumentError,
    InvalidCommitError,
    InvalidGroupIdError,
    InvalidTopicError,
    OffsetMetadataTooLargeError,
)
from offsetlog.types import OffsetAndMetadata, TopicPartition

#: (topic, partition, offset, metadata, leader_epoch): one checked offset of a commit
Checked = tuple

#: Kafka's field types: offsets are int64, partitions and leader epochs int32 (a larger value
#: would be written, then break every reader that uses those types, such as the Spark source)
MAX_OFFSET = (1 << 63) - 1
#: the lowest offset a store opened with ``negative_offsets=True`` takes (Kafka's int64)
MIN_OFFSET = -(1 << 63)
MAX_INT32 = (1 << 31) - 1


def check_encodable(name: str, text: str, error: type[Exception]) -> None:
    """Raise ``error`` if ``text`` cannot be written (UTF-8, as msgpack writes it: a lone
    surrogate cannot). Checked before anything changes: a record that fails to encode later
    fails in the writer, after the caller was told its call was fine."""
    if not text.isascii():
        try:
            text.encode("utf-8")
        except UnicodeEncodeError:
            raise error(f"{name} must be valid Unicode text (no lone surrogates): "
                        f"{text!r}") from None


def check_group_id(group_id) -> str:
    if not isinstance(group_id, str):
        raise InvalidGroupIdError(f"group_id must be a str, not {type(group_id).__name__}")
    if not group_id:
        raise InvalidGroupIdError("group_id must not be empty")
    check_encodable("group_id", group_id, InvalidGroupIdError)
    return group_id


def utf16_length(s: str) -> int:
    """Length as Java's ``String.length()`` counts it: UTF-16 code units."""
    if s.isascii():
        return len(s)
    return len(s.encode("utf-16-le", "surrogatepass")) // 2


def _is_int(v) -> bool:
    return isinstance(v, int) and not isinstance(v, bool)


def check_partition(tp) -> TopicPartition:
    if not isinstance(tp, TopicPartition):
        raise InvalidCommitError(
            f"offsets must be keyed by TopicPartition, not {type(tp).__name__} ({tp!r})")
    topic, partition = tp
    if not isinstance(topic, str) or not topic:
        raise InvalidTopicError(f"{tp!r}: topic must be a non-empty str")
    if not topic.isascii():  # (the name only when it may be needed: an f-string per call)
        check_encodable(f"{tp!r}: topic", topic, InvalidTopicError)
    if not _is_int(partition) or not 0 <= partition <= MAX_INT32:
        raise InvalidCommitError(f"{tp!r}: partition must be an int from 0 to {MAX_INT32}")
    if type(topic) is not str or type(partition) is not int:
        # Subclasses become plain str / int: the table interns topics (sys.intern refuses a
        # str subclass, after the batch is written) and must hold what replay builds.
        tp = TopicPartition(str.__str__(topic), int.__index__(partition))
    return tp


def check_offsets(offsets, *, metadata_max: int, min_offset: int = 0) -> list[Checked]:
    """Every offset of one commit call, checked and normalised, in the caller's order.

    :param min_offset: the lowest offset accepted: 0, or ``MIN_OFFSET`` for a store opened
        with ``negative_offsets=True``
    """
    if not isinstance(offsets, Mapping):
        raise InvalidCommitError(
            f"offsets must be a Mapping[TopicPartition, OffsetAndMetadata | int], "
            f"not {type(offsets).__name__}")
    # The commit path takes the usual shape the short way (records.offset_commit_fields) and
    # comes here only for the rest; so every check is made here, in full.
    out = []
    for tp, value in offsets.items():
        tp = check_partition(tp)
        if isinstance(value, OffsetAndMetadata):
            offset, metadata, epoch = value
        elif _is_int(value):
            offset, metadata, epoch = value, "", None
        else:
            raise InvalidCommitError(
                f"{tp}: value must be an OffsetAndMetadata or an int, not {type(value).__name__}")
        if not _is_int(offset) or not min_offset <= offset <= MAX_OFFSET:
            raise InvalidCommitError(
                f"{tp}: offset must be an int from {min_offset} to {MAX_OFFSET}, not "
                f"{offset!r}")
        if type(offset) is not int:
            offset = int.__index__(offset)
        if metadata is None:
            metadata = ""
        elif not isinstance(metadata, str):
            raise InvalidCommitError(f"{tp}: metadata must be a str, not {type(metadata).__name__}")
        elif type(metadata) is not str:
            metadata = str.__str__(metadata)
        if not metadata.isascii():
            check_encodable(f"{tp}: metadata", metadata, InvalidCommitError)
        if len(metadata) > metadata_max // 2:  # only long strings can be over; skip the count
            n = utf16_length(metadata)
            if n > metadata_max:
                raise OffsetMetadataTooLargeError(
                    f"{tp}: metadata is {n} UTF-16 code units, over the limit of {metadata_max}",
                    length=n, limit=metadata_max)
        if epoch is not None:
            if not _is_int(epoch) or not -1 <= epoch <= MAX_INT32:
                raise InvalidCommitError(
                    f"{tp}: leader_epoch must be None or an int from 0 to {MAX_INT32}")
            if epoch == -1:  # Kafka's "no epoch" sentinel
                epoch = None
            elif type(epoch) is not int:
                epoch = int.__index__(epoch)
        out.append((tp.topic, tp.partition, offset, metadata, epoch))
    return out


def check_partition_list(partitions) -> list[TopicPartition]:
    if isinstance(partitions, (str, bytes)) or not isinstance(partitions, Iterable):
        raise InvalidCommitError("partitions must be an iterable of TopicPartition")
    return [check_partition(tp) for tp in partitions]


def check_topic(name, partitions, topic_id) -> None:
    """A topic registration Kafka would accept: a legal name, a partition count, a topic id.

    :raises InvalidTopicError: with what is wrong
    """
    if (not isinstance(name, str) or not 0 < len(name) <= 249 or name in (".", "..")
            or not all(c.isascii() and (c.isalnum() or c in "._-") for c in name)):
        raise InvalidTopicError(f"topic name {name!r}: 1-249 of [a-zA-Z0-9._-], not . or ..")
    if not isinstance(partitions, int) or isinstance(partitions, bool) or not (
            0 < partitions <= 1 << 20):
        raise InvalidTopicError(f"topic {name!r}: partitions must be an int >= 1")
    if not isinstance(topic_id, bytes) or len(topic_id) != 16 or not any(topic_id):
        raise InvalidTopicError(f"topic {name!r}: topic_id must be 16 bytes, not all zero")
# -- arguments other than commits ------------------------------------------------------------

#: the most a ``now_ms`` (or any epoch-ms time a caller hands in) may be: batch headers pack
#: timestamps as int64, and a leader that fails to frame a batch poisons the store
MAX_TIME_MS = (1 << 63) - 1


def check_time_ms(value, name: str = "now_ms") -> int:
    """An epoch-ms time a caller passes (``expire_offsets(now_ms=...)``): an int from 0 to
    2**63 - 1, never a bool. Checked before anything is queued, so a bad one can never reach
    (and fail) the writer."""
    if not _is_int(value) or not 0 <= value <= MAX_TIME_MS:
        raise InvalidArgumentError(
            f"{name} must be None or an int of epoch milliseconds from 0 to {MAX_TIME_MS}, "
            f"not {value!r}")
    return int.__index__(value)


def check_retention_time(value) -> int | None:
    """``commit_sync(retention_time_ms=...)``: None (the store's retention rules) or an int of
    milliseconds from 0 to 2**63 - 1, never a bool. Negative numbers are refused: -1 is
    Kafka's "none" on the wire, and taken as a time it would expire the commit at once."""
    if value is None:
        return None
    if not _is_int(value) or not 0 <= value <= MAX_TIME_MS:
        raise InvalidArgumentError(
            f"retention_time_ms must be None or an int of milliseconds from 0 to {MAX_TIME_MS}, "
            f"not {value!r}")
    return int.__index__(value)


def check_timeout(timeout) -> float | None:
    """``commit_sync(timeout=...)``: None (wait as long as it takes) or a number of seconds
    >= 0. NaN and negative numbers are refused; infinity, or more than the platform can wait
    in one go (``threading.TIMEOUT_MAX``), means no timeout."""
    if timeout is None:
        return None
    if isinstance(timeout, bool) or not isinstance(timeout, (int, float)):
        raise InvalidArgumentError(f"timeout must be None or a number of seconds, not "
                                   f"{timeout!r}")
    try:
        timeout = float(timeout)
    except OverflowError:  # an int past any float: more than TIMEOUT_MAX too
        return None
    if math.isnan(timeout) or timeout < 0:
        raise InvalidArgumentError(f"timeout must be None or a number of seconds >= 0, not "
                                   f"{timeout!r}")
    return None if timeout > threading.TIMEOUT_MAX else timeout


def check_partition_numbers(partitions, count: int) -> list[int] | range:
    """``compact(partitions)`` / ``snapshot(partitions)``: None (every log partition) or an
    iterable of log partition numbers, each an int (not a bool) from 0 to ``count`` - 1.
    Negative numbers are refused, not taken from the end as a list index would."""
    if partitions is None:
        return range(count)
    if isinstance(partitions, (str, bytes)) or not isinstance(partitions, Iterable):
        raise InvalidArgumentError(f"partitions must be None or an iterable of log partition "
                                   f"numbers, not {partitions!r}")
    out = []
    for p in partitions:
        if not _is_int(p) or not 0 <= p < count:
            raise InvalidArgumentError(f"log partition {p!r} does not exist: the store has "
                                       f"partitions 0 to {count - 1}")
        out.append(int.__index__(p))
    return out
