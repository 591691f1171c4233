"""Workloads the crash-test harness runs in its child process (tests/test_crash.py).

They use the API a service would: ``ctx.store`` to commit and ``ctx.ack`` once a commit is
durable.
"""

from __future__ import annotations

import threading

from offsetlog import OffsetAndMetadata, TopicPartition


def consumer_loop(ctx) -> None:
    """A service's consumer: polls a batch of records per partition it owns, then commits the
    next offsets of all of them in one call (async every other batch, like auto-commit)."""
    owned = [TopicPartition("orders", ctx.thread * 3 + i) for i in range(3)]
    group = f"billing-{ctx.thread % 2}"
    position = {tp: ctx.offset_base for tp in owned}
    batch = 0
    while True:
        for tp in owned:
            position[tp] += ctx.rng.randint(1, 50)  # "processed" that many records
        offsets = {tp: OffsetAndMetadata(o, f"batch-{batch}") for tp, o in position.items()}
        if batch % 2:
            ctx.store.commit_async(
                group, offsets,
                callback=lambda arg, exc, offsets=offsets: exc is None and ctx.ack(group, offsets))
        else:
            ctx.store.commit_sync(group, offsets)
            ctx.ack(group, offsets)
        batch += 1


def acks_what_it_never_commits(ctx) -> None:
    """A broken service: acknowledges an offset it never committed. The harness must say so."""
    tp = TopicPartition("ghost", ctx.thread)
    ctx.store.commit_sync("liar", {tp: ctx.offset_base})
    ctx.ack("liar", {tp: ctx.offset_base + 1_000})


def async_bursts_acked_by_futures(ctx) -> None:
    """Bursts of ``commit_async`` calls between ``commit_sync`` ones, each acknowledged when
    its *future* resolved without error (back-to-back calls share one future), half of them
    through ``add_done_callback`` and half by waiting on ``result()``; every call writes a new,
    growing offset to one of a few keys, so a future that resolved before its round was
    durable shows up as a lost acknowledged commit."""
    group = f"futures-{ctx.thread % 2}"
    keys = [TopicPartition(f"f{ctx.thread}", p) for p in range(4)]
    offset = ctx.offset_base
    while True:
        waiting = []
        for _ in range(ctx.rng.randint(1, 60)):
            offsets = {ctx.rng.choice(keys): offset}
            offset += 1
            fut = ctx.store.commit_async(group, offsets)
            if ctx.rng.random() < 0.5:
                fut.add_done_callback(
                    lambda f, offsets=offsets: f.exception() is None and ctx.ack(group, offsets))
            else:
                waiting.append((fut, offsets))
        for fut, offsets in waiting:
            fut.result()
            ctx.ack(group, offsets)
        offsets = {ctx.rng.choice(keys): offset}
        offset += 1
        ctx.store.commit_sync(group, offsets)
        ctx.ack(group, offsets)


def committer_through_the_write_ahead_file(ctx) -> None:
    """The built-in committer, after checking that this child's usual commits become durable
    in the store's WRITE-AHEAD file (every one of them: none is left to write alone; a
    second commit of a group leaves an entry there): a
    crash test with this workload then tests that path, the power cut taking those bytes
    from the segments (a store without the file raises, which the harness reports)."""
    from offsetlog.log import write_ahead
    from offsetlog.recovery.crashtest.child import committer

    if ctx.store._write_ahead is None:
        raise RuntimeError("the store has no write-ahead file open")
    # (every usual write through the file: a few threads would otherwise mostly write alone)
    ctx.store._write_ahead.alone_limit = 0
    group = f"ahead-{ctx.thread}"
    tp = TopicPartition(f"a{ctx.thread}", 0)
    # (a segment's first write, and a roll's, are synced there: with small segments several
    # commits in a row can be such writes, so look for an entry over a few of them)
    for k in range(40):
        offsets = {tp: ctx.offset_base + k}
        ctx.store.commit_sync(group, offsets)
        ctx.ack(group, offsets)
        if k and write_ahead.read(ctx.store.path)[1]:
            break
    else:
        raise RuntimeError("40 usual commits left no entry in the write-ahead file")
    committer(ctx)


def committer_on_the_combined_write(ctx) -> None:
    """The built-in committer, after checking that this child writes its rounds with the
    combined write + sync (``segment._write_dsync``, one ``pwritev(RWF_DSYNC)``) and that the
    harness's sync log sees it: a crash test with this workload then tests that path (a
    child on ``write`` + ``fdatasync`` raises, which the harness reports). Run it with the
    store's ``write_ahead=False``: with the file, the usual write is not this one."""
    from offsetlog.recovery.crashtest.child import committer

    with _combined_lock:
        if not _combined_calls:
            _count_combined_writes()
    group = f"combined-{ctx.thread}"
    offsets = {TopicPartition(f"c{ctx.thread}", 0): ctx.offset_base}
    ctx.store.commit_sync(group, offsets)
    ctx.ack(group, offsets)
    if _combined_calls[0] == 0:
        raise RuntimeError("a durable commit returned without a combined write")
    committer(ctx)


_combined_lock = threading.Lock()
_combined_calls: list[int] = []


def _count_combined_writes() -> None:
    from offsetlog.log import segment
    logged = segment._write_dsync
    if logged is None or logged.__name__ != "logged_write_dsync":
        raise RuntimeError(f"the sync log does not wrap the combined write: {logged!r}")
    _combined_calls.append(0)

    def counted(fd, data, offset):
        _combined_calls[0] += 1
        return logged(fd, data, offset)

    segment._write_dsync = counted





def rounds_of_several_batches(ctx) -> None:
    """Plain ``commit_sync`` calls on even threads, transactions on odd ones, all in one log
    partition (run it with one): a group-commit round that holds both is several batches
    (the plain calls', a transaction's offsets, its markers) written by one write, so a power
    cut that persists that write out of order can leave a hole followed by valid batches that
    were never acknowledged."""
    tp = TopicPartition(f"mixed-{ctx.thread}", 0)
    offset = ctx.offset_base
    txn = ctx.store.init_transactions(f"mixed-{ctx.thread}") if ctx.thread % 2 else None
    while True:
        offsets = {tp: OffsetAndMetadata(offset, f"call {offset}")}
        if txn is None:
            ctx.store.commit_sync("mixed", offsets)
        else:
            txn.begin()
            txn.commit_offsets("mixed", offsets)
            txn.commit()
        ctx.ack("mixed", offsets)
        offset += 1


#: where ``transactions_killed_once_decided`` counts its kills (next to the store)
DECIDED_KILLS = "decided-kills"


def transactions_killed_once_decided(ctx) -> None:
    """Transactions of a transactional id whose log partition is not their group's (run it
    with three): about one in four kills the child between its decision (PrepareCommit or
    PrepareAbort) and its markers, so the next open finishes it, writing markers in the
    group's partition, and the read-only scan of the crashed store must foresee them. A kill
    is counted in ``DECIDED_KILLS`` beside the store before it happens."""
    import os
    import signal

    from offsetlog.partitioner import partition_for

    txn_id = f"spread-{ctx.thread}"
    group = next(g for g in (f"spread-group-{i}" for i in range(100))
                 if partition_for(g, 3) != partition_for(txn_id, 3))
    tp = TopicPartition(f"spread-{ctx.thread}", 0)
    txn = ctx.store.init_transactions(txn_id)
    kills = os.path.join(os.path.dirname(ctx.store.path), DECIDED_KILLS)

    def hook(step: str, _meta) -> None:
        if step == "decided" and ctx.rng.random() < 0.25:
            fd = os.open(kills, os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o644)
            os.write(fd, b"kill\n")
            os.close(fd)
            os.kill(os.getpid(), signal.SIGKILL)

    ctx.store._transactions.fault_hook = hook
    offset = ctx.offset_base
    while True:
        offsets = {tp: OffsetAndMetadata(offset, f"txn {offset}")}
        txn.begin()
        txn.commit_offsets(group, offsets)
        if ctx.rng.random() < 0.2:
            txn.abort()
        else:
            txn.commit()
            ctx.ack(group, offsets)
        offset += 1


#: where ``followers_ending_first`` notes, once per child, that a follower's write ended
#: before the write it followed (next to the store)
FOLLOWERS_FIRST = "followers-first"


def followers_ending_first(ctx) -> None:
    """Plain ``commit_sync`` calls of a group per thread, all in one log partition (run it
    with two threads, ``fsync="always"`` and no sync delay): a call that finds the other
    thread's lone commit writing follows it, its write beside the first. A combined write
    that starts alone first waits 2-4 ms, one that starts beside another (a follower's) at
    most 0.5 ms, so a follower's write mostly ends, and is logged durable, before the one it
    follows: a kill then leaves durable bytes past unsynced ones, which a power cut must keep
    while it may lose those before them (a hole, then the follower's batch, never
    acknowledged). The first such write of each child is noted in ``FOLLOWERS_FIRST``. Run it
    with the store's ``write_ahead=False``: with the file, a follower's batch and the one it
    follows are made durable by the file's rounds instead."""
    with _first_lock:
        if not _first_installed:
            _install_random_waits(ctx)
            _first_installed.append(True)
    group = f"follow-{ctx.thread}"
    tp = TopicPartition(f"follow-{ctx.thread}", 0)
    offset = ctx.offset_base
    while True:
        offsets = {tp: offset}
        ctx.store.commit_sync(group, offsets)
        ctx.ack(group, offsets)
        offset += 1


_first_lock = threading.Lock()
_first_installed: list[bool] = []


def _install_random_waits(ctx) -> None:
    import os
    import random
    import time

    from offsetlog.log import segment

    logged = segment._write_dsync
    if logged is None or logged.__name__ != "logged_write_dsync":
        raise RuntimeError(f"the sync log does not wrap the combined write: {logged!r}")
    note = os.path.join(os.path.dirname(ctx.store.path), FOLLOWERS_FIRST)
    lock = threading.Lock()
    started = [0]  # writes begun, in order
    in_flight: set[int] = set()  # their numbers, while they write
    noted = []

    def waited(fd, data, offset):
        with lock:
            started[0] += 1
            mine = started[0]
            beside = bool(in_flight)
            in_flight.add(mine)
        try:
            time.sleep(random.uniform(0.0, 0.0005) if beside else random.uniform(0.002, 0.004))
            return logged(fd, data, offset)
        finally:
            with lock:
                in_flight.discard(mine)
                first = any(n < mine for n in in_flight) and not noted
                if first:
                    noted.append(True)
            if first:  # (an earlier write still in flight: ours ended first)
                fd_note = os.open(note, os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o644)
                os.write(fd_note, b"first\n")
                os.close(fd_note)

    segment._write_dsync = waited
