"""What a simulated power cut leaves of a killed child's store (the crash harness's
``power_loss`` and ``tear_tail``; docs/CRASHTEST.md).

"Unsynced" is measured, not guessed: the child logs every data sync that returned as
``SYNC <path> <data size it covered>`` (``offsetlog.recovery.crashtest.child``), and only bytes
of an active segment beyond the last such size, or beyond its size when the cycle began, are
ever cut. Closed segments were synced before their roll.
"""

from __future__ import annotations

import os
import random
import re

from offsetlog.log import naming
from offsetlog.recovery.tools.inspect import data_size

_SYNC_RE = re.compile(rb"^SYNC (\S+) (\d+)$")

#: the shapes of a cut (``cut``)
TRUNCATED, ZEROED, HOLE = "truncated", "zeroed", "hole"


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
             ) -> list[tuple[str, int, int]]:
    """``(active segment, durable size, data size)`` of each partition whose active segment
    holds bytes no successful sync covered."""
    synced = dict(durable_at_start)
    for line in read_lines(sync_log):
        m = _SYNC_RE.match(line)
        if m:
            path = m.group(1).decode()
            synced[path] = max(synced.get(path, 0), int(m.group(2)))
    out = []
    for _, directory in naming.list_partition_dirs(store_dir):
        segments = naming.list_segments(directory)
        if not segments:
            continue
        last = segments[-1][1]
        size = data_size(last)  # not the file size: the active segment holds a reserve
        durable = min(synced.get(last, 0), size)
        if durable < size:
            out.append((last, durable, size))
    return out


def cut(path: str, durable: int, size: int, rng: random.Random) -> tuple[str, int]:
    """Lose some of segment ``path``'s unsynced bytes [durable, size) as a power cut would:
    ``(shape, bytes lost)``.

    A third of the cuts are a ``HOLE``: zeros from a random unsynced byte to a random later
    one, the bytes after kept, as a disk leaves a write whose pages it persisted out of order
    (valid batches may follow the hole; none was ever acknowledged, so recovery must cut from
    the hole on: the recovery point). Otherwise everything from a random unsynced byte is lost:
    ``ZEROED`` (half the time when the segment holds a preallocated reserve, whose size may
    already be durable: the torn batch is followed by zeros, not a shorter file) or
    ``TRUNCATED``.
    """
    at = rng.randint(durable, size - 1)
    if size - at > 1 and rng.random() < 1 / 3:
        end = rng.randint(at + 1, size - 1)
        _zero(path, at, end)
        return HOLE, end - at
    if os.path.getsize(path) > size and rng.random() < 0.5:
        _zero(path, at, size)
        return ZEROED, size - at
    os.truncate(path, at)
    return TRUNCATED, size - at


def _zero(path: str, start: int, end: int) -> None:
    with open(path, "r+b") as f:
        f.seek(start)
        f.write(bytes(end - start))
