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
