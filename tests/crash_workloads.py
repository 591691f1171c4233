"""Workloads the crash-test harness runs in its child process (tests/test_crash.py).

They use the API a service would: ``ctx.store`` to commit and ``ctx.ack`` once a commit is
durable.
"""

from __future__ import annotations

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
