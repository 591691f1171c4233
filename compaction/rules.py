"""The cleaner's rules, in one place: what a cleaning of one log partition keeps and drops.

Kafka's LogCleaner rules, applied by the local cleaner (``cleaner``, to batches on disk) and
counted by the Spark report (``offsetlog.spark.cleaning``, from the data source's rows); the
two differ only in how they read records:

* only closed segments are cleaned, and nothing at or after the first offset of a transaction
  still undecided in them (Kafka's last stable offset bounds cleaning the same way);
* records have a compaction key (``record_key``): OFFSET_COMMIT by (group, topic,
  partition), GROUP_METADATA by group, TRANSACTION_STATE by transactional id, TOPIC by
  topic name, the CONSUMER_GROUP_* records by type, group and (for the member records) member,
  USER_SCRAM_CREDENTIAL by user and mechanism, ACL records by their seven binding fields (the
  Spark report reads the key off a row's ``key_msgpack`` column). Markers and unknown types
  have none and are never dropped as superseded;
* a keyed record survives if it is the latest of its key in the range, by log offset, among
  records of plain batches and of committed transactions (``LatestScan``, pass 1); records of
  aborted transactions are all dropped;
* a surviving tombstone of a plain batch survives its first cleaning, which stamps its batch
  with a delete horizon (KIP-534), and is dropped by a cleaning at or after the horizon; a
  marker is treated the same way once no record of its transaction survives; neither is ever
  dropped at or above ``keep_from``, the lowest offset a snapshot of the partition holds
  (``horizon_passed``).

A transaction is a producer id's transactional batches up to its next control batch: in one
log partition the store finishes a transaction, markers included, before that producer writes
again.
"""

from __future__ import annotations

from collections.abc import Iterable

from offsetlog.log.format import Attribute
from offsetlog.log.records import (
    ACL,
    COMMIT,
    CONSUMER_GROUP_TYPES,
    GROUP_METADATA,
    OFFSET_COMMIT,
    TOPIC,
    TRANSACTION_MARKER,
    TRANSACTION_STATE,
    USER_SCRAM_CREDENTIAL,
    acl_key,
    commit_key,
)

Key = tuple


def record_key(record) -> Key | None:
    """The key a decoded record (``offsetlog.log.records``) competes for, or None for records
    never dropped as superseded (the list in the module doc)."""
    rtype, key = record[1], record[3]
    if rtype == OFFSET_COMMIT:
        return (OFFSET_COMMIT, *commit_key(record[2], key))
    if rtype == GROUP_METADATA:
        return (GROUP_METADATA, key["group"])
    if rtype == TRANSACTION_STATE:
        return (TRANSACTION_STATE, key["transactional_id"])
    if rtype == TOPIC:
        return (TOPIC, key["topic"])
    if rtype in CONSUMER_GROUP_TYPES:
        return (rtype, key["group"], key.get("member"))
    if rtype == USER_SCRAM_CREDENTIAL:
        return (USER_SCRAM_CREDENTIAL, key["user"], key["mechanism"])
    if rtype == ACL:
        return (ACL, *acl_key(key))
    return None


def is_commit_marker(record) -> bool:
    """A decoded record that decides its transaction as committed."""
    return record[1] == TRANSACTION_MARKER and record[4]["result"] == COMMIT


def horizon_passed(attributes: int, timestamp: int, offset: int, now_ms: int,
                   keep_from: int | None) -> bool:
    """May a cleaning at ``now_ms`` drop the tombstone or marker at log ``offset`` of a batch
    with these ``attributes`` and ``timestamp``? Only once a first cleaning stamped the batch
    with a delete horizon, the horizon has come, and no snapshot still needs it."""
    return (bool(attributes & Attribute.DELETE_HORIZON) and now_ms >= timestamp
            and (keep_from is None or offset < keep_from))


class Transaction:
    """One transaction seen in the range: its writes, and its outcome once a marker says."""

    __slots__ = ("first", "records", "writes", "committed")

    def __init__(self, first: int) -> None:
        self.first = first  # log offset of its first batch
        self.records = 0  # records in its transactional (not control) batches
        self.writes: list[tuple[Key, int]] = []  # (key, log offset) of its keyed records
        self.committed: bool | None = None  # None: undecided


class LatestScan:
    """Pass 1 of a cleaning: feed the range's batches in log order; then ``latest`` holds the
    log offset of every key's surviving record, and ``first_unstable`` the first offset of a
    transaction still undecided (None if none is)."""

    def __init__(self) -> None:
        self.latest: dict[Key, int] = {}
        self.txn_of: dict[int, Transaction] = {}  # base offset of a txn or control batch -> it
        self.decided: list[Transaction] = []
        self._open: dict[int, Transaction] = {}  # producer id -> its undecided transaction

    def plain(self, writes: Iterable[tuple[Key, int]]) -> None:
        """A plain batch's keyed records, as (key, log offset): each is now its key's latest."""
        latest = self.latest
        for key, offset in writes:
            latest[key] = offset

    def transactional(self, producer_id: int, base_offset: int,
                      writes: Iterable[tuple[Key, int]], records: int) -> Transaction:
        """A transactional batch of ``records`` records, keyed ones as (key, log offset)."""
        txn = self._txn(producer_id, base_offset)
        txn.records += records
        txn.writes += writes
        return txn

    def control(self, producer_id: int, base_offset: int, committed: bool
                ) -> tuple[Transaction, list[Key]]:
        """A control batch deciding ``producer_id``'s transaction; returns it and the keys its
        committed writes now hold the latest record of."""
        txn = self._txn(producer_id, base_offset)
        del self._open[producer_id]
        self.decided.append(txn)
        txn.committed = committed
        won = []
        if committed:
            latest = self.latest
            for key, offset in txn.writes:
                if latest.get(key, -1) < offset:  # a later plain record of the key wins
                    latest[key] = offset
                    won.append(key)
        return txn, won

    def _txn(self, producer_id: int, base_offset: int) -> Transaction:
        txn = self._open.get(producer_id)
        if txn is None:
            txn = self._open[producer_id] = Transaction(base_offset)
        self.txn_of[base_offset] = txn
        return txn

    @property
    def first_unstable(self) -> int | None:
        return min((t.first for t in self._open.values()), default=None)

    def survivors(self, txn: Transaction) -> int:
        """How many of ``txn``'s records survive: none unless it committed."""
        if not txn.committed:
            return 0
        latest = self.latest
        return sum(1 for key, offset in txn.writes if latest.get(key) == offset)

    def survives(self, txn: Transaction | None, key: Key | None, offset: int) -> bool:
        """Does the record at ``offset`` (of ``txn``, None for a plain batch) survive pass 2,
        leaving tombstone horizons aside?"""
        if txn is not None and not txn.committed:
            return False
        return key is None or self.latest.get(key) == offset


__all__ = ["Key", "LatestScan", "Transaction", "horizon_passed", "is_commit_marker",
           "record_key"]
