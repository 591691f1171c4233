"""One side of the memory case, in a fresh interpreter (``python -m offsetlog.bench.memory_child``).

    python -m offsetlog.bench.memory_child dict|table GROUPS TOPICS PARTITIONS

Both sides consume the same stream: every key (GROUPS x TOPICS x PARTITIONS) gets one offset
commit, framed with ``encode_batch`` (4 records a batch) and read back with ``BatchReader`` and
``Batch.records()``, exactly as recovery decodes it, so group and topic strings arrive as fresh
objects per record, as they do when a log is replayed. The stream is produced and consumed one
group at a time, so what it allocates is transient and the same on both sides.

* ``dict``: the baseline, ``{(group, topic, partition): (offset, metadata, leader_epoch,
  commit_ts, expire_ts)}`` with group and topic strings interned (shared);
* ``table``: an ``OffsetTable`` fed through ``apply_batch``, the engine's one state path.

Prints one JSON line: side, keys, rss_before, rss_after, rss_delta (bytes).
"""

from __future__ import annotations

import gc
import json
import sys

from offsetlog.bench.common import rss_bytes
from offsetlog.bench.workload import FIRST_OFFSET, memory_keys
from offsetlog.log.framing import BatchReader, encode_batch
from offsetlog.log.records import commit_entry, commit_key, offset_commit

BATCH = 4
TS = 1_700_000_000_000


def group_chunks(groups: int, topics: int, partitions: int):
    """Per group, the decoded batches of that group's commits: [(base_offset, records)]."""
    per_group = topics * partitions
    keys = memory_keys(groups, topics, partitions)
    n = 0
    for _ in range(groups):
        frames = []
        batch = []
        for _ in range(per_group):
            group, topic, p = next(keys)
            batch.append(offset_commit(len(batch), group, topic, p, FIRST_OFFSET + n,
                                       commit_timestamp=TS + n))
            n += 1
            if len(batch) == BATCH:
                frames.append(encode_batch(n - BATCH, batch, timestamp=TS))
                batch = []
        if batch:
            frames.append(encode_batch(n - len(batch), batch, timestamp=TS))
        data = b"".join(frames)
        del frames, batch
        yield [(b.base_offset, b.records()) for b in BatchReader(data)]


def build_dict(chunks) -> dict:
    intern = sys.intern
    table: dict = {}
    for decoded in chunks:
        for _, records in decoded:
            for _, _, version, key, value in records:
                group, topic, partition = commit_key(version, key)
                table[(intern(group), intern(topic), partition)] = commit_entry(version, value)
    return table


def build_table(chunks):
    from offsetlog.table import OffsetTable

    table = OffsetTable()
    apply = table.apply_batch
    for decoded in chunks:
        for base, records in decoded:
            apply(base, records)
    return table


def main(argv: list[str]) -> int:
    side = argv[0]
    groups, topics, partitions = (int(a) for a in argv[1:4])
    build = {"dict": build_dict, "table": build_table}[side]
    # Warm up: import, allocate and free one group's stream before the first reading.
    for _ in group_chunks(1, topics, partitions):
        pass
    build([])
    gc.collect()
    before = rss_bytes()
    table = build(group_chunks(groups, topics, partitions))
    gc.collect()
    after = rss_bytes()
    keys = len(table)
    expected = groups * topics * partitions
    if keys != expected:
        raise SystemExit(f"{side}: {keys} keys, expected {expected}")
    print(json.dumps({"side": side, "keys": keys, "rss_before": before, "rss_after": after,
                      "rss_delta": after - before}))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
