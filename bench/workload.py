"""The workloads both sides of every comparison run: names, keys, the bytes of one commit,
and a fast generator of large logs in the engine's on-disk layout.

Commits carry one offset each: the smallest commit, where fixed per-commit costs show most,
and the unit the baselines are defined in (one ``write`` + ``fsync``, one sqlite upsert).
"""

from __future__ import annotations

import json
import os
import random
import struct
import time
import zlib

import msgpack

from offsetlog.log import naming
from offsetlog.log.format import STORE_FORMAT_VERSION
from offsetlog.log.framing import encode_batch
from offsetlog.log.records import offset_commit
from offsetlog.partitioner import DEFAULT_PARTITIONS, partition_for

GROUP = "bench-group"
#: the latency case's group committing offsets with a leader epoch: another log partition than
#: GROUP's (9 of 50, against 44), so the engine's bytes per commit there count GROUP's alone
EPOCH_GROUP = "epoch-group"
#: the latency case's consumer group, whose one member commits (log partition 26 of 50)
MEMBER_GROUP = "member-group"
TOPIC = "bench-topic"
#: offsets start here so every one encodes in the same number of bytes (msgpack uint32)
FIRST_OFFSET = 1_000_000
#: topic partitions each committing thread owns ("its own partitions"); it commits them in turn
PARTITIONS_PER_THREAD = 4


def now_ms() -> int:
    return time.time_ns() // 1_000_000


def thread_group(thread: int, *, one_group: bool) -> str:
    """The group thread ``thread`` commits for: one shared group, or one group per thread."""
    return GROUP if one_group else f"{GROUP}-{thread}"


def thread_partitions(thread: int) -> list[int]:
    """The topic partitions thread ``thread`` owns, disjoint between threads."""
    return [thread * PARTITIONS_PER_THREAD + k for k in range(PARTITIONS_PER_THREAD)]


def many_group(thread: int) -> str:
    """The group of thread ``thread`` in the many-groups case (issue 16): ``group-k``."""
    return f"group-{thread}"


def apart_groups(n: int, partitions: int = DEFAULT_PARTITIONS) -> list[str]:
    """``n`` threads' groups, each in a log partition of its own: ``group-k`` in order of k,
    skipping a name whose log partition an earlier one holds. ``many_group``'s 32 names fill
    only 30 of the default 50 (two pairs share), which the own-file baselines never do."""
    if n > partitions:
        raise ValueError(f"{n} groups cannot have {partitions} log partitions each their own")
    groups: list[str] = []
    taken: set[int] = set()
    k = 0
    while len(groups) < n:
        at = partition_for(many_group(k), partitions)
        if at not in taken:
            taken.add(at)
            groups.append(many_group(k))
        k += 1
    return groups


def many_log_partition(thread: int, partitions: int = DEFAULT_PARTITIONS) -> int:
    """The log partition of thread ``thread``'s group in the many-groups case (``group-k``'s
    home): the own-file baselines give threads this file number to share files as the case's
    groups share log partitions."""
    return partition_for(many_group(thread), partitions)


def many_partition(thread: int) -> int:
    """The one topic partition thread ``thread`` commits in the many-groups case: ``k % 8``."""
    return thread % 8


def framed_commit(group: str = GROUP, topic: str = TOPIC, partition: int = 0,
                  offset: int = FIRST_OFFSET) -> bytes:
    """The bytes the engine appends for one single-offset commit (one framed batch)."""
    ts = now_ms()
    return encode_batch(0, (offset_commit(0, group, topic, partition, offset,
                                          commit_timestamp=ts),), timestamp=ts)


# -- large logs --------------------------------------------------------------------------------

def group_name(g: int) -> str:
    return f"consumer-group-{g:06d}"


def topic_name(t: int) -> str:
    return f"topic-{t:03d}"


def write_meta(root: str, partitions: int = DEFAULT_PARTITIONS) -> None:
    meta = {"format": "offsetlog", "version": STORE_FORMAT_VERSION, "partitions": partitions}
    with open(naming.meta_path(root), "w") as f:
        f.write(json.dumps(meta, indent=2) + "\n")


def generate_log(root: str, n_records: int, *, groups: int, topics: int,
                 partitions_per_topic: int, max_batch: int = 4,
                 log_partitions: int = DEFAULT_PARTITIONS,
                 segment_bytes: int = 100 * 1024 * 1024, seed: int = 0,
                 lean_path: str | None = None) -> dict:
    """Write a store directory holding ``n_records`` offset commits, without a store.

    Batches go straight into segment files in the engine's layout (``meta.json``,
    ``__consumer_offsets-N/<base offset>.log``, rolled at ``segment_bytes`` as the engine rolls),
    framed by the engine's own ``encode_batch``. The shape is a fleet of consumers: groups take
    turns; each commit (batch) carries 1..``max_batch`` offsets (uniform, seeded, mean
    (1+max_batch)/2) of the next consecutive partitions of its group's ``topics`` x
    ``partitions_per_topic`` keys, so every key is overwritten about ``n_records / keys`` times.

    :param lean_path: also write the same records, in the same order, to this file in the
        lean replay baseline's format (``LeanWriter``; read by ``baselines.lean_replay``)
    :return: counts: records, batches, keys (at most), bytes
    """
    os.makedirs(root, exist_ok=True)
    write_meta(root, log_partitions)
    names = [group_name(g) for g in range(groups)]
    homes = [partition_for(name, log_partitions) for name in names]
    topic_names = [topic_name(t) for t in range(topics)]
    keys_per_group = topics * partitions_per_topic
    cursor = [0] * groups
    next_offset = [0] * log_partitions
    files: dict[int, object] = {}
    seg_size = [0] * log_partitions
    ts0 = now_ms() - n_records // 1000  # about one commit per microsecond of history
    written = batches = total_bytes = 0
    i = 0
    randint = random.Random(seed).randint
    lean = None if lean_path is None else LeanWriter(lean_path)
    try:
        while written < n_records:
            g = i % groups
            k = min(randint(1, max_batch), n_records - written)
            group, home = names[g], homes[g]
            c = cursor[g]
            ts = ts0 + i // 1000
            offset = FIRST_OFFSET + i
            recs = []
            for d in range(k):
                key = (c + d) % keys_per_group
                recs.append(offset_commit(d, group, topic_names[key // partitions_per_topic],
                                          key % partitions_per_topic, offset,
                                          commit_timestamp=ts))
                if lean is not None:
                    lean.add((group, topic_names[key // partitions_per_topic],
                              key % partitions_per_topic), (offset, "", None, ts, None))
            cursor[g] = (c + k) % keys_per_group
            base = next_offset[home]
            data = encode_batch(base, recs, timestamp=ts)
            f = files.get(home)
            if f is None or (seg_size[home] and seg_size[home] + len(data) > segment_bytes):
                if f is not None:
                    _close_durably(f)
                directory = naming.partition_dir(root, home)
                os.makedirs(directory, exist_ok=True)
                f = files[home] = open(naming.segment_path(directory, base), "wb",
                                       buffering=1 << 20)
                seg_size[home] = 0
            f.write(data)
            seg_size[home] += len(data)
            next_offset[home] = base + k
            written += k
            batches += 1
            total_bytes += len(data)
            i += 1
    finally:
        for f in files.values():
            _close_durably(f)
        if lean is not None:
            lean.close()
    return {"records": written, "batches": batches,
            "keys": min(groups * keys_per_group, written), "bytes": total_bytes}


class LeanWriter:
    """The lean replay baseline's file (issue 16): msgpack arrays of up to ``chunk``
    ``(key, value)`` pairs, each framed as ``length u32 | crc32 u32 | payload`` (little-endian)."""

    HEADER = struct.Struct("<II")

    def __init__(self, path: str, chunk: int = 1000) -> None:
        self.f = open(path, "wb", buffering=1 << 20)
        self.chunk = chunk
        self.pairs: list = []
        self.pack = msgpack.Packer(use_bin_type=True).pack

    def add(self, key: tuple, value: tuple) -> None:
        self.pairs.append((key, value))
        if len(self.pairs) >= self.chunk:
            self._flush()

    def _flush(self) -> None:
        if self.pairs:
            payload = self.pack(self.pairs)
            self.f.write(self.HEADER.pack(len(payload), zlib.crc32(payload)) + payload)
            self.pairs = []

    def close(self) -> None:
        self._flush()
        _close_durably(self.f)


def _close_durably(f) -> None:
    """Flush and fsync before closing, so that no measured side later pays for writing back
    the generator's dirty pages (recovery fsyncs each active segment when it opens it)."""
    f.flush()
    os.fsync(f.fileno())
    f.close()


def memory_keys(groups: int, topics: int, partitions: int):
    """Every key of the memory case, group by group: (group, topic, partition)."""
    topic_names = [topic_name(t) for t in range(topics)]
    for g in range(groups):
        group = group_name(g)
        for topic in topic_names:
            for p in range(partitions):
                yield group, topic, p
