"""The one module that knows how store files are named (docs/FORMAT.md, "Directory layout")."""

from __future__ import annotations

import os
import re

from offsetlog.format import (LOCK_FILE, META_FILE, PARTITION_DIR_PREFIX, SEGMENT_NAME_DIGITS,
                              SEGMENT_SUFFIX)

_SEGMENT_RE = re.compile(r"^(\d{%d})\.log$" % SEGMENT_NAME_DIGITS)
_PARTITION_RE = re.compile(r"^__consumer_offsets-(\d+)$")


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
