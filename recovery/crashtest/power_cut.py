"""What a simulated power cut leaves of a killed child's store (the crash harness's
``power_loss`` and ``tear_tail``; docs/CRASHTEST.md).

"Unsynced" is measured, not guessed: the child logs every data sync that returned
(``offsetlog.recovery.crashtest.child``): ``SYNC <path> <data size it covered>`` for an
``fdatasync``, ``DSYNC <path> <start> <end>`` for a combined write + sync, which made only its
own bytes durable. Only bytes of an active segment that no such line covers, past its size
when the cycle began, are ever cut. Closed segments were synced before their roll.

Durable bytes can lie past unsynced ones: a commit that follows a lone commit's write writes
beside it, and its write can end first (docs/DESIGN.md). A cut then keeps them (``kept``).
"""

from __future__ import annotations

import os
import random
import re
from collections.abc import Sequence

from offsetlog.log import naming
from offsetlog.recovery.tools.inspect import data_size

_SYNC_RE = re.compile(rb"^SYNC (\S+) (\d+)$")
_DSYNC_RE = re.compile(rb"^DSYNC (\S+) (\d+) (\d+)$")

#: the shapes of a cut (``cut``); ``HOLE_BEFORE_DURABLE``: a hole that durable bytes follow
TRUNCATED, ZEROED, HOLE = "truncated", "zeroed", "hole"
HOLE_BEFORE_DURABLE = "hole before durable bytes"


def read_lines(path: str) -> list[bytes]:
    """The complete lines of a log the child appends to; none if it never wrote it."""
    try:
        with open(path, "rb") as f:
            data = f.read()
    except FileNotFoundError:
        return []
    lines = data.split(b"\n")
    return lines[:-1]  # a last line without its newline was cut by the kill


def durable_sizes(root: str) -> dict[str, int]:
    """The data size of each partition's last segment: the only ones whose durable size is
    looked up (closed segments were synced before the roll)."""
    if not os.path.isdir(root):
        return {}
    return {path: data_size(path) for _, d in naming.list_partition_dirs(root)
            for _, path in naming.list_segments(d)[-1:]}


def unsynced(store_dir: str, sync_log: str, durable_at_start: dict[str, int]
             ) -> list[tuple[str, int, int, list[tuple[int, int]]]]:
    """``(active segment, durable size, data size, kept)`` of each partition whose active
    segment holds bytes no successful sync covered: every byte before the durable size is
    durable, and so are the ``kept`` ranges ``[start, end)`` past it (sorted, apart)."""
    prefixes = dict(durable_at_start)
    ranges: dict[str, list[tuple[int, int]]] = {}
    for line in read_lines(sync_log):
        if m := _SYNC_RE.match(line):
            path = m.group(1).decode()
            prefixes[path] = max(prefixes.get(path, 0), int(m.group(2)))
        elif m := _DSYNC_RE.match(line):
            ranges.setdefault(m.group(1).decode(), []).append((int(m.group(2)),
                                                               int(m.group(3))))
    out = []
    for _, directory in naming.list_partition_dirs(store_dir):
        segments = naming.list_segments(directory)
        if not segments:
            continue
        last = segments[-1][1]
        size = data_size(last)  # not the file size: the active segment holds a reserve
        durable, kept = durable_ranges(prefixes.get(last, 0), ranges.get(last, []), size)
        # (the scan that finds the data's end stops at the first hole, so with bytes written
        # past one, a follower's beside the write it follows, it counts the reserve's zeros
        # as data too: the data ends at the last byte written, or where a durable range ends
        # if that ends in zeros)
        size = max(durable, kept[-1][1] if kept else 0, _written_end(last, size))
        if durable < size:
            out.append((last, durable, size, kept))
    return out


def durable_ranges(prefix: int, ranges: list[tuple[int, int]], size: int
                   ) -> tuple[int, list[tuple[int, int]]]:
    """The durable size (``prefix``, grown by the ranges that reach it) and the durable
    ranges past it, merged, of a segment whose data ends at ``size``."""
    kept: list[tuple[int, int]] = []
    for start, end in sorted(ranges):
        end = min(end, size)
        if start <= prefix:
            prefix = max(prefix, end)
        elif kept and start <= kept[-1][1]:
            kept[-1] = (kept[-1][0], max(kept[-1][1], end))
        elif start < end:
            kept.append((start, end))
    # (sorted by start, so once a range is kept past the prefix none after it reaches it)
    return min(prefix, size), kept


def unsynced_gaps(durable: int, kept: Sequence[tuple[int, int]], end: int
                  ) -> list[tuple[int, int]]:
    """The unsynced ranges ``[start, end)`` of a segment's bytes before ``end``: between the
    durable size and the ``kept`` ranges, and after the last of them."""
    return [(s, e) for s, e in zip([durable] + [e for _, e in kept],
                                   [s for s, _ in kept] + [end]) if s < e]


def cut(path: str, durable: int, size: int, rng: random.Random,
        kept: Sequence[tuple[int, int]] = ()) -> tuple[str, int]:
    """Lose some of segment ``path``'s unsynced bytes (those in [durable, size) outside the
    durable ``kept`` ranges) as a power cut would: ``(shape, bytes lost)``.

    A third of the cuts are a ``HOLE``: zeros from a random unsynced byte to a random later
    one, the bytes after kept, as a disk leaves a write whose pages it persisted out of order
    (valid batches may follow the hole; none was ever acknowledged, so recovery must cut from
    the hole on: the recovery point). Otherwise everything from a random unsynced byte is lost:
    ``ZEROED`` (half the time when the segment holds a preallocated reserve, whose size may
    already be durable: the torn batch is followed by zeros, not a shorter file) or
    ``TRUNCATED``. A cut before a ``kept`` range is always a hole that ends before it
    (``HOLE_BEFORE_DURABLE``): durable bytes are never lost.
    """
    gaps = unsynced_gaps(durable, kept, size)
    at = rng.randint(0, sum(e - s for s, e in gaps) - 1)
    for start, end in gaps:  # the chosen unsynced byte's place, in the gaps' order
        if at < end - start:
            at, gap_end = start + at, end
            break
        at -= end - start
    if gap_end < size:  # durable bytes follow this gap: zeros up to them at most
        end = rng.randint(at + 1, gap_end)
        _zero(path, at, end)
        return HOLE_BEFORE_DURABLE, end - at
    if size - at > 1 and rng.random() < 1 / 3:
        end = rng.randint(at + 1, size - 1)
        _zero(path, at, end)
        return HOLE, end - at
    if os.path.getsize(path) > size and rng.random() < 0.5:
        _zero(path, at, size)
        return ZEROED, size - at
    os.truncate(path, at)
    return TRUNCATED, size - at


def _written_end(path: str, size: int) -> int:
    """Where the last byte before ``size`` that is not zero ends in segment ``path``."""
    with open(path, "rb") as f:
        return len(f.read(size).rstrip(b"\0"))


def _zero(path: str, start: int, end: int) -> None:
    with open(path, "r+b") as f:
        f.seek(start)
        f.write(bytes(end - start))
