"""The one module that knows how store files are named (docs/FORMAT.md, "Directory layout")."""

from __future__ import annotations

import os
import re

from offsetlog.errors import StoreFileError, SymlinkError
from offsetlog.log.format import (
    CLEANED_SUFFIX,
    LOCK_FILE,
    META_FILE,
    PARTITION_DIR_PREFIX,
    SEGMENT_NAME_DIGITS,
    SEGMENT_SUFFIX,
    SNAPSHOT_DIR,
    SWAP_SUFFIX,
)

_SEGMENT_RE = re.compile(r"^(\d{%d})\.log$" % SEGMENT_NAME_DIGITS)
_PARTITION_RE = re.compile(r"^__consumer_offsets-(\d+)$")
_SWAP_RE = re.compile(r"^(\d{%d})\.(\d{%d})\.swap$" % (SEGMENT_NAME_DIGITS, SEGMENT_NAME_DIGITS))
_CLEANED_RE = re.compile(r"^(\d{%d})\.log\.cleaned$" % SEGMENT_NAME_DIGITS)


def partition_dir(root: str, partition: int) -> str:
    return os.path.join(root, f"{PARTITION_DIR_PREFIX}{partition}")


def segment_name(base_offset: int) -> str:
    return f"{base_offset:0{SEGMENT_NAME_DIGITS}d}{SEGMENT_SUFFIX}"


def segment_path(directory: str, base_offset: int) -> str:
    return os.path.join(directory, segment_name(base_offset))


def parse_segment_name(name: str) -> int | None:
    """Base offset of a segment file name, or None if ``name`` is not a segment."""
    m = _SEGMENT_RE.match(name)
    return int(m.group(1)) if m else None


def cleaned_path(directory: str, base_offset: int) -> str:
    """Where the cleaner writes the output that will replace segments from ``base_offset``."""
    return os.path.join(directory, segment_name(base_offset) + CLEANED_SUFFIX)


def swap_path(directory: str, base_offset: int, end_offset: int) -> str:
    """A finished cleaner output replacing every segment whose base is in [base, end)."""
    return os.path.join(directory, f"{base_offset:0{SEGMENT_NAME_DIGITS}d}."
                                   f"{end_offset:0{SEGMENT_NAME_DIGITS}d}{SWAP_SUFFIX}")


def parse_swap_name(name: str) -> tuple[int, int] | None:
    m = _SWAP_RE.match(name)
    return (int(m.group(1)), int(m.group(2))) if m else None


def _entries(directory: str, match, *, want_dir: bool = False) -> list[tuple[object, str]]:
    """``(match(name), path)`` of the entries of ``directory`` that ``match`` accepts (a
    missing directory has none), each checked without following links: a store's own files
    and directories are never symbolic links, and a file where a directory belongs (or the
    reverse: a directory named like a segment) is an error naming it, never skipped or read.

    :raises SymlinkError: an entry is a symbolic link
    :raises StoreFileError: an entry is not a regular file (``want_dir``: not a directory)
    """
    try:
        it = os.scandir(directory)
    except FileNotFoundError:
        return []
    out = []
    with it:
        for entry in it:
            m = match(entry.name)
            if m is None:
                continue
            if entry.is_symlink():
                raise SymlinkError(f"{entry.path} is a symbolic link: a store never opens its "
                                   "files through one", path=entry.path)
            if want_dir and not entry.is_dir(follow_symlinks=False):
                raise StoreFileError(f"{entry.path} is named like a log partition directory "
                                     "but is not a directory", path=entry.path)
            if not want_dir and not entry.is_file(follow_symlinks=False):
                raise StoreFileError(f"{entry.path} is named like a store file but is not a "
                                     "regular file", path=entry.path)
            out.append((m, entry.path))
    return out


def list_swaps(directory: str) -> list[tuple[int, int, str]]:
    """(base, end, path) of every swap file, by base."""
    return sorted((r[0], r[1], path) for r, path in _entries(directory, parse_swap_name))


def list_cleaned(directory: str) -> list[str]:
    return sorted(path for _, path in _entries(directory, _CLEANED_RE.match))


def parse_partition_dir(name: str) -> int | None:
    m = _PARTITION_RE.match(name)
    return int(m.group(1)) if m else None


def list_segments(directory: str) -> list[tuple[int, str]]:
    """(base_offset, path) of every segment in ``directory``, oldest first.

    :raises SymlinkError, StoreFileError: an entry named like a segment is a link or not a
        regular file
    """
    return sorted(_entries(directory, parse_segment_name))


def with_limits(segments: list[tuple[int, str]]):
    """``(base_offset, path, limit)`` of each of ``segments`` (oldest first): ``limit`` is the
    next segment's base offset, which no record of this one may reach, and None for the last
    (active) segment."""
    for i, (base, path) in enumerate(segments):
        yield base, path, segments[i + 1][0] if i + 1 < len(segments) else None


def list_partition_dirs(root: str) -> list[tuple[int, str]]:
    """(partition, directory) of every log partition directory of the store at ``root``.

    :raises SymlinkError, StoreFileError: an entry named like a partition directory is a link
        or not a directory
    """
    if not os.path.isdir(root):
        raise FileNotFoundError(f"{root}: no such directory")
    return sorted(_entries(root, parse_partition_dir, want_dir=True))


def meta_path(root: str) -> str:
    return os.path.join(root, META_FILE)


def lock_path(root: str) -> str:
    return os.path.join(root, LOCK_FILE)


def snapshot_dir(root: str) -> str:
    """The LMDB environment holding the store's table snapshots."""
    return os.path.join(root, SNAPSHOT_DIR)
