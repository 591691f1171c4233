"""``<store>/WRITE-AHEAD``: where the usual durable write of every log partition becomes
durable in one shared round (docs/FORMAT.md, "WRITE-AHEAD"; docs/DESIGN.md, "Many groups: a
store-wide write-ahead file").

Under ``fsync="always"`` the native usual write puts each batch into its segment without a
sync and then into a round of this file, written with one ``RWF_DSYNC`` write for every
partition's batches waiting (``_native.WriteAhead``). So a segment may lack, after a power
cut, bytes that were acknowledged: opening writes them back from here (``apply``) before
anything reads a segment, syncs them, and starts the file's next generation.

Which entries are written back: those of the live generation (its start marker's) whose
segment is still its log partition's last one. A segment stops being written through the file
only once it was synced (a roll syncs it before the next segment exists; the store's close
checkpoints), so an entry for an older segment is already in it, and writing it there could
only undo a cleaner's swap.

While the file may hold entries, meta.json says store format ``WRITE_AHEAD_FORMAT_VERSION``
(see ``mark``), so an engine that does not read it refuses the store rather than open it
without them; a store closed cleanly says format 1 again.
"""

from __future__ import annotations

import logging
import os

from offsetlog.log import _native, meta, naming, segment
from offsetlog.log.format import STORE_FORMAT_VERSION, WRITE_AHEAD_FORMAT_VERSION

log = logging.getLogger("offsetlog.store")

WRITE_AHEAD_FILE = "WRITE-AHEAD"
#: bytes of entries before a checkpoint (every segment the file holds bytes for synced, the
#: next generation begun at the start): at 50,000 commits a second, one every ten seconds
CAPACITY = 64 << 20
#: bytes first read (then as much again each time the entries run on past them)
READ_BYTES = 1 << 20


def path_of(root: str) -> str:
    return os.path.join(root, WRITE_AHEAD_FILE)


def read(root: str) -> tuple[int | None, list[tuple[int, int, int, bytes]]]:
    """``(generation, entries)`` of the store's file: its live generation (None: no file, or
    no valid start marker, so no entries) and each entry as ``(partition, segment base
    offset, position, data)``, in the order written."""
    path = path_of(root)
    try:
        fd = segment.open_fd(path, os.O_RDONLY)
    except FileNotFoundError:
        return None, []
    try:
        data = b""
        while True:
            # (each look doubles what is read: the entries are decoded from the start again)
            chunk = os.pread(fd, max(READ_BYTES, len(data)), len(data))
            data += chunk
            generation, entries, _end, short = _native.read_write_ahead(data)
            if not (short and chunk):
                return generation, entries
    finally:
        os.close(fd)


def live_entries(root: str) -> tuple[int | None, list[tuple[str, int, bytes]]]:
    """``(generation, [(segment path, position, data)])``: the entries of the live
    generation that opening writes back, those whose segment is still its log partition's
    last one (see the module's doc), in the order written."""
    generation, entries = read(root)
    last: dict[int, int | None] = {}
    out = []
    for partition, base, position, data in entries:
        if partition not in last:
            segments = naming.list_segments(naming.partition_dir(root, partition))
            last[partition] = segments[-1][0] if segments else None
        if last[partition] == base:
            out.append((naming.segment_path(naming.partition_dir(root, partition), base),
                        position, data))
    return generation, out


def overlay(root: str) -> dict[str, list[tuple[int, bytes]]]:
    """Segment path -> ``[(position, data)]``: what ``apply`` would write into each, for a
    read-only reader (``offsetlog verify``) to read the segments as opening will."""
    out: dict[str, list[tuple[int, bytes]]] = {}
    for path, position, data in live_entries(root)[1]:
        out.setdefault(path, []).append((position, data))
    return out


def apply(root: str) -> tuple[int, int]:
    """Write the live generation's entries back into their segments where these differ (see
    the module's doc), and sync them: ``(the generation read, entries written back)``; the
    generation is 0 where there was none.

    :raises SymlinkError, StoreFileError: a segment is a link or not a regular file
    """
    generation, entries = live_entries(root)
    if generation is None:
        return 0, 0
    fds: dict[str, int] = {}
    written = 0
    try:
        for path, position, data in entries:
            fd = fds.get(path)
            if fd is None:
                fd = fds[path] = segment.open_fd(path, os.O_RDWR)
            if os.pread(fd, len(data), position) != data:
                os.pwrite(fd, data, position)
                written += 1
        for fd in fds.values():
            os.fsync(fd)
    finally:
        for fd in fds.values():
            os.close(fd)
    return generation, written


def open_file(root: str, generation: int) -> _native.WriteAhead:
    """The store's file, open for ``generation`` + 1 (what ``apply`` read: every entry of it is
    in its segment and synced), its start marker written; the caller closes it (``close``)."""
    path = path_of(root)
    created = not os.path.exists(path)
    fd = segment.open_fd(path, os.O_RDWR | os.O_CREAT)
    try:
        if created:
            segment.fsync_dir(root)
        ahead = _native.WriteAhead(fd, CAPACITY)
        ahead.begin((generation + 1) & 0xFFFFFFFF)
    except BaseException:
        os.close(fd)
        raise
    return ahead


def checkpoint(ahead: _native.WriteAhead, root: str) -> bool:
    """At the store's close, once every write has ended well: every segment the file holds
    bytes for synced and a new generation begun, so the file holds no entries. False (logged)
    where that failed: the entries stay, for the next open."""
    try:
        ahead.checkpoint()
    except OSError as e:
        log.error("%s: checkpointing the write-ahead file on close failed: %r", root, e)
        return False
    return True


def close(ahead: _native.WriteAhead, root: str, partitions: int, *, empty: bool) -> None:
    """Close the store's file (after its segments were closed); where it holds no entries
    (``empty``: ``checkpoint`` succeeded), meta.json goes back to the store's usual format."""
    ahead.close()
    os.close(ahead.fd)
    if empty:
        try:
            mark(root, partitions, holding=False)
        except OSError as e:  # (the store still opens: this engine reads either format)
            log.warning("%s: could not update meta.json after the write-ahead file's "
                        "checkpoint (%r)", root, e)


def remove(root: str) -> None:
    """Delete the store's file (opened without ``fsync="always"``, after ``apply``)."""
    try:
        os.unlink(path_of(root))
    except FileNotFoundError:
        return
    segment.fsync_dir(root)


def mark(root: str, partitions: int, *, holding: bool) -> None:
    """meta.json's format: ``WRITE_AHEAD_FORMAT_VERSION`` while the file may hold entries
    (``holding``), else the store's usual format, which older engines read. Its other fields
    stay as they are (a store from before manifests gets its manifest flag once recovery has
    written one: ``opening.settle``)."""
    stored = meta.read(root)
    want = WRITE_AHEAD_FORMAT_VERSION if holding else STORE_FORMAT_VERSION
    if stored is not None and stored.version == want and stored.checksummed:
        return  # (as it is: a store on a full disk still opens)
    meta.write(root, partitions, manifest=stored is None or stored.manifest,
               write_ahead=holding)
