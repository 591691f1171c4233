"""``<store>/RECOVERY-POINTS``: per log partition, the log offset below which every record was
durable when the file was written (docs/FORMAT.md, "RECOVERY-POINTS"), as Kafka keeps its
``recovery-point-offset-checkpoint``.

What it is for: telling a torn tail from corruption when the bytes after a failed batch are
not a plain prefix cut. A disk may persist the pages of a write, or of writes a sync had not
yet covered, out of order, so a power cut can leave a hole followed by valid batches. Without
this file such a hole reads as corruption before the tail and open refuses the store; with
it, a failed batch whose offsets lie at or beyond the partition's recovery point is known
never to have been durable, so it is a torn tail and everything from it on is cut (what
Kafka's recovery does past its recovery point). Below the point a failed batch followed by a
valid one is still corruption. The file only ever lags the truth (it is written after what
it records became durable): damage to writes made durable since the last checkpoint is cut
like a torn tail (and reported) rather than refused, as Kafka does past its point. A missing
or damaged file makes recovery as strict as it was without one.

Written whole (temporary file, fsync, rename, fsync of the directory) by the store only: when
it opens (recovery left every partition durable), every ``fsync_interval_ms`` while it is
open if a point moved (``offsetlog.store.checkpoints``), and when it closes.
"""

from __future__ import annotations

import logging
import os
import struct

from offsetlog.errors import CorruptLogError, SymlinkError
from offsetlog.log import naming, segment, table_file

log = logging.getLogger(__name__)

MAGIC = b"OLRP"
VERSION = 1
#: partition u32, recovery point (log offset) i64 (the header and CRC: ``table_file``)
ENTRY = struct.Struct("<Iq")
RECOVERY_POINTS_FILE = "RECOVERY-POINTS"

#: partition -> the log offset below which every record was durable
Points = dict[int, int]


def points_path(root: str) -> str:
    return os.path.join(root, RECOVERY_POINTS_FILE)


def encode(points: Points) -> bytes:
    return table_file.encode(MAGIC, VERSION, ENTRY, ((p, points[p]) for p in sorted(points)))


def decode(data: bytes, path: str) -> Points:
    """:raises CorruptLogError: anything but a well-formed file of this version"""
    points: Points = {}
    previous = -1
    rows = table_file.decode(data, path, magic=MAGIC, version=VERSION, entry=ENTRY,
                             what="recovery points")
    for i, (p, offset) in enumerate(rows):
        if p <= previous or offset < 0:
            raise table_file.bad(path, "recovery points",
                                 f"entry {i} ({p}, {offset}) is out of order or negative")
        previous = p
        points[p] = offset
    return points


def read(root: str) -> Points:
    """The store's recovery points; empty when it has none (a store written before them, or
    one never opened for writing). One that cannot be read or decoded is logged and taken as
    none: recovery is then as strict as it was without the file, never less.

    :raises SymlinkError: the file is a symbolic link (as every store file refuses)
    """
    path = points_path(root)
    try:
        return decode(segment.read_file(path), path)
    except FileNotFoundError:
        return {}
    except SymlinkError:
        raise
    except (CorruptLogError, OSError) as e:
        log.warning("%s: ignored (recovery is as strict as without it): %s", path, e)
        return {}


def recovery_point(directory: str) -> int | None:
    """The recovery point of the log partition in ``directory`` (``<store>/
    __consumer_offsets-N``), None when its store records none for it."""
    directory = os.path.abspath(directory)
    p = naming.parse_partition_dir(os.path.basename(directory))
    if p is None:
        return None
    return read(os.path.dirname(directory)).get(p)


def write(root: str, points: Points) -> None:
    """Replace the file, crash-safely (temporary file, fsync, rename, fsync of the directory).
    Unhooked, as the MANIFEST: tests that count or fail the log's own writes do not see it."""
    segment.atomic_write(points_path(root), encode(points), hooked=False)
