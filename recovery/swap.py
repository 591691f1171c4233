"""Finishing (or discarding) a cleaner's segment swap that a crash interrupted.

The cleaner (compaction/cleaner.py) replaces segments in four steps, each made durable before
the next::

    1. write  <base>.log.cleaned      the cleaned records; fsync the file
    2. rename -> <base>.<end>.swap     fsync the directory: the commit point
    3. unlink every <b>.log with base <= b < end
    4. rename <base>.<end>.swap -> <base>.log, fsync the directory

so on open exactly one rule applies per file: a ``.cleaned`` file was never committed and is
deleted (the old segments are all still there); a ``.swap`` file was committed and the swap is
completed, whatever of steps 3-4 had happened. Either way the replayed table is unchanged: a
cleaned segment holds the same latest value per key as the segments it replaces.
"""

from __future__ import annotations

import contextlib
import logging
import os
from dataclasses import dataclass, field
from typing import Callable, Iterable

from offsetlog.log import naming, segment

log = logging.getLogger("offsetlog.recovery")


@dataclass
class SwapPlan:
    #: (base_offset, path) of the segments as they will be once swaps are finished
    segments: list[tuple[int, str]] = field(default_factory=list)
    discard: list[str] = field(default_factory=list)  # uncommitted .cleaned files
    delete: list[str] = field(default_factory=list)  # old segments a committed swap replaces
    renames: list[tuple[str, str]] = field(default_factory=list)  # swap -> segment


def plan_swaps(directory: str) -> SwapPlan:
    plan = SwapPlan(discard=naming.list_cleaned(directory))
    segments = naming.list_segments(directory)
    for base, end, swap in naming.list_swaps(directory):
        replaced = [(b, p) for b, p in segments if base <= b < end]
        plan.delete += [p for _, p in replaced]
        segments = [(b, p) for b, p in segments if not base <= b < end] + [(base, swap)]
        plan.renames.append((swap, naming.segment_path(directory, base)))
    segments.sort()
    plan.segments = segments
    return plan


def write_cleaned(directory: str, base: int, chunks: Iterable[bytes]) -> tuple[str, int]:
    """Step 1 of a swap: write ``chunks`` to ``<base>.log.cleaned`` and fsync it.

    Nothing is committed yet, so a failure leaves the old segments intact; the file is then
    removed at once (the failure may be ENOSPC: give the space back now, not at the next open).

    :return: the file's path and the bytes written
    """
    path = naming.cleaned_path(directory, base)
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o644)
    written = 0
    try:
        try:
            for data in chunks:
                if data:
                    segment.write_all(fd, data)
                    written += len(data)
            segment.sync_fd(fd)
        finally:
            os.close(fd)
    except BaseException:
        with contextlib.suppress(OSError):
            os.unlink(path)
        raise
    return path, written


def commit_swap(directory: str, cleaned: str, base: int, end: int, sources: list[str], *,
                hook: Callable[[str], None] | None = None) -> str:
    """Steps 2-4 for a ``.cleaned`` file already written and fsynced (step 1): it replaces
    ``sources``, every segment whose base is in [``base``, ``end``). A crash anywhere leaves
    the old segments or the new one, never a mix (``finish_swaps`` on open). The caller keeps
    writers off these segments meanwhile; the active segment is never among them.

    :param hook: called with each step's name once it is durable (tests crash there)
    :return: the path of the new segment
    """
    hook = hook or (lambda step: None)
    swap = naming.swap_path(directory, base, end)
    os.replace(cleaned, swap)
    segment.fsync_dir(directory)  # the commit point
    hook("swap-renamed")
    for path in sources:
        os.unlink(path)
    hook("sources-deleted")
    target = naming.segment_path(directory, base)
    os.replace(swap, target)
    segment.fsync_dir(directory)
    hook("swap-finished")
    return target


def finish_swaps(directory: str) -> list[tuple[int, str]]:
    """Apply the plan on disk; returns the resulting segments."""
    plan = plan_swaps(directory)
    if not (plan.discard or plan.renames):
        return plan.segments
    for path in plan.discard:
        log.warning("discarding an unfinished cleaning: %s", path)
        os.unlink(path)
    for path in plan.delete:
        os.unlink(path)
    final = {}
    for swap, target in plan.renames:
        log.warning("completing an interrupted segment swap: %s -> %s", swap, target)
        os.replace(swap, target)
        final[swap] = target
    segment.fsync_dir(directory)
    return [(b, final.get(p, p)) for b, p in plan.segments]
