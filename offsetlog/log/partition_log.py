"""One log partition on disk: its directory of segments and the active segment appends go to.

Not thread-safe: the store lets one writer (the group-commit leader) at a time use it.
"""

from __future__ import annotations

import os

from offsetlog.log import _native, manifest, naming, segment
from offsetlog.log.segment import SegmentFile

#: ``write_durable(log, data, next_offset)``: ``log.append_durable(data, next_offset)``, with
#: the usual write (the active segment's reserved space, ``RWF_DSYNC`` known to work, nothing
#: unsynced before it) made natively: one ``pwritev2(RWF_DSYNC)`` without the GIL and no
#: Python between it and the caller (the group-commit rounds and the lone commit call it;
#: native/src/durable.rs), or ``segment._write_dsync`` where a test replaced it. Anything else
#: (``_write_dsync`` set to None too) is ``PartitionLog.append_durable``, which it calls.
write_durable = _native.append_durable


class PartitionLog(_native.LogState):
    """A log partition's segments and appends. ``next_offset``, ``dirty``, ``segment_bytes``
    and ``_active`` live in the native base class (``_native.LogState``), for the native write
    (``write_durable``); they are plain attributes here."""

    def __init__(self, directory: str, partition: int, *, segments: list[tuple[int, str]],
                 next_offset: int, segment_bytes: int, keep_manifest: bool = False,
                 write_ahead=None) -> None:
        self.directory = directory
        #: record each roll in the store's MANIFEST (offsetlog.log.manifest)
        self.keep_manifest = keep_manifest
        self.partition = partition
        #: the store's ``_native.WriteAhead``, where the native usual write's batches become
        #: durable (offsetlog.log.write_ahead); None: each is synced in its segment
        self.write_ahead = write_ahead
        self.segment_bytes = segment_bytes
        #: (base_offset, path) of every segment, oldest first; the last is the active one
        self.segments = list(segments)
        #: log offset the next record gets; never reused, even after a truncation
        self.next_offset = next_offset
        self._active: SegmentFile | None = None
        self.dirty = False  # written since the last sync
        #: log offset below which every record was durable at the last sync; what a log
        #: opens on was made durable by its recovery
        self.synced_offset = next_offset
        #: bytes that the last cleaning left (its output); everything else is "dirty".
        #: Not persisted: after a reopen the whole log counts as dirty until cleaned once.
        self.clean_bytes = 0
        self.last_cleaned_ms: int | None = None
        self.uncleanable: str | None = None  # why cleaning failed, if it did

    def _open_active(self) -> SegmentFile:
        if self.segments:
            base, path = self.segments[-1]
            self._active = SegmentFile.open_existing(path, base, limit=self.segment_bytes)
        else:
            self._roll()
        return self._active  # type: ignore[return-value]

    def _roll(self) -> None:
        """Start a new segment at ``next_offset``; the old one is made durable first, and the
        manifest records both before the new file exists (a crash between leaves a listed,
        empty segment without a file, which recovery accepts; never an unlisted file)."""
        closed = None
        if self._active is not None:
            self._active.trim()  # a closed segment holds exactly its batches
            self._active.sync()
            closed = (self._active.base_offset, self._active.size)
            self._forget_active()
            self._active.close()
        if self.keep_manifest:
            manifest.rolled(self.directory, self.partition, closed, self.next_offset)
        segment.make_dir(self.directory)
        path = naming.segment_path(self.directory, self.next_offset)
        self._active = SegmentFile.create(path, self.next_offset, limit=self.segment_bytes)
        self.segments.append((self.next_offset, path))

    def _segment_for(self, size: int) -> SegmentFile:
        """The active segment, rolled first if ``size`` more bytes would overflow it."""
        active = self._active or self._open_active()
        if active.size and active.size + size > self.segment_bytes:
            self._roll()
            active = self._active  # type: ignore[assignment]
        return active

    def append(self, data, next_offset: int) -> None:
        """Append framed batches; the log's next offset is then ``next_offset`` (the batches'
        last offset + 1)."""
        self._segment_for(len(data)).append(data)
        self.dirty = True  # before next_offset moves: see durable_offset
        self.next_offset = next_offset

    def append_durable(self, data, next_offset: int) -> None:
        """``append`` then ``sync``: ``data`` (which may be empty) and everything appended
        before it are durable on return. When nothing earlier is waiting for a sync, the
        write and the sync are one system call (``SegmentFile.append_durable``)."""
        if not data:
            self.sync()
            return
        if self.dirty:  # an earlier unsynced append (fsync="interval"/"never"): sync it too
            self.append(data, next_offset)
            self.sync()
            return
        active = self._active
        if active is None or active.size + len(data) > self.segment_bytes:
            active = self._segment_for(len(data))  # opened, or rolled if it would overflow
        active.append_durable(data)
        self.next_offset = next_offset

    def begin_durable(self, data) -> tuple[SegmentFile, int] | None:
        """Start ``append_durable(data, ...)`` for a write made elsewhere (the kernel, through
        ``offsetlog.log.uring``): ``(segment, offset)`` to write ``data`` at with
        ``RWF_DSYNC``, then ``end_durable``; None where only ``append_durable`` can."""
        if not data or self.dirty:
            return None
        active = self._segment_for(len(data))
        at = active.begin_durable(data)
        return None if at is None else (active, at)

    def end_durable(self, active: SegmentFile, data, result: int | BaseException,
                    next_offset: int) -> None:
        """End a write begun by ``begin_durable`` with what it returned (bytes or the error)."""
        active.end_durable(data, result)
        self.next_offset = next_offset

    def sync(self) -> None:
        if self.dirty and self._active is not None:
            upto = self.next_offset  # (the caller leads the partition: nothing appends now)
            self._active.sync()
            self.synced_offset = upto
            self.dirty = False

    def durable_offset(self) -> int:
        """The log offset below which every record is durable now, for any thread: a write
        made durable by ``append_durable`` (or its native twin) moves ``next_offset`` only
        once it is; an ``append`` is not durable until the next ``sync``.

        (``next_offset`` is read first: ``append`` marks the log dirty before it moves
        ``next_offset``, so a moved offset is never taken for a synced one.)"""
        upto = self.next_offset
        return self.synced_offset if self.dirty else upto

    @property
    def active_base(self) -> int | None:
        return self.segments[-1][0] if self.segments else None

    def end_position(self) -> tuple[int, int] | None:
        """``(base offset, size in bytes)`` of the active segment: where the next batch goes.
        Only meaningful while no one appends (a snapshot holds the partition's leadership)."""
        if not self.segments:
            return None
        if self._active is not None:
            return self._active.base_offset, self._active.size
        base, path = self.segments[-1]
        return base, os.path.getsize(path)

    def dirty_ratio(self) -> float:
        """Dirty bytes over cleanable bytes, both counted in closed segments only (as Kafka
        does): the active segment can never be cleaned, so counting it would keep a freshly
        cleaned, small log permanently "dirty"."""
        closed = 0
        for _, path in self.segments[:-1]:
            try:
                closed += os.path.getsize(path)
            except FileNotFoundError:
                pass
        return 0.0 if not closed else max(0, closed - self.clean_bytes) / closed

    def replace_segments(self, segments: list[tuple[int, str]]) -> None:
        """Adopt the directory's segment list after a cleaner swap (writer paused)."""
        active = self.segments[-1] if self.segments else None
        if active is not None and (not segments or segments[-1] != active):
            raise AssertionError("a cleaner swap must never touch the active segment")
        self.segments = list(segments)

    def stats(self) -> dict:
        """Next offset, segments, bytes, dirty ratio, last cleaning (epoch ms or None) and why
        the partition is uncleanable (or None)."""
        return {"next_offset": self.next_offset, "segments": len(self.segments),
                "bytes": self.size_bytes(), "dirty_ratio": self.dirty_ratio(),
                "last_cleaned_ms": self.last_cleaned_ms, "uncleanable": self.uncleanable}

    def size_bytes(self) -> int:
        """Bytes of data (the active segment's reserved space not counted)."""
        total = 0
        for base, path in self.segments:
            if self._active is not None and base == self._active.base_offset:
                total += self._active.size
                continue
            try:
                total += os.path.getsize(path)
            except FileNotFoundError:
                pass
        return total

    def close(self) -> None:
        """Close the active segment, cutting its reserved space. The store syncs first; the
        cut itself needs no sync: a reserve that survives a crash reads as the end of the log."""
        if self._active is not None:
            try:
                self._active.trim()
            finally:
                self._forget_active()
                self._active.close()
                self._active = None

    def _forget_active(self) -> None:
        """The active segment is about to be closed: the write-ahead file no longer syncs it
        (a roll synced it; the store's close checkpointed the file first)."""
        if self.write_ahead is not None and self._active.fd >= 0:
            self.write_ahead.forget(self._active.fd)
