"""Shared helpers of the durability suites (framing corruption, recovery, model, crash, faults,
concurrency).

Kept deliberately independent of the engine's own reading code where a test needs an oracle:
batch boundaries come from file sizes observed after each acknowledged commit, and expected
states from plain dicts of what the test committed, never from replaying the log with the code
under test.
"""

from __future__ import annotations

import os
import random
import shutil
import threading
from typing import Iterable

from offsetlog import OffsetAndMetadata, OffsetStore, TopicPartition
from offsetlog.log import naming, segment
from offsetlog.recovery.crashtest.power_cut import durable_ranges, unsynced_gaps
from offsetlog.recovery.tools.inspect import data_size
from support.stores import ManualClock, open_log_store  # noqa: F401 - the suites import them from here

TP = TopicPartition
OAM = OffsetAndMetadata

#: environment variable that replays one seed (printed in every failure message)
SEED_ENV = "OFFSETLOG_TEST_SEED"


# -- seeded randomness ----------------------------------------------------------------------

def new_seed() -> int:
    """A fresh seed, or the one in ``$OFFSETLOG_TEST_SEED`` to replay a failure."""
    value = os.environ.get(SEED_ENV)
    return int(value) if value else random.randrange(1 << 32)


class Seeded(random.Random):
    """A ``random.Random`` that knows its seed; ``why(msg)`` tags a message with it."""

    def __init__(self, seed: int | None = None) -> None:
        self.seed_value = new_seed() if seed is None else seed
        super().__init__(self.seed_value)

    def why(self, message: str = "") -> str:
        return f"{message} [replay with {SEED_ENV}={self.seed_value}]"


# -- stores ---------------------------------------------------------------------------------

open_store = open_log_store


def segment_files(root) -> dict[int, list[str]]:
    """partition -> its segment paths, oldest first."""
    return {p: [path for _, path in naming.list_segments(d)]
            for p, d in naming.list_partition_dirs(str(root))}


def last_segment(root, partition: int) -> str:
    return segment_files(root)[partition][-1]


def file_sizes(root) -> dict[str, int]:
    """Data size (see ``data_size``) of every segment file under ``root``."""
    return {path: data_size(path) for paths in segment_files(root).values() for path in paths}


def copy_store(src, dst) -> str:
    """A copy of a closed store directory (without its LOCK file)."""
    shutil.copytree(str(src), str(dst), ignore=shutil.ignore_patterns("LOCK"))
    return str(dst)


def rebase(path: str, src, dst) -> str:
    """``path`` (inside store ``src``) as the same file inside the copy ``dst``."""
    return os.path.join(str(dst), os.path.relpath(path, str(src)))


def flip_byte(path: str, position: int, mask: int = 0xFF) -> None:
    with open(path, "r+b") as f:
        f.seek(position)
        b = f.read(1)[0]
        f.seek(position)
        f.write(bytes([b ^ mask]))


def truncate(path: str, size: int) -> None:
    os.truncate(path, size)


def fetch_all(store: OffsetStore, groups: Iterable[str]) -> dict[str, dict]:
    """group -> fetch(group), leaving out groups with nothing committed."""
    out = {}
    for g in groups:
        got = store.fetch(g)
        if got:
            out[g] = got
    return out


def store_state(store: OffsetStore) -> dict[str, dict]:
    """Everything the store holds, through the public API only."""
    return fetch_all(store, store.groups())


class CommitLog:
    """Commits made one at a time, with the segment file and byte range each batch landed in.

    The boundaries are observed from file sizes (one ``commit_sync`` from one thread is one
    batch), so they do not depend on the reader under test.
    """

    def __init__(self, store: OffsetStore) -> None:
        self.store = store
        self.root = store.path
        self.commits: list[tuple[str, dict]] = []  # (group, offsets)
        self.spans: list[tuple[str, int, int]] = []  # (segment path, start, end)

    def commit(self, group: str, offsets: dict) -> None:
        before = file_sizes(self.root)
        self.store.commit_sync(group, offsets)
        after = file_sizes(self.root)
        grown = [(p, before.get(p, 0), s) for p, s in after.items() if s != before.get(p, 0)]
        assert len(grown) == 1, f"one commit_sync should grow one segment file: {grown}"
        self.commits.append((group, dict(offsets)))
        self.spans.append(grown[0])

    def model(self, upto: int | None = None, keep=None) -> dict[str, dict]:
        """State after the first ``upto`` commits (those ``keep(i)`` says survived)."""
        state: dict[str, dict] = {}
        for i, (group, offsets) in enumerate(self.commits[:upto]):
            if keep is not None and not keep(i):
                continue
            g = state.setdefault(group, {})
            for tp, v in offsets.items():
                g[tp] = v if isinstance(v, OffsetAndMetadata) else OffsetAndMetadata(v)
        return {g: dict(sorted(v.items())) for g, v in state.items() if v}

    def groups(self) -> set[str]:
        return {g for g, _ in self.commits}


# -- LevelDB's fault-injection idea: a crash loses everything after the last fsync ----------

def _fd_path(fd: int) -> str | None:
    try:
        return os.readlink(f"/proc/self/fd/{fd}")
    except OSError:
        return None


class SyncTracker:
    """Wraps ``offsetlog.log.segment._sync`` and the combined write + sync ``_write_dsync`` to
    remember how much of each file was made durable.

    ``drop_unsynced()`` then truncates every segment to its last synced size: the state a power
    failure may leave (LevelDB's ``fault_injection_test.cc``). Files that existed when the
    tracker was installed count as durable up to their size then. A combined write makes
    only its own bytes durable: a follower's write can end before the one it follows, and
    its batch is then kept past the unsynced bytes before it, which are zeroed (a hole).

    ``fault``, when set, is called before every data sync of either kind; if it raises, that
    sync fails as a failing ``fdatasync`` would after its write: the combined call writes its
    bytes (not durably) and then raises, and nothing is recorded as durable.
    """

    def __init__(self, monkeypatch, root) -> None:
        self.root = str(root)
        self.durable: dict[str, int] = dict(file_sizes(self.root))
        #: the ranges [start, end) combined writes made durable, per file
        self.ranges: dict[str, list[tuple[int, int]]] = {}
        self.fault = None
        self.syncs = 0  # data syncs that returned, of either kind
        self.combined = 0  # ... of which combined writes
        self._real = segment._sync
        self._real_dsync = segment._write_dsync
        self._lock = threading.Lock()
        monkeypatch.setattr(segment, "_sync", self._sync)
        if self._real_dsync is not None:
            monkeypatch.setattr(segment, "_write_dsync", self._write_dsync)

    def _sync(self, fd: int) -> None:
        if self.fault is not None:
            self.fault(fd)
        self._real(fd)  # raises -> nothing is recorded as durable
        # the writer's position: the end of the data
        self._record(fd, os.lseek(fd, 0, os.SEEK_CUR))

    def _write_dsync(self, fd: int, data, offset: int) -> int:
        if self.fault is not None:
            try:
                self.fault(fd)
            except BaseException:
                os.pwrite(fd, data, offset)  # written, never synced
                raise
        n = self._real_dsync(fd, data, offset)
        self._record(fd, (offset, offset + n))
        return n

    def _record(self, fd: int, synced: int | tuple[int, int]) -> None:
        """A data sync returned: every byte before ``synced``, or (a combined write) the
        range ``synced``, is durable."""
        path = _fd_path(fd)
        with self._lock:
            self.syncs += 1
            self.combined += isinstance(synced, tuple)
            if path is None:
                pass
            elif isinstance(synced, tuple):
                self.ranges.setdefault(path, []).append(synced)
            else:
                self.durable[path] = max(self.durable.get(path, 0), synced)

    def durable_size(self, path: str, size: int = 1 << 62) -> int:
        """How much of file ``path`` from its start is durable."""
        return durable_ranges(self.durable.get(path, 0), self.ranges.get(path, []), size)[0]

    def drop_unsynced(self) -> dict[str, tuple[int, int]]:
        """Lose every segment's unsynced bytes: truncate it after its last durable byte and
        zero the unsynced bytes before that; returns path -> (old, new) size."""
        cut = {}
        for path, size in file_sizes(self.root).items():
            prefix, kept = durable_ranges(self.durable.get(path, 0),
                                          self.ranges.get(path, []), size)
            keep = kept[-1][1] if kept else prefix
            if keep < size or kept:
                cut[path] = (size, keep)
            if keep < size:
                os.truncate(path, keep)
            if kept:  # (durable batches past unsynced bytes: holes before them)
                with open(path, "r+b") as f:
                    for start, end in unsynced_gaps(prefix, kept, keep):
                        f.seek(start)
                        f.write(bytes(end - start))
        return cut


def replace_sync(monkeypatch, sync) -> None:
    """Make ``sync(fd)`` the log's data sync in both forms the engine uses: ``segment._sync``,
    and the sync half of the combined ``segment._write_dsync`` (a plain ``pwrite`` of the
    bytes, then ``sync(fd)``, as ``write`` + ``fdatasync`` would be). For tests that fail,
    slow or gate the sync of a round whichever way the round is written."""
    monkeypatch.setattr(segment, "_sync", sync)
    if segment._write_dsync is not None:
        def write_dsync(fd: int, data, offset: int) -> int:
            n = os.pwrite(fd, data, offset)
            sync(fd)
            return n

        monkeypatch.setattr(segment, "_write_dsync", write_dsync)


def split_writes(monkeypatch) -> None:
    """Turn the combined write + sync off: every round is ``_write`` + ``_sync``, as on a
    platform without ``pwritev``/``RWF_DSYNC``."""
    monkeypatch.setattr(segment, "_write_dsync", None)
