"""The in-memory table of one log partition: the replay of its records, and nothing else.

Only ``apply_batch`` changes it (``apply_batches`` for many, ``apply_commit_calls`` for commit
calls' offsets: the same change, without building their records), and the store
calls it both when a commit becomes durable and while recovering, so the live state and a
replay of the log cannot drift apart. It holds
no locks, reads no clock and touches no files; the store serialises calls per partition.

Layout (chosen for memory: see bench/RESULTS.md, "Memory")::

    offsets[group][(topic, partition)] = (offset, metadata, leader_epoch,
                                          commit_timestamp, expire_timestamp)

Transactional state (pending offsets, transaction metadata) is in ``txn``
(``offsetlog.table.pending.PendingTransactions``); batches that touch it leave the hot path.

Keying by group first means ``fetch(group)`` does not scan other groups, and the group string
is stored once per group rather than once per key. Keys are plain tuples (equal to, and
hashing like, ``TopicPartition``) and topics are interned, so a million keys share their
topic strings.
"""

from __future__ import annotations

import sys
from typing import Iterator

from offsetlog.errors import UnsupportedVersionError
from offsetlog.log import _native
from offsetlog.log._native import apply_records, offsets_from_flat
from offsetlog.log.format import Attribute, RecordType
from offsetlog.log.records import (
    ACL,
    COMMIT,
    CONSUMER_GROUP_TYPES,
    GROUP_METADATA,
    OFFSET_COMMIT,
    OFFSET_COMMIT_VERSION,
    TOPIC,
    TRANSACTION_MARKER,
    TRANSACTION_STATE,
    USER_SCRAM_CREDENTIAL,
    Record,
    acl_key,
    check_version,
    commit_entry,
    commit_key,
    records_from_fields,
)
from offsetlog.table.pending import PendingTransactions

SEMANTIC = Attribute.SEMANTIC
CONTROL = Attribute.CONTROL

#: index of each field in a table entry
OFFSET, METADATA, LEADER_EPOCH, COMMIT_TIMESTAMP, EXPIRE_TIMESTAMP = range(5)

Entry = tuple  # (offset, metadata, leader_epoch, commit_timestamp, expire_timestamp)


class OffsetTable(_native.TableState):
    """The committed offsets and the latest record of every other key, as of ``next_offset``.

    ``offsets`` (group -> {(topic, partition) -> entry}), ``next_offset`` (log offset after
    the last applied record: the table is "as of" it), ``records_applied`` and ``txn`` live
    in the native base class (``_native.TableState``) with the usual apply of commit calls
    (``apply_commit_calls``), which the lone commit calls without the interpreter; they are
    plain attributes here.
    """

    __slots__ = ("group_metadata", "topics", "consumer_groups", "scram_credentials", "acls")

    def __init__(self) -> None:
        #: group -> the value of its latest GROUP_METADATA record (interpreted by the coordinator)
        self.group_metadata: dict[str, dict] = {}
        #: pending transactional offsets and transaction metadata (offsetlog.table.pending)
        self.txn = PendingTransactions()
        #: topic -> the value of its latest TOPIC record (the wire server's topic registry)
        self.topics: dict[str, dict] = {}
        #: (record type, group, member or None) -> the value of the latest consumer group
        #: protocol record of that key (interpreted by offsetlog.group.consumer)
        self.consumer_groups: dict[tuple, dict] = {}
        #: (user, mechanism) -> the value of its latest USER_SCRAM_CREDENTIAL record (the wire
        #: server's SASL/SCRAM credentials)
        self.scram_credentials: dict[tuple[str, str], dict] = {}
        #: ACL binding (its seven key fields, offsetlog.log.records.KEY_FIELDS) -> the value
        #: of its latest ACL record (interpreted by offsetlog.acl)
        self.acls: dict[tuple, dict] = {}

    def apply_batches(self, batches) -> None:
        """Apply batches in order: the single entry point for state changes.

        :param batches: iterable of ``(base_offset, records, attributes, producer_id,
            producer_epoch)``; the live path passes one group-commit round, recovery a chunk
            of a segment (one call per many batches keeps replay close to a bare loop).
        """
        offsets = self.offsets
        intern = sys.intern
        txn = self.txn
        pending = txn.keys  # groups with transactional offsets pending; usually empty
        count = 0
        for base_offset, records, attributes, producer_id, producer_epoch in batches:
            if attributes & SEMANTIC:
                self._apply_transactional(base_offset, records, attributes, producer_id)
                count += len(records)
                continue
            # Plain commits go into ``offsets`` natively (offsetlog.log._native.apply_records, the
            # same code replay's native loop applies them with); the loop below takes the rest:
            # older versions, other shapes and types, and groups with pending transactions.
            n = len(records)
            i = 0 if pending else apply_records(offsets, records, 0, intern)
            while i < n:
                delta, rtype, version, key, value = records[i]
                i += 1
                if rtype == OFFSET_COMMIT and version <= OFFSET_COMMIT_VERSION:
                    if version == OFFSET_COMMIT_VERSION:
                        group, topic, partition = key
                    else:  # version 0, named fields: logs written before version 1
                        group, topic, partition = commit_key(version, key)
                    tp = (intern(topic), partition)
                    if pending and group in pending:
                        # A plain commit supersedes the key's pending transactional offsets
                        # (Kafka's log-offset rule); a tombstone drops them.
                        if value is None:
                            txn.drop_key(group, tp)
                        else:
                            txn.superseded_by_plain(group, tp)
                    g = offsets.get(group)
                    if value is None:
                        if g is not None and g.pop(tp, None) is not None and not g:
                            del offsets[group]
                    else:
                        if g is None:
                            g = offsets[group] = {}
                        # the usual commit holds just the two required fields
                        g[tp] = ((value[0], "", None, value[1], None)
                                 if version and len(value) == 2 else commit_entry(version, value))
                else:
                    self._apply_other(base_offset + delta, rtype, version, key, value)
                if i < n and not pending:
                    i = apply_records(offsets, records, i, intern)
            count += n
        if count:
            self.next_offset = base_offset + records[-1][0] + 1
            self.records_applied += count

    # apply_commit_calls(base_offset, calls) is native (_native.TableState): the usual call's
    # fields go straight into ``offsets``; any other call comes back here.

    def _apply_calls_as_records(self, base_offset: int, fields, at: int) -> None:
        """``apply_commit_calls``' way for a call it does not apply itself (metadata or
        epochs, or groups with pending transactional offsets): the call's records, built from
        its ``fields`` and numbered from ``at`` in the batch at ``base_offset``, through
        ``apply_batches``."""
        self.apply_batches(((base_offset, records_from_fields(fields, at - base_offset),
                             0, -1, -1),))

    def apply_transactional_call(self, base_offset: int, fields, producer_id: int,
                                 producer_epoch: int) -> None:
        """Apply one commit call's ``fields`` written as ``producer_id``'s transactional batch
        at ``base_offset`` (the wire's TxnOffsetCommit, framed natively): pending offsets."""
        self.apply_batches(((base_offset, records_from_fields(fields), Attribute.TRANSACTIONAL,
                             producer_id, producer_epoch),))

    def apply_round(self, batches) -> None:
        """Apply a group-commit round in order: its batches, each a ``(base_offset,
        records, attributes, producer_id, producer_epoch)`` batch (``apply_batches``) or a
        ``(base_offset, calls)`` batch of commit calls (``apply_commit_calls``)."""
        for batch in batches:
            if len(batch) == 2:
                self.apply_commit_calls(*batch)
            else:
                self.apply_batches((batch,))

    def plain(self) -> bool:
        """Whether plain offset commits may go into ``offsets`` without this class: no group
        has pending transactional offsets that a plain commit would supersede or drop."""
        return not self.txn.keys

    def applied_natively(self, count: int, next_offset: int) -> None:
        """Count ``count`` plain commits that replay put into ``offsets`` from their bytes
        (``BatchReader.replay_into``), the last ending at ``next_offset``."""
        if count:
            self.next_offset = next_offset
            self.records_applied += count

    def _apply_transactional(self, base_offset: int, records, attributes: int,
                             producer_id: int) -> None:
        """A control batch (one transaction marker) or a transactional batch of offsets."""
        txn = self.txn
        if attributes & CONTROL:
            for delta, rtype, version, key, value in records:
                check_version(rtype, version)
                if rtype != TRANSACTION_MARKER or value is None:
                    raise UnsupportedVersionError(
                        f"control batch at offset {base_offset} holds a record of type "
                        f"{rtype}, not a transaction marker")
                txn.complete(key["producer_id"], value["result"] == COMMIT, self.offsets)
            return
        intern = sys.intern
        for delta, rtype, version, key, value in records:
            if rtype != OFFSET_COMMIT or version > OFFSET_COMMIT_VERSION:
                raise UnsupportedVersionError(
                    f"transactional batch at offset {base_offset} holds a record of type "
                    f"{rtype}; only offset commits can be transactional")
            if value is None:
                raise UnsupportedVersionError(
                    f"transactional batch at offset {base_offset} holds a tombstone")
            group, topic, partition = commit_key(version, key)
            txn.add(group, (intern(topic), partition), producer_id,
                    commit_entry(version, value), base_offset + delta)

    def apply_batch(self, base_offset: int, records, attributes: int = 0,
                    producer_id: int = -1, producer_epoch: int = -1) -> None:
        """Apply one batch (``apply_batches`` of one)."""
        self.apply_batches(((base_offset, records, attributes, producer_id, producer_epoch),))

    def apply(self, log_offset: int, record: Record) -> None:
        """Apply a single record found at ``log_offset`` (a batch of one)."""
        self.apply_batch(log_offset - record[0], (record,))

    def _apply_other(self, log_offset: int, rtype: int, version: int, key, value) -> None:
        check_version(rtype, version)  # raises for unknown types and newer versions
        if rtype == GROUP_METADATA:
            if value is None:
                self.group_metadata.pop(key["group"], None)
            else:
                self.group_metadata[key["group"]] = value
        elif rtype == TRANSACTION_STATE:
            self.txn.set_state(key["transactional_id"], value)
        elif rtype == TOPIC:
            if value is None:
                self.topics.pop(key["topic"], None)
            else:
                self.topics[key["topic"]] = value
        elif rtype == USER_SCRAM_CREDENTIAL:
            k = (key["user"], key["mechanism"])
            if value is None:
                self.scram_credentials.pop(k, None)
            else:
                self.scram_credentials[k] = value
        elif rtype == ACL:
            if value is None:
                self.acls.pop(acl_key(key), None)
            else:
                self.acls[acl_key(key)] = value
        elif rtype in CONSUMER_GROUP_TYPES:
            k = (rtype, key["group"], key.get("member"))
            if value is None:
                self.consumer_groups.pop(k, None)
            else:
                self.consumer_groups[k] = value
        else:
            raise UnsupportedVersionError(
                f"record at offset {log_offset} is a {RecordType(rtype).name}, "
                "which this version cannot apply")

    # -- snapshots -----------------------------------------------------------------------

    #: the sections of ``snapshot_state``. A snapshot holding any other section was written
    #: by a version that keeps more state than this one: loading it would drop that state, so
    #: ``from_snapshot_state`` refuses it (the caller replays the log instead).
    SNAPSHOT_SECTIONS = frozenset({"next_offset", "records_applied", "topics", "offsets",
                                   "group_metadata", "transactions", "topic_registry",
                                   "consumer_groups", "user_scram_credentials", "acls"})
    #: sections a snapshot may lack: written by a version without them, whose log cannot
    #: hold their records either, so they are empty
    OPTIONAL_SECTIONS = frozenset({"topic_registry", "consumer_groups",
                                   "user_scram_credentials", "acls"})

    def snapshot_state(self) -> dict:
        """The table's whole state as a dict of named sections of msgpack-able values
        (recovery/snapshot.py stores it; docs/FORMAT.md, "Snapshot store").

        ``offsets`` is flattened for speed (no object per key on either side): a list
        ``[group, flat, group, flat, ...]`` where ``flat`` holds 7 values per key:
        ``topic_index, partition, offset, metadata, leader_epoch, commit_timestamp,
        expire_timestamp``, and ``topics`` lists each topic once. The lists are new; the
        values in them are immutable or never mutated after they are applied, so the result
        is a consistent copy even once the table moves on.
        """
        topic_index: dict[str, int] = {}
        offsets: list = []
        for group, g in self.offsets.items():
            flat: list = []
            extend = flat.extend
            for (topic, partition), entry in g.items():
                i = topic_index.get(topic)
                if i is None:
                    i = topic_index[topic] = len(topic_index)
                extend((i, partition))
                extend(entry)
            offsets.append(group)
            offsets.append(flat)
        state = {"next_offset": self.next_offset, "records_applied": self.records_applied,
                "topics": list(topic_index), "offsets": offsets,
                "group_metadata": dict(self.group_metadata),
                # pending transactional offsets and transaction metadata: a snapshot taken
                # while a transaction is open must hand it on, undecided
                "transactions": self.txn.to_state(),
                "topic_registry": dict(self.topics)}
        if self.consumer_groups:
            # only when there are any: a version without the section discards a snapshot
            # holding it (it could not keep that state), and keeps every other one
            state["consumer_groups"] = [[*k, v] for k, v in self.consumer_groups.items()]
        if self.scram_credentials:
            # likewise only when there are any
            state["user_scram_credentials"] = [[*k, v] for k, v
                                               in self.scram_credentials.items()]
        if self.acls:  # the same: only when there are any
            state["acls"] = [[*k, v] for k, v in self.acls.items()]
        return state

    @classmethod
    def from_snapshot_state(cls, state: dict) -> "OffsetTable":
        """The table ``snapshot_state`` described.

        :raises ValueError: a section this version does not know, a missing section, or a
            malformed one (the snapshot is then discarded, never half-loaded)
        """
        if not isinstance(state, dict):
            raise ValueError(f"snapshot state is a {type(state).__name__}, not a map")
        unknown = set(state) - cls.SNAPSHOT_SECTIONS
        if unknown:
            raise ValueError(f"unknown snapshot sections {sorted(map(str, unknown))}")
        missing = cls.SNAPSHOT_SECTIONS - cls.OPTIONAL_SECTIONS - set(state)
        if missing:
            raise ValueError(f"missing snapshot sections {sorted(missing)}")
        table = cls()
        try:
            intern = sys.intern
            topics = [intern(t) for t in state["topics"]]
            # natively: key tuples shared, entries hidden from the garbage collector; the
            # native snapshot decoder (recovery/snapshot.py) has built them already
            offsets = state["offsets"]
            if isinstance(offsets, dict):
                # built, so keyed by tuples: a msgpack map, whose keys are strings, is not
                if not all(isinstance(g, dict) and type(next(iter(g), ())) is tuple
                           for g in offsets.values()):
                    raise ValueError("the offsets section is a map, not group, offsets pairs")
                table.offsets = offsets
            else:
                table.offsets = offsets_from_flat(offsets, topics)
            table.group_metadata = dict(state["group_metadata"])
            table.next_offset = int(state["next_offset"])
            table.records_applied = int(state["records_applied"])
            table.txn = PendingTransactions.from_state(state["transactions"], intern=intern)
            table.topics = dict(state.get("topic_registry", {}))
            table.consumer_groups = {(int(t), g, m): v for t, g, m, v
                                     in state.get("consumer_groups", [])}
            table.scram_credentials = {(u, m): v for u, m, v
                                       in state.get("user_scram_credentials", [])}
            table.acls = {tuple(a[:7]): a[7] for a in state.get("acls", [])}
            if any(len(a) != 8 for a in state.get("acls", [])):
                raise ValueError("an acls entry of other than 8 fields")
        except (TypeError, IndexError, KeyError, AttributeError, ValueError) as e:
            raise ValueError(f"malformed snapshot state: {e!r}") from None
        return table

    # -- reads ---------------------------------------------------------------------------

    def get(self, group: str, topic: str, partition: int) -> Entry | None:
        g = self.offsets.get(group)
        return None if g is None else g.get((topic, partition))

    def group_entries(self, group: str) -> list[tuple[tuple[str, int], Entry]]:
        g = self.offsets.get(group)
        return [] if g is None else list(g.items())

    def groups(self) -> set[str]:
        return set(self.offsets) | set(self.group_metadata)

    def __len__(self) -> int:
        return sum(len(g) for g in self.offsets.values())

    def items(self) -> Iterator[tuple[tuple[str, str, int], Entry]]:
        for group, g in self.offsets.items():
            for (topic, partition), entry in g.items():
                yield (group, topic, partition), entry

    def as_dict(self) -> dict:
        """A plain copy, for comparisons in tests and verification."""
        out = {"offsets": dict(self.items()),
               "group_metadata": {g: v for g, v in self.group_metadata.items()}}
        if self.txn:
            out["transactions"] = self.txn.to_state()
        if self.topics:
            out["topics"] = dict(self.topics)
        if self.consumer_groups:
            out["consumer_groups"] = dict(self.consumer_groups)
        if self.scram_credentials:
            out["scram_credentials"] = dict(self.scram_credentials)
        if self.acls:
            out["acls"] = dict(self.acls)
        return out

