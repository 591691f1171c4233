"""Found by the MANIFEST (issue 17): when an undecided transaction cut the cleaned range
short, the last swap still claimed every segment up to the active one ([base, active_base)),
although only the segments before the cut were its sources. A crash after the swap's commit
point then let recovery delete the uncleaned segments after the cut, the undecided
transaction's records with them."""

from __future__ import annotations

import shutil

import pytest

from offsetlog import OffsetAndMetadata as OAM
from offsetlog import TopicPartition as TP
from support.durability_helpers import store_state
from support.stores import open_log_store


class Crash(Exception):
    pass


def test_a_swap_cut_short_by_an_open_transaction_never_claims_the_segments_after_it(tmp_path):
    path = tmp_path / "s"
    store = open_log_store(path, partitions=1, segment_bytes=1024,
                           transaction_check_interval_ms=0)
    segments = lambda: len(store._parts[0].log.segments)  # noqa: E731
    i = 0
    while segments() < 3:  # closed segments full of superseded commits: worth cleaning
        store.commit_sync("g", {TP("a", 0): OAM(i, "x" * 60)})
        i += 1
    txn = store.init_transactions("tx")
    txn.begin()
    txn.commit_offsets("g", {TP("pending", 0): 7})  # undecided: cleaning stops before it
    while segments() < 6:
        store.commit_sync("g", {TP("b", i % 5): OAM(i, "y" * 60)})
        i += 1
    expected = store_state(store)

    swaps = []

    def crash(step):  # at the last swap's commit point: its range ends at the cut
        if step == "swap-renamed":
            swaps.append(step)
            if len(swaps) == 2:
                raise Crash(step)

    store._cleaning.fault_hook = crash
    with pytest.raises(Crash):
        store.compact()
    crashed = tmp_path / "crashed"
    shutil.copytree(path, crashed)  # the directory as a kill -9 at that step leaves it
    store._cleaning.fault_hook = None
    store.close()
    with open_log_store(crashed, transaction_check_interval_ms=0) as again:
        assert store_state(again) == expected
        [pending] = again._parts[0].table.txn.keys["g"]
        assert pending == ("pending", 0)
