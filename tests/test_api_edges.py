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
