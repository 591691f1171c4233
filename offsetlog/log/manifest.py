"""``<store>/MANIFEST``: the durable list of every log partition's segments and their sizes
(docs/FORMAT.md, "MANIFEST"), as LevelDB's MANIFEST and Kafka's checkpoint files keep one.

Log offsets may have gaps after compaction, so the segments alone cannot tell that one of them
went missing, was renamed away or cut short. The manifest can: open, ``offsetlog verify`` and
``offsetlog recover`` compare the directory against it, and a closed segment that is missing
or of another size, or an active segment shorter than the manifest knows it was, is a
``CorruptLogError`` naming the file (``recover --salvage`` reports it and goes on).

What it records, per log partition, oldest first: ``(base offset, size in bytes)`` of each
segment. The last one is the active segment, and its size is a lower bound: the data it held
when it was created (0), when the store was last opened, or when salvage rewrote it. Every
other size is exact. It is rewritten whole (temporary file, fsync, rename, fsync of the
directory) by

* a roll (``PartitionLog._roll``): the old segment's exact size and the new one, *before* the
  new file is created, so the directory never holds a segment the manifest does not list (a
  crash in between leaves a listed last segment of size 0 with no file: that is allowed);
* a cleaner or salvage swap (``recovery/swap.py``), after its commit point and before the
  swap file is renamed into place, so a crash between leaves the ``.swap`` file and recovery
  updates the manifest again as it completes the swap;
* opening (and ``offsetlog recover``), after recovery, if anything changed.

Updates are read-modify-write of one partition's entries under an ``flock`` of the store
directory (the Spark compaction job's tasks update partitions of one store from several
processes). A directory that is not a store keeping a manifest (no MANIFEST file: a cleaner
test's directory, a store being upgraded) is left alone.
"""

from __future__ import annotations

import contextlib
import fcntl
import os
import struct
from dataclasses import dataclass, field
from typing import Callable, Iterator

from offsetlog.errors import CorruptLogError
from offsetlog.log import naming, segment, table_file
from offsetlog.log.format import LENGTH_SIZE

MAGIC = b"OLMF"
VERSION = 1
#: partition u32, base offset i64, size i64 (the header and CRC: ``table_file``)
ENTRY = struct.Struct("<Iqq")
MANIFEST_FILE = "MANIFEST"

#: partition -> [(base offset, size)], oldest first; the last is the active segment
Entries = dict[int, list[tuple[int, int]]]


def manifest_path(root: str) -> str:
    return os.path.join(root, MANIFEST_FILE)


def encode(entries: Entries) -> bytes:
    return table_file.encode(MAGIC, VERSION, ENTRY, (
        (p, base, size) for p in sorted(entries) for base, size in entries[p]))


def decode(data: bytes, path: str) -> Entries:
    """:raises CorruptLogError: anything but a well-formed manifest of this version"""
    entries: Entries = {}
    previous = None
    rows = table_file.decode(data, path, magic=MAGIC, version=VERSION, entry=ENTRY,
                             what="manifest")
    for i, (p, base, size) in enumerate(rows):
        if base < 0 or size < 0 or (previous is not None and (p, base) <= previous):
            raise table_file.bad(path, "manifest", f"entry {i} ({p}, {base}, {size}) is out "
                                                   f"of order or negative")
        previous = (p, base)
        entries.setdefault(p, []).append((base, size))
    return entries


def read(root: str) -> Entries | None:
    """The store's manifest; None if it has none.

    :raises CorruptLogError: it does not decode
    :raises SymlinkError: it is a symbolic link
    """
    path = manifest_path(root)
    try:
        data = segment.read_file(path)
    except FileNotFoundError:
        return None
    return decode(data, path)


def read_quietly(root: str) -> Entries | None:
    """``read``, with None also for a manifest that does not decode (to be rewritten)."""
    try:
        return read(root)
    except CorruptLogError:
        return None


def write(root: str, entries: Entries) -> None:
    """Replace the manifest, crash-safely (temporary file, fsync, rename, fsync of the
    directory)."""
    segment.atomic_write(manifest_path(root), encode(entries), hooked=False)


@contextlib.contextmanager
def _locked(root: str) -> Iterator[None]:
    """Exclusive between threads and processes: each call opens its own descriptor, and
    ``flock`` locks per open file description."""
    fd = os.open(root, os.O_RDONLY | os.O_DIRECTORY | os.O_CLOEXEC)
    try:
        fcntl.flock(fd, fcntl.LOCK_EX)
        yield
    finally:
        os.close(fd)  # releases the lock


def update(root: str, partition: int,
           change: Callable[[list[tuple[int, int]]], list[tuple[int, int]]]) -> bool:
    """Replace ``partition``'s entries with ``change(entries)``, durably. False (nothing
    done) if ``root`` keeps no manifest."""
    if not os.path.lexists(manifest_path(root)):
        return False
    with _locked(root):
        entries = read(root)
        if entries is None:
            return False
        new = change(list(entries.get(partition, [])))
        if new:
            entries[partition] = new
        else:
            entries.pop(partition, None)
        write(root, entries)
    return True


def _store_of(directory: str) -> tuple[str, int] | None:
    """(store root, partition) of a log partition directory, or None if it is not one."""
    directory = os.path.abspath(directory)
    p = naming.parse_partition_dir(os.path.basename(directory))
    return None if p is None else (os.path.dirname(directory), p)


def rolled(directory: str, partition: int, closed: tuple[int, int] | None,
           new_base: int) -> None:
    """Record a roll: ``closed`` = (base, exact size) of the segment just closed (None for a
    partition's first segment), then the new active segment at ``new_base``, empty."""
    root = os.path.dirname(os.path.abspath(directory))

    def change(rows):
        if closed is not None:
            rows = [r for r in rows if r[0] != closed[0]] + [closed]
        return rows + [(new_base, 0)]

    update(root, partition, change)


def apply_swap(rows: list[tuple[int, int]], base: int, end: int, size: int
               ) -> list[tuple[int, int]]:
    """``rows`` with every segment whose base is in [base, end) replaced by one segment at
    ``base`` of ``size`` bytes (a cleaner or salvage swap)."""
    return sorted([r for r in rows if not base <= r[0] < end] + [(base, size)])


def swapped(directory: str, base: int, end: int, size: int) -> None:
    """Record a committed swap of ``directory`` (see ``apply_swap``); nothing if the directory
    is not a partition of a store that keeps a manifest."""
    where = _store_of(directory)
    if where is not None:
        update(where[0], where[1], lambda rows: apply_swap(rows, base, end, size))


def first_batch_end(path: str, size: int) -> int:
    """Where the first batch of a segment of ``size`` bytes ends (0 if it holds none whole)."""
    head = segment.read_file(path, 0, LENGTH_SIZE) if size >= LENGTH_SIZE else b""
    if len(head) < LENGTH_SIZE:
        return 0
    end = LENGTH_SIZE + int.from_bytes(head, "little")
    return end if end <= size else 0


def from_directory(root: str) -> Entries:
    """What the manifest should say after recovery: every segment of every partition with its
    size, except that the active segment's is where its first batch ends.

    The active segment grows with every commit, so its size in the manifest is only a lower
    bound, and recording the whole of it at every open would be the stronger check; but
    operators (and this project's tests) stand in for a crash by cutting bytes off the active
    segment of a cleanly closed store, which that check would refuse. The first batch is the
    least that still knows the segment "holds data": an emptied active segment, or one cut
    inside its first batch, is detected; a cut at a later batch boundary is not (see
    docs/FORMAT.md, "MANIFEST").
    """
    out: Entries = {}
    for p, directory in naming.list_partition_dirs(root):
        rows = [(base, os.lstat(path).st_size) for base, path in naming.list_segments(directory)]
        if rows:
            base, size = rows[-1]
            rows[-1] = (base, first_batch_end(naming.segment_path(directory, base), size))
            out[p] = rows
    return out


# -- comparing a directory with its manifest ------------------------------------------------

@dataclass(frozen=True)
class Mismatch:
    """A difference between a partition's directory and its manifest: data lost."""

    path: str
    position: int  # where the file's data ends (0 for a missing file)
    bytes_missing: int  # bytes the manifest records that the file does not hold
    reason: str
    #: "missing" / "unlisted" (the listing differs: checked before recovery reads anything),
    #: "size" (a closed segment's size differs), "active" (the active segment is short); the
    #: last two are raised after recovery, whose own error names the damaged batch precisely
    kind: str = "size"

    @property
    def listing(self) -> bool:
        return self.kind in ("missing", "unlisted")

    def error(self) -> CorruptLogError:
        return CorruptLogError(self.path, self.position, self.reason)


@dataclass
class PartitionCheck:
    partition: int
    directory: str
    #: the manifest's entries with pending swaps applied, less a segment a roll listed but
    #: never created (size 0, no file); the last is the active segment
    expected: list[tuple[int, int]] = field(default_factory=list)
    problems: list[Mismatch] = field(default_factory=list)


def check_partition(directory: str, partition: int, rows: list[tuple[int, int]],
                    segments: list[tuple[int, str]],
                    swaps: list[tuple[int, int, str]]) -> PartitionCheck:
    """Compare the segments of ``directory`` as recovery will see them (``segments``: after
    ``plan_swaps``, a pending swap's file standing for its segment) with the manifest's
    ``rows``, to which the pending ``swaps`` ((base, end, path)) are applied first."""
    expected = list(rows)
    for base, end, path in swaps:
        expected = apply_swap(expected, base, end, os.lstat(path).st_size)
    have = dict(segments)
    if expected and expected[-1][1] == 0 and expected[-1][0] not in have:
        expected.pop()  # a roll that was cut short before it created the file
    check = PartitionCheck(partition, directory, expected)
    listed = set()
    for i, (base, size) in enumerate(expected):
        listed.add(base)
        path = have.get(base)
        if path is None:
            check.problems.append(Mismatch(
                naming.segment_path(directory, base), 0, size,
                f"segment missing: the manifest records it with {size} bytes", "missing"))
            continue
        actual = os.lstat(path).st_size
        if i == len(expected) - 1:
            if actual < size:
                check.problems.append(Mismatch(
                    path, actual, size - actual,
                    f"active segment holds {actual} bytes, the manifest records at least {size}",
                    "active"))
        elif actual != size:
            check.problems.append(Mismatch(
                path, min(actual, size), max(size - actual, 0),
                f"closed segment holds {actual} bytes, the manifest records {size}"))
    for base, path in segments:
        if base not in listed:
            check.problems.append(Mismatch(path, 0, 0, "segment not in the manifest",
                                           "unlisted"))
    return check


def check_active_end(check: PartitionCheck, segments: list[tuple[int, str]],
                     data_end: int | None = None) -> Mismatch | None:
    """After recovery: is the active segment's data at least as long as the manifest knows it
    was? ``data_end``: where its data ends (None: the file's size, which recovery with repair
    has cut to its data)."""
    if not check.expected or not segments:
        return None
    base, known = check.expected[-1]
    last_base, path = segments[-1]
    if last_base != base:
        return None  # a listing problem, reported by check_partition
    actual = os.lstat(path).st_size if data_end is None else data_end
    if actual < known:
        return Mismatch(path, actual, known - actual,
                        f"active segment holds {actual} bytes of data, the manifest records "
                        f"at least {known}", "active")
    return None


def expected_partitions(entries: Entries | None) -> set[int]:
    return set(entries or ())
