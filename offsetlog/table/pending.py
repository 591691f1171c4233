"""A log partition's transactional replay state: pending offsets and transaction metadata.

Part of ``OffsetTable`` (``table.txn``) and changed only by its ``apply_batches``:

* a transactional OFFSET_COMMIT puts the entry in ``keys[group][tp][producer_id]`` as
  ``[entry, log_offset, superseded]``, invisible to ``fetch``;
* a plain commit applied to a key with pending offsets marks them *superseded*: it has a later
  log offset than all of them, so under Kafka's rule (on the commit marker, a pending offset
  replaces the stored one only if its record's log offset is later) they can no longer win.
  This keeps log offsets out of the main table, whose memory per key is a measured target;
* a plain tombstone of a key drops its pending offsets (Kafka does the same when it loads
  ``__consumer_offsets``), so ``delete_group`` / ``delete_offsets`` remove them too;
* a commit marker for a producer id moves each of its pending, not superseded, offsets into
  the table, and marks other producers' older pending offsets of that key superseded; an abort
  marker drops them;
* TRANSACTION_STATE values are kept per transactional id in ``states``.

Everything here is replay state: the live table and a replay of the log agree on it, and
``to_state()`` / ``from_state()`` carry it through snapshots.
"""

from __future__ import annotations

from typing import Iterator

from offsetlog.errors import UnstableOffsetCommitError
from offsetlog.types import TopicPartition

ENTRY, LOG_OFFSET, SUPERSEDED = range(3)


class PendingTransactions:
    __slots__ = ("keys", "by_pid", "states", "max_producer_id")

    def __init__(self) -> None:
        #: group -> (topic, partition) -> producer id -> [entry, log_offset, superseded]
        #: (never rebound: the native table keeps this dict when it is given this object)
        self.keys: dict[str, dict[tuple[str, int], dict[int, list]]] = {}
        #: producer id -> group -> the (topic, partition)s it has pending here
        self.by_pid: dict[int, dict[str, set[tuple[str, int]]]] = {}
        #: transactional id -> its latest TRANSACTION_STATE value
        self.states: dict[str, dict] = {}
        #: highest producer id seen in this partition (batches and states): ids are never reused
        self.max_producer_id = -1

    # -- apply (called by OffsetTable.apply_batches only) ----------------------------------

    def add(self, group: str, tp: tuple[str, int], producer_id: int, entry: tuple,
            log_offset: int) -> None:
        self.keys.setdefault(group, {}).setdefault(tp, {})[producer_id] = [entry, log_offset,
                                                                          False]
        self.by_pid.setdefault(producer_id, {}).setdefault(group, set()).add(tp)
        if producer_id > self.max_producer_id:
            self.max_producer_id = producer_id

    def superseded_by_plain(self, group: str, tp: tuple[str, int]) -> None:
        g = self.keys.get(group)
        if g is not None:
            for slot in g.get(tp, {}).values():
                slot[SUPERSEDED] = True

    def drop_key(self, group: str, tp: tuple[str, int]) -> None:
        g = self.keys.get(group)
        if g is None or tp not in g:
            return
        for pid in g.pop(tp):
            groups = self.by_pid[pid]
            tps = groups[group]
            tps.discard(tp)
            if not tps:
                del groups[group]
                if not groups:
                    del self.by_pid[pid]
        if not g:
            del self.keys[group]

    def complete(self, producer_id: int, commit: bool, offsets: dict) -> None:
        """Apply a marker: ``producer_id``'s pending offsets here are committed into
        ``offsets`` (the table's group -> tp -> entry) or dropped."""
        if producer_id > self.max_producer_id:
            self.max_producer_id = producer_id
        groups = self.by_pid.pop(producer_id, None)
        if groups is None:
            return
        for group, tps in groups.items():
            g = self.keys[group]
            for tp in tps:
                per_key = g[tp]
                entry, log_offset, superseded = per_key.pop(producer_id)
                if commit and not superseded:
                    offsets.setdefault(group, {})[tp] = entry
                    for slot in per_key.values():
                        if slot[LOG_OFFSET] < log_offset:
                            slot[SUPERSEDED] = True
                if not per_key:
                    del g[tp]
            if not g:
                del self.keys[group]

    def set_state(self, transactional_id: str, value: dict | None) -> None:
        if value is None:
            self.states.pop(transactional_id, None)
            return
        self.states[transactional_id] = value
        if value["producer_id"] > self.max_producer_id:
            self.max_producer_id = value["producer_id"]

    # -- reads -----------------------------------------------------------------------------

    def pending_partitions(self, group: str) -> set[tuple[str, int]]:
        """The (topic, partition)s of ``group`` with pending offsets."""
        return set(self.keys.get(group, ()))

    def check_stable(self, group: str, wanted=None) -> None:
        """``fetch(require_stable=True)`` (KIP-447): refuse while any of ``wanted`` (all of
        ``group``'s partitions when None) has transactional offsets pending.

        :raises UnstableOffsetCommitError: naming the pending partitions
        """
        pending = self.pending_partitions(group)
        if wanted is not None:
            pending &= set(wanted)
        if pending:
            tps = sorted(TopicPartition(t, p) for t, p in pending)
            raise UnstableOffsetCommitError(
                f"group {group!r} has transactional offsets pending for {tps}",
                group_id=group, partitions=tps)

    def offsets_of(self, producer_id: int) -> dict[str, dict[tuple[str, int], tuple]]:
        """group -> tp -> entry of ``producer_id``'s pending offsets here (superseded or not)."""
        out: dict[str, dict] = {}
        for group, tps in self.by_pid.get(producer_id, {}).items():
            out[group] = {tp: self.keys[group][tp][producer_id][ENTRY] for tp in tps}
        return out

    def __bool__(self) -> bool:
        return bool(self.keys) or bool(self.states)

    def _slots(self) -> Iterator[tuple[int, str, tuple[str, int], list]]:
        for group, tps in self.keys.items():
            for tp, per_pid in tps.items():
                for pid, slot in per_pid.items():
                    yield pid, group, tp, slot

    # -- snapshots -------------------------------------------------------------------------

    def to_state(self) -> dict:
        """A msgpack-able copy (for snapshots; ``from_state`` reverses it)."""
        return {"pending": sorted([pid, group, tp[0], tp[1], list(slot[ENTRY]),
                                   slot[LOG_OFFSET], slot[SUPERSEDED]]
                                  for pid, group, tp, slot in self._slots()),
                "states": {tid: dict(v) for tid, v in self.states.items()},
                "max_producer_id": self.max_producer_id}

    @classmethod
    def from_state(cls, state: dict, intern=None) -> "PendingTransactions":
        self = cls()
        for pid, group, topic, partition, entry, log_offset, superseded in state["pending"]:
            if intern is not None:
                topic = intern(topic)
            tp = (topic, partition)
            self.keys.setdefault(group, {}).setdefault(tp, {})[pid] = [
                tuple(entry), log_offset, superseded]
            self.by_pid.setdefault(pid, {}).setdefault(group, set()).add(tp)
        self.states = {tid: dict(v) for tid, v in state["states"].items()}
        self.max_producer_id = state["max_producer_id"]
        return self

    def __eq__(self, other) -> bool:
        return isinstance(other, PendingTransactions) and self.to_state() == other.to_state()
