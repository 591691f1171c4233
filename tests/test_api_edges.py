"""Edges of the public API as a service embedding the store meets them: re-entrant calls from
callbacks and done-callbacks, close() from odd places, misuse of handles."""

import threading
import time

import pytest

from offsetlog import OffsetAndMetadata as OAM, OffsetStore, TopicPartition as TP

WAIT_S = 10  # a bound on waits that only a broken engine reaches


def open_store(path, **kw):
    kw.setdefault("partitions", 1)
    kw.setdefault("fsync", "never")
    return OffsetStore.open(path, **kw)


def _hold_leadership_until_queued(store, part, queued: int, held: threading.Event):
    """Lead ``part`` (as the cleaner's swap does) until ``queued`` items wait behind us."""
    with store._writer.exclusive(part):
        held.set()
        deadline = time.monotonic() + WAIT_S
        while len(part.queue) < queued and time.monotonic() < deadline:
            time.sleep(0.005)


def test_commit_sync_from_a_done_callback_on_the_async_writer_thread(store_dir):
    """A future's done-callback runs on whichever thread resolved it, often the async writer
    thread. A ``commit_sync`` made there that finds another leader on its partition used to
    sleep until the async writer thread led its batch: that is, forever."""
    with open_store(store_dir) as store:
        part = store._parts[0]
        outcome = {}

        def on_done(fut):
            outcome["thread"] = threading.current_thread().name
            held = threading.Event()
            other = threading.Thread(target=_hold_leadership_until_queued,
                                     args=(store, part, 1, held))
            other.start()
            held.wait(WAIT_S)
            try:
                store.commit_sync("g", {TP("t", 1): 5}, timeout=WAIT_S)
                outcome["result"] = "committed"
            except Exception as e:  # noqa: BLE001 - reported below
                outcome["result"] = e
            other.join()

        with store._writer.exclusive(part):  # so the async writer thread resolves the future
            fut = store.commit_async("g", {TP("t", 0): 1})
            fut.add_done_callback(on_done)
        fut.result(WAIT_S)
        deadline = time.monotonic() + 2 * WAIT_S
        while "result" not in outcome and time.monotonic() < deadline:
            time.sleep(0.01)
        assert outcome["thread"] == "offsetlog-async-writer"
        assert outcome["result"] == "committed"
        assert store.committed("g", TP("t", 1)) == OAM(5)
        # and the writer thread still serves async commits
        assert store.commit_async("g", {TP("t", 2): 7}).result(WAIT_S) is None


class _Topic(str):
    pass


class _Number(int):
    pass


def test_str_and_int_subclasses_are_committed_as_plain_values(store_dir):
    """``TopicPartition(topic, partition)`` accepts any str and int; subclasses (an enum, a
    typed wrapper) must commit like the plain values. A str subclass topic used to reach
    ``sys.intern`` in the table after the batch was written: the leader raised, the async
    writer thread died and the commit, durable, was never acknowledged."""
    tp = TP(_Topic("orders"), _Number(3))
    with open_store(store_dir) as store:
        fut = store.commit_async("g", {tp: OAM(_Number(7), _Topic("m"), _Number(2))})
        assert fut.result(WAIT_S) is None
        store.commit_sync("g", {TP(_Topic("other"), 0): _Number(1)}, timeout=WAIT_S)
        txn = store.init_transactions("tx").begin()
        txn.commit_offsets("g", {TP(_Topic("txn"), _Number(0)): _Number(4)})
        txn.commit()
        live = store.fetch("g")
        assert live == {TP("orders", 3): OAM(7, "m", 2), TP("other", 0): OAM(1),
                        TP("txn", 0): OAM(4)}
        # what the live table holds is what replay builds: plain str and int
        for k, v in live.items():
            assert (type(k.topic), type(k.partition)) == (str, int)
            assert (type(v.offset), type(v.metadata), type(v.leader_epoch)) in {
                (int, str, int), (int, str, type(None))}
        store.delete_offsets("g", [TP(_Topic("other"), _Number(0))])
        assert store.committed("g", TP("other", 0)) is None
        assert store.commit_async("g", {TP("t", 0): 1}).result(WAIT_S) is None
    with open_store(store_dir) as store:
        assert store.fetch("g") == {TP("orders", 3): OAM(7, "m", 2), TP("txn", 0): OAM(4),
                                    TP("t", 0): OAM(1)}
