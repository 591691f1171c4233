"""Records as the previous writer wrote them: ``OFFSET_COMMIT`` version 0, named fields
(docs/FORMAT.md), for the tests that read both versions."""

from __future__ import annotations

from offsetlog.log.records import OFFSET_COMMIT, commit_entry, commit_key


def as_v0(record):
    """The same record as the previous writer wrote it (docs/FORMAT.md, version 0)."""
    delta, rtype, version, key, value = record
    group, topic, partition = commit_key(version, key)
    named_key = {"group": group, "topic": topic, "partition": partition}
    if value is None:
        return (delta, rtype, 0, named_key, None)
    offset, metadata, epoch, ts, expire = commit_entry(version, value)
    named = {"offset": offset, "commit_timestamp": ts}
    if metadata:
        named["metadata"] = metadata
    if epoch is not None:
        named["leader_epoch"] = epoch
    if expire is not None:
        named["expire_timestamp"] = expire
    return (delta, rtype, 0, named_key, named)


def batch_as_v0(records):
    """A batch's records with every OFFSET_COMMIT one in version 0."""
    return [as_v0(r) if r[1] == OFFSET_COMMIT else r for r in records]
