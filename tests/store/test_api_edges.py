"""Edges of the public API as a service embedding the store meets them: re-entrant calls from
callbacks and done-callbacks, close() from odd places, misuse of handles."""

import contextlib
import threading
import time

import pytest

from offsetlog import OffsetAndMetadata as OAM
from offsetlog import OffsetStore
from offsetlog import TopicPartition as TP
from support import stores

WAIT_S = 10  # a bound on waits that only a broken engine reaches


def open_store(path, **kw):
    kw.setdefault("partitions", 1)
    kw.setdefault("fsync", "never")
    return stores.open_store(path, **kw)


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


def test_a_close_racing_another_close_returns_once_the_directory_is_released(store_dir):
    """Two threads close one store (a signal handler and a ``with`` block, say). The second
    close() used to return at once while the first was still draining, so reopening the
    directory right after it failed with StoreLockedError."""
    store = open_store(store_dir, partitions=4)
    in_first_close = threading.Event()
    let_it_finish = threading.Event()
    real_drain = store._writer.drain

    def slow_drain():  # hold the first close() in the middle of its work
        in_first_close.set()
        let_it_finish.wait(WAIT_S)
        real_drain()

    store._writer.drain = slow_drain
    first = threading.Thread(target=store.close)
    first.start()
    assert in_first_close.wait(WAIT_S)
    second_done = threading.Event()
    second = threading.Thread(target=lambda: (store.close(), second_done.set()))
    second.start()
    assert not second_done.wait(0.2)  # still closing: the second close waits for it
    let_it_finish.set()
    second.join(WAIT_S)
    first.join(WAIT_S)
    assert second_done.is_set()
    OffsetStore.open(store_dir).close()  # released


def test_close_from_a_commit_callback_and_from_a_done_callback(store_dir):
    """close() from the store's own callback thread, and from a future's done-callback on the
    async writer thread, finishes the queued commits and releases the directory (those threads
    are ones close() waits for: they must not wait for close() in turn)."""
    for via in ("callback", "done-callback"):
        store = open_store(store_dir)
        outcome = []

        def close_now(*_):
            store.close()
            outcome.append(threading.current_thread().name)

        with store._writer.exclusive(store._parts[0]):  # so the async writer resolves them
            if via == "callback":
                store.commit_async("g", {TP("t", 0): 1}, callback=close_now)
            else:
                store.commit_async("g", {TP("t", 0): 1}).add_done_callback(close_now)
            later = [store.commit_async("g", {TP("t", i): i}) for i in range(1, 50)]
        deadline = time.monotonic() + WAIT_S
        while not outcome and time.monotonic() < deadline:
            time.sleep(0.01)
        assert outcome == ["offsetlog-callbacks" if via == "callback"
                           else "offsetlog-async-writer"]
        assert all(f.result(WAIT_S) is None for f in later)
        store.close()  # already closed: returns at once
        with open_store(store_dir) as reopened:
            assert reopened.committed("g", TP("t", 49)) == OAM(49)


@pytest.mark.parametrize("field", ["client_id", "client_host", "group_instance_id",
                                   "protocol"])
def test_a_join_with_unencodable_text_is_refused_before_it_changes_the_group(
        store_dir, clock, field):
    """A lone surrogate is a valid Python str but not UTF-8. A JoinGroup carrying one in a
    field the group metadata stores used to be taken in by the coordinator; the record could
    not be encoded, so the member lived in memory only and every later write of the group's
    metadata failed: the group never completed a rebalance again."""
    from offsetlog.group import GroupConfig
    bad = "\ud800"
    kwargs = {"client_id": "c", "protocols": [("range", b"")]}
    if field == "protocol":
        kwargs["protocols"] = [(bad, b"")]
    else:
        kwargs[field] = bad
    with open_store(store_dir, clock=clock,
                    group_config=GroupConfig(initial_rebalance_delay_ms=0)) as store:
        with pytest.raises(ValueError):
            store.join_group("g", **kwargs).result(WAIT_S)
        assert store.describe_group("g") is None
        fut = store.join_group("g", client_id="ok", protocols=[("range", b"")])
        store.poll_groups()
        response = fut.result(WAIT_S)
        assert response.error is None and len(response.members) == 1
        with pytest.raises(Exception) as err:
            store.commit_sync(bad, {TP("t", 0): 1})
        assert type(err.value).__name__ == "InvalidGroupIdError"


def test_a_timed_out_commit_stays_queued_and_is_applied_in_call_order(store_dir):
    """CommitTimeoutError says "not durable yet", not "dropped": the commit keeps its place,
    so a later commit to the same key still wins, and the writer goes on."""
    from offsetlog.errors import CommitTimeoutError
    with open_store(store_dir) as store:
        part = store._parts[0]
        release = threading.Event()
        held = threading.Event()

        def hold():
            with store._writer.exclusive(part):
                held.set()
                release.wait(WAIT_S)

        holder = threading.Thread(target=hold)
        holder.start()
        held.wait(WAIT_S)
        with pytest.raises(CommitTimeoutError):
            store.commit_sync("g", {TP("t", 0): 1, TP("t", 1): 1}, timeout=0.05)
        assert store.committed("g", TP("t", 0)) is None
        later = store.commit_async("g", {TP("t", 0): 2})
        release.set()
        holder.join(WAIT_S)
        assert later.result(WAIT_S) is None
        assert store.fetch("g") == {TP("t", 0): OAM(2), TP("t", 1): OAM(1)}
        store.commit_sync("g", {TP("t", 0): 3}, timeout=WAIT_S)
        assert store.committed("g", TP("t", 0)) == OAM(3)


@pytest.mark.parametrize("clock", [lambda: time.time() * 1000, lambda: None, lambda: -1])
def test_a_clock_that_does_not_return_int_ms_is_refused_at_open(store_dir, clock):
    """``clock`` must return epoch ms as an int. A float (``time.time() * 1000``, the easy
    mistake) used to be taken, and the first commit's leader failed to pack the batch header:
    commit_sync raised struct.error, and a commit_async killed the async writer thread and
    never resolved."""
    from offsetlog.errors import StoreConfigError
    with pytest.raises(StoreConfigError):
        OffsetStore.open(store_dir, clock=clock)
    with open_store(store_dir, clock=lambda: int(time.time() * 1000)) as store:
        assert store.commit_async("g", {TP("t", 0): 1}).result(WAIT_S) is None


def _on_writer_thread(store, parts, start, on_done):
    """Queue ``start()``'s commit while ``parts`` are held, so that the async writer thread
    resolves its future and runs ``on_done`` there; return what on_done returned (or raised)."""
    outcome = []

    def record(fut):
        try:
            outcome.append((threading.current_thread().name, on_done()))
        except Exception as e:  # noqa: BLE001 - reported below
            outcome.append((threading.current_thread().name, e))

    with contextlib.ExitStack() as held:
        for part in parts:
            held.enter_context(store._writer.exclusive(part))
        start().add_done_callback(record)
    deadline = time.monotonic() + 2 * WAIT_S
    while not outcome and time.monotonic() < deadline:
        time.sleep(0.01)
    assert outcome, "the done-callback never finished"
    return outcome[0]


def test_waiting_for_a_store_future_in_a_done_callback_on_the_writer_thread(store_dir):
    """A done-callback that waits for another commit's future (or a group request's) on the
    async writer thread waited for that very thread: until its timeout, or forever."""
    with open_store(store_dir, partitions=2) as store:
        def on_done():
            first = store.commit_async("g", {TP("t", 1): 5})
            second = store.commit_async("other", {TP("t", 1): 6})
            return first.result(WAIT_S), second.exception(WAIT_S)

        thread, result = _on_writer_thread(store, store._parts,
                                           lambda: store.commit_async("g", {TP("t", 0): 1}),
                                           on_done)
        assert thread == "offsetlog-async-writer"
        assert result == (None, None)
        assert store.committed("other", TP("t", 1)) == OAM(6)


def test_a_members_commit_sync_in_a_done_callback_of_its_commit_async(store_dir):
    """GroupMember.commit_sync waits on a store future; called from a done-callback of the
    member's own commit_async future (run by the store's writer thread) it used to wait out
    request_timeout_ms and raise CommitTimeoutError."""
    from offsetlog.group import GroupConfig
    from offsetlog.member import GroupMember
    with open_store(store_dir, partitions=2, group_config=GroupConfig(
            initial_rebalance_delay_ms=0)) as store:
        member = GroupMember(store, "svc", partitions_per_topic={"t": 2}, client_id="a",
                             request_timeout_ms=WAIT_S * 1000, heartbeat_thread=False)
        member.subscribe(["t"])
        deadline = time.monotonic() + WAIT_S
        while not member.poll(timeout_ms=20):
            assert time.monotonic() < deadline, "never got partitions"
        thread, result = _on_writer_thread(
            store, store._parts, lambda: member.commit_async({TP("t", 0): 8}),
            lambda: member.commit_sync({TP("t", 1): 9}, timeout_ms=WAIT_S * 1000))
        assert thread == "offsetlog-async-writer"
        assert result is None
        assert store.fetch("svc") == {TP("t", 0): OAM(8), TP("t", 1): OAM(9)}
        member.close()
