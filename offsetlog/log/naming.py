"""The one module that knows how store files are named (docs/FORMAT.md, "Directory layout")."""

from __future__ import annotations

import os
import re

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


def list_swaps(directory: str) -> list[tuple[int, int, str]]:
    """(base, end, path) of every swap file, by base."""
    try:
        names = os.listdir(directory)
    except FileNotFoundError:
        return []
    out = []
    for name in names:
        r = parse_swap_name(name)
        if r is not None:
            out.append((r[0], r[1], os.path.join(directory, name)))
    out.sort()
    return out


def list_cleaned(directory: str) -> list[str]:
    try:
        return sorted(os.path.join(directory, n) for n in os.listdir(directory)
                      if _CLEANED_RE.match(n))
    except FileNotFoundError:
        return []


def parse_partition_dir(name: str) -> int | None:
    m = _PARTITION_RE.match(name)
    return int(m.group(1)) if m else None


def list_segments(directory: str) -> list[tuple[int, str]]:
    """(base_offset, path) of every segment in ``directory``, oldest first."""
    try:
        names = os.listdir(directory)
    except FileNotFoundError:
        return []
    found = []
    for name in names:
        base = parse_segment_name(name)
        if base is not None:
            found.append((base, os.path.join(directory, name)))
    found.sort()
    return found


def with_limits(segments: list[tuple[int, str]]):
    """``(base_offset, path, limit)`` of each of ``segments`` (oldest first): ``limit`` is the
    next segment's base offset, which no record of this one may reach, and None for the last
    (active) segment."""
    for i, (base, path) in enumerate(segments):
        yield base, path, segments[i + 1][0] if i + 1 < len(segments) else None


def list_partition_dirs(root: str) -> list[tuple[int, str]]:
    found = []
    for name in os.listdir(root):
        p = parse_partition_dir(name)
        if p is not None and os.path.isdir(os.path.join(root, name)):
            found.append((p, os.path.join(root, name)))
    found.sort()
    return found


def meta_path(root: str) -> str:
    return os.path.join(root, META_FILE)


def lock_path(root: str) -> str:
    return os.path.join(root, LOCK_FILE)


def snapshot_dir(root: str) -> str:
    """The LMDB environment holding the store's table snapshots."""
    return os.path.join(root, SNAPSHOT_DIR)
