"""Which offsets have expired (KIP-211). Pure: the table and ``now_ms`` in, keys out.

For a group without group metadata (a "standalone" group whose consumers commit with
``generation_id=-1``), an offset expires ``retention_ms`` after its last commit. A commit that
carried an explicit expire timestamp (the pre-KIP-211 API) expires at that timestamp instead.

For a group with group metadata the coordinator decides (issue 4): an Empty group's offsets
expire ``retention_ms`` after it became Empty; a group with members keeps them here, so nothing
of a live group is ever expired before its rules arrive.
"""

from __future__ import annotations

from offsetlog.table import COMMIT_TIMESTAMP, EXPIRE_TIMESTAMP, OffsetTable


def _base_timestamp(meta: dict | None) -> tuple[bool, int | None]:
    """(may_expire, base) for a group: base None means "each offset's commit timestamp"."""
    if meta is None:
        return True, None
    if meta.get("members"):
        return False, None
    return True, meta.get("current_state_timestamp")


def expired_offsets(table: OffsetTable, now_ms: int, retention_ms: int) -> dict[str, list]:
    """group -> [(topic, partition)] of the offsets that have expired at ``now_ms``."""
    out: dict[str, list] = {}
    for group, entries in table.offsets.items():
        may_expire, base = _base_timestamp(table.group_metadata.get(group))
        if not may_expire:
            continue
        gone = []
        for tp, e in entries.items():
            expire_at = e[EXPIRE_TIMESTAMP]
            if expire_at is None:
                start = e[COMMIT_TIMESTAMP] if base is None else max(base, e[COMMIT_TIMESTAMP])
                expire_at = start + retention_ms
            if now_ms >= expire_at:
                gone.append(tp)
        if gone:
            gone.sort()
            out[group] = gone
    return out
