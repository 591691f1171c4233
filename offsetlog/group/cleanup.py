"""The classic coordinator's calls that remove offsets or groups (sans-IO, like the rest).

* the **retention pass** (:meth:`GroupCleanup.expire_offsets`): the expired offsets of the
  partition's groups tombstoned, by ``offsetlog.group.expiry``'s rules (KIP-211), and every
  group left Empty without offsets deleted (Kafka's ``cleanupGroupMetadata``);
* **DeleteGroups** (:meth:`GroupCleanup.delete_group`): an Empty group's GROUP_METADATA
  tombstone;
* **OffsetDelete**'s rule (:meth:`GroupCleanup.check_offset_delete`, KIP-496).

None of them fires a due deadline: their caller keeps only the records of the Result, so a
join phase ending there would never be answered. ``Migration`` extends each to the partition's
consumer-protocol (KIP-848) groups.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field

from offsetlog.group.arguments import check_int, check_str
from offsetlog.group.errors import NonEmptyGroupError
from offsetlog.group.expiry import STANDALONE, RetentionView, expired_offsets, should_delete_group
from offsetlog.group.fencing import check_offset_delete
from offsetlog.group.group import Group
from offsetlog.group.rebalance import RebalanceEngine
from offsetlog.group.responses import Result
from offsetlog.group.state import DEAD, EMPTY
from offsetlog.log.records import offset_tombstone


@dataclass
class ExpiryResult(Result):
    """A retention pass's Result.

    :ivar remaining: group -> how many of its offsets the pass left (pending transactional
        ones included), for every group it judged
    """

    remaining: dict[str, int] = field(default_factory=dict)


class GroupCleanup(RebalanceEngine):
    """The retention pass, DeleteGroups and OffsetDelete's rule over the groups of one log
    partition (the base of ``GroupCoordinator``)."""

    def retention_view(self, group_id: str) -> RetentionView:
        """What retention needs to know about ``group_id`` (``STANDALONE`` if it has no group
        metadata)."""
        group = self._groups.get(group_id)
        return STANDALONE if group is None else RetentionView.of_group(group)

    def expire_offsets(self, offsets: Mapping[str, Mapping[tuple[str, int], tuple]], *,
                       now_ms: int, retention_ms: int,
                       pending: Mapping[str, set] | None = None,
                       others: Callable[[str], RetentionView | None] | None = None,
                       delete_groups: bool = True) -> ExpiryResult:
        """The retention pass for this log partition (KIP-211 rules: ``offsetlog.group.expiry``).

        :param offsets: group -> ``(topic, partition)`` -> table entry, i.e. the partition
            table's ``offsets``
        :param pending: group -> the ``(topic, partition)``s with pending transactional
            offsets (a set, or a mapping keyed by them, e.g. ``table.txn.keys``): those keys
            never expire, and a group with any is never deleted (Kafka's rule)
        :param others: the view of a group this coordinator does not hold, or None for none
            (the partition's consumer-protocol groups: ``Migration.expire_offsets``); a group
            neither holds is standalone
        :param delete_groups: False: expire offsets only, and delete no emptied group (the
            store's pass when calls already computed are queued behind it, whose records
            would land after the group's tombstone)
        :return: a Result whose records tombstone the expired offsets and, for every group left
            Empty without offsets, its group metadata (the group is dropped: Dead); its
            ``remaining`` counts each group's offsets left
        """
        check_int("retention_ms", retention_ms)
        # (no deadline fires: the store's retention pass keeps only this Result's records)
        _, now = self._begin(now_ms, request=False, fire=False)
        out = ExpiryResult()
        for gid in sorted(set(offsets) | set(self._groups)):
            entries = offsets.get(gid, {})
            view = None
            if others is not None and gid not in self._groups:
                view = others(gid)
            if view is None:
                view = self.retention_view(gid)
            open_tps = pending.get(gid) if pending else None
            gone = expired_offsets(view, entries, now, retention_ms)
            if open_tps:
                gone = [tp for tp in gone if tp not in open_tps]
            for topic, partition in gone:
                out.records.append(offset_tombstone(len(out.records), gid, topic, partition))
            left = out.remaining[gid] = len(entries) - len(gone)
            group = self._groups.get(gid)
            if (delete_groups and group is not None and not open_tps
                    and should_delete_group(view, left)):
                self._delete(group, now, out)
        return out

    def delete_group(self, group_id: str, *, now_ms: int) -> Result:
        """Delete an Empty group: a GROUP_METADATA tombstone (the caller tombstones its offsets).

        A group the coordinator does not know (standalone, or already gone) gives an empty
        Result.

        :raises NonEmptyGroupError: the group has members or is rebalancing
        """
        check_str("group_id", group_id)
        # (no deadline fires: the store's delete keeps only this Result's records)
        out, now = self._begin(now_ms, request=False, fire=False)
        group = self._groups.get(group_id)
        if group is None:
            return out
        if group.state is not EMPTY:
            raise NonEmptyGroupError(f"group {group_id!r} is {group.state}; it can be deleted "
                                     "once its members have left")
        self._delete(group, now, out)
        return out

    def check_offset_delete(self, group_id: str, partitions: Iterable) -> None:
        """Kafka's OffsetDelete rule (KIP-496): an unmanaged or Empty group's offsets can all
        be deleted; a consumer group with members refuses the partitions of topics they
        subscribe to; any other group with members refuses the request. offsetlog refuses the
        whole call where Kafka answers per partition (as for commits: all or nothing).

        :raises GroupSubscribedToTopicError: a requested topic is subscribed; nothing deleted
        :raises NonEmptyGroupError: the group has members and is not a consumer group
        """
        check_offset_delete(self._groups.get(group_id), group_id, partitions)

    def _delete(self, group: Group, now: int, out: Result) -> None:
        group.transition_to(DEAD, now)
        self._forget(group.group_id)
        # Every GROUP_METADATA record is written at generation 1 or later (the first is the
        # end of the first join phase), and a loaded group carries its record's generation:
        # generation 0 means nothing of the group is in the log, so it needs no tombstone.
        if group.generation > 0:
            self._record(out, group.group_id, None)
