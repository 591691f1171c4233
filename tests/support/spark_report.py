"""What a real cleaning drops, counted two ways: the oracles of the Spark report tests."""

import os
import shutil

from offsetlog.compaction.cleaner import clean_partition
from offsetlog.compaction.rules import record_key as cleaner_key
from offsetlog.log.format import Attribute
from offsetlog.log.naming import list_partition_dirs, snapshot_dir
from offsetlog.log.records import COMMIT
from offsetlog.recovery.snapshot import tombstone_floors
from offsetlog.recovery.swap import plan_swaps

MIN = 60_000


def dead_records(rows):
    """Records of one log partition that compaction reclaims eventually: those a later record
    of their key (the cleaner's own key function) replaces, among plain records and those of
    committed transactions, and every record of an aborted transaction. A transaction is a
    producer id's transactional batches up to its control batch."""
    committed, open_txn, txn_of = {}, {}, {}  # transaction: its first offset
    for _, batch, off, r in rows:
        if batch.attributes & Attribute.SEMANTIC:
            txn = txn_of[off] = open_txn.setdefault(batch.producer_id, batch.base_offset)
            if batch.attributes & Attribute.CONTROL:
                committed[txn] = r[4]["result"] == COMMIT
                del open_txn[batch.producer_id]
    competes = lambda off: off not in txn_of or committed.get(txn_of[off]) is True
    latest = {}
    for _, batch, off, r in rows:
        if (k := cleaner_key(r)) is not None and competes(off):
            latest[k] = max(latest.get(k, -1), off)
    dead = 0
    for _, batch, off, r in rows:
        if committed.get(txn_of.get(off)) is False:  # aborted: all but the marker
            dead += not batch.attributes & Attribute.CONTROL
        elif (k := cleaner_key(r)) is not None and competes(off):
            dead += off < latest[k]
    return dead


def cleaned_copy(path, now, tmp):
    """log partition -> (records a real cleaning of a copy of the store at ``now`` drops, its
    CleanResult), with the store's snapshot floors as the store passes them."""
    copy = os.path.join(tmp, "cleaned-copy")
    shutil.copytree(path, copy)
    floors = tombstone_floors(snapshot_dir(copy))
    out = {}
    for p, directory in list_partition_dirs(copy):
        r = clean_partition(directory, p, active_base=plan_swaps(directory).segments[-1][0],
                            now_ms=now, delete_retention_ms=MIN, segment_bytes=2**20,
                            keep_tombstones_from=floors.get(p))
        out[p] = (r.records_before - r.records_after, r)
    return out
