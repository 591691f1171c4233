"""Records computed at the head of a partition's queue: deletes, expiry, topic creation.

Each function here returns a *producer*: a function of the partition's ``OffsetTable`` that
the group-commit leader calls when the queue item reaches the head of the queue, alone in its
round (``QueueItem(deferred=...)``). So the records see every earlier commit, and a retention
pass can never tombstone an offset committed a moment before it. Producers read the table
and the coordinator and return records; they change nothing themselves (the leader applies
what they return, like any other batch). Raising refuses the item: nothing is written.
"""

from __future__ import annotations

from typing import Callable

from offsetlog.errors import TopicAlreadyExistsError
from offsetlog.group.errors import GroupIdNotFoundError
from offsetlog.group.migration import Migration
from offsetlog.log import records as rec
from offsetlog.table import OffsetTable
from offsetlog.types import TopicPartition

Producer = Callable[[OffsetTable], tuple]


def offset_deletes(groups: Migration, group_id: str,
                   partitions: list[TopicPartition]) -> Producer:
    """Tombstones for ``group_id``'s committed (or pending) offsets of ``partitions``, under
    Kafka's OffsetDelete rule (KIP-496), checked against the group (classic or consumer
    protocol: ``groups``, the partition's ``Migration``) as of the item's turn."""
    def tombstones(table: OffsetTable) -> tuple:
        groups.check_offset_delete(group_id, partitions)
        # A tombstone also drops the key's pending transactional offsets.
        present = set(table.offsets.get(group_id, {})) | table.txn.pending_partitions(group_id)
        return tuple(rec.offset_tombstone(i, group_id, t, p)
                     for i, (t, p) in enumerate(tp for tp in partitions if tp in present))
    return tombstones


def group_delete(groups: Migration, group_id: str, now_ms: int) -> Producer:
    """Tombstones for every offset of ``group_id`` and its group's records (classic or
    consumer protocol: ``groups``, the partition's ``Migration``); refused
    (``NonEmptyGroupError``) while the group has members, in the coordinator or in the log as
    written up to this item, and a group the partition has neither offsets nor records of is
    ``GroupIdNotFoundError`` (Kafka's answer)."""
    def tombstones(table: OffsetTable) -> tuple:
        result = groups.delete_group(group_id, now_ms=now_ms,
                                     logged_members=_logged_members(table, group_id))
        # QueueItem transactional offsets go too: a tombstone drops them (docs/TRANSACTIONS.md)
        keys = set(table.offsets.get(group_id, {})) | table.txn.pending_partitions(group_id)
        out = [rec.offset_tombstone(i, group_id, t, p) for i, (t, p) in enumerate(sorted(keys))]
        out.extend((len(out) + i,) + tuple(r[1:]) for i, r in enumerate(result.records))
        if not out and group_id not in table.group_metadata:
            raise GroupIdNotFoundError(f"group {group_id!r} does not exist")
        return tuple(out)
    return tombstones


def _logged_members(table: OffsetTable, group_id: str) -> bool:
    """Whether the table (the log as applied so far) holds members of ``group_id``: in its
    classic GROUP_METADATA value, or as consumer-protocol member records."""
    value = table.group_metadata.get(group_id)
    if value is not None and value.get("members"):
        return True
    return any(g == group_id and member is not None
               for _, g, member in table.consumer_groups)


def expiry(groups: Migration, now_ms: int, retention_ms: int,
           queued_behind: Callable[[], bool]) -> Producer:
    """The retention pass of one partition (KIP-211), over ``groups``, its classic and its
    consumer-protocol groups: standalone groups expire from their commits; classic groups by
    state (Empty since when, subscribed topics), consumer groups by their subscribed topics;
    emptied groups are deleted. Keys with pending transactional offsets, and groups holding
    any, are left alone until their transactions complete.

    The coordinators have already computed every call queued behind the pass, and their
    records are still to be written, after the pass's. So while ``queued_behind()``, no
    group is deleted (the next pass does it): the leave that emptied a group could otherwise
    write its record after the group's tombstone, and a replay bring the group back that the
    live coordinator had dropped. An offset's tombstone is safe either way: a commit queued
    behind it is newer."""
    def expire(table: OffsetTable) -> tuple:
        result = groups.expire_offsets(table.offsets, now_ms=now_ms,
                                       retention_ms=retention_ms, pending=table.txn.keys,
                                       delete_groups=not queued_behind())
        return tuple(result.records)
    return expire


def topic_creation(name: str, value: dict) -> Producer:
    """The TOPIC record registering ``name``, unless it is registered already."""
    def record(table: OffsetTable) -> tuple:
        if name in table.topics:
            raise TopicAlreadyExistsError(f"topic {name!r} already exists")
        return (rec.topic(0, name, value),)
    return record


def scram_credential(user: str, mechanism: str, value: dict | None) -> Producer:
    """The USER_SCRAM_CREDENTIAL record of ``user`` and ``mechanism`` (a tombstone for None;
    none at all when deleting one that does not exist)."""
    def record(table: OffsetTable) -> tuple:
        if value is None and (user, mechanism) not in table.scram_credentials:
            return ()
        return (rec.user_scram_credential(0, user, mechanism, value),)
    return record
