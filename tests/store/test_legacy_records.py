"""A store whose log was written before OFFSET_COMMIT version 1 (named fields) opens to the
same state, takes new commits (version 1) on top, and compacts the two together: a newer
record of a key supersedes an older one whatever their versions."""

from __future__ import annotations

import glob
import os

import msgpack

from offsetlog.log.framing import encode_batch, read_batches
from offsetlog.log.records import OFFSET_COMMIT, commit_entry, commit_key
from offsetlog.types import OffsetAndMetadata as OAM
from offsetlog.types import TopicPartition as TP
from support.durability_helpers import store_state
from support.records import batch_as_v0
from support.stores import open_log_store


def _segments(root: str) -> list[str]:
    return sorted(glob.glob(os.path.join(root, "*", "*.log")))


def _rewrite_as_v0(root: str) -> int:
    """Re-encode every batch of every segment with version 0 commit records (same offsets,
    attributes, producer and timestamp); the count of commit records rewritten."""
    count = 0
    for path in _segments(root):
        with open(path, "rb") as f:
            batches = list(read_batches(f, name=path))
        out = []
        for b in batches:
            records = b.records()
            count += sum(r[1] == OFFSET_COMMIT for r in records)
            out.append(encode_batch(b.base_offset, batch_as_v0(records), timestamp=b.timestamp,
                                    attributes=b.attributes, producer_id=b.producer_id,
                                    producer_epoch=b.producer_epoch))
        with open(path, "wb") as f:
            f.write(b"".join(out))
            f.flush()
            os.fsync(f.fileno())
    return count


def _versions(root: str) -> set[int]:
    out = set()
    for path in _segments(root):
        with open(path, "rb") as f:
            for b in read_batches(f, name=path):
                out |= {r[2] for r in msgpack.unpackb(b.payload) if r[1] == OFFSET_COMMIT}
    return out


def _records_of(root: str, key: tuple) -> list:
    out = []
    for path in _segments(root):
        with open(path, "rb") as f:
            for b in read_batches(f, name=path):
                out += [r for r in msgpack.unpackb(b.payload)
                        if r[1] == OFFSET_COMMIT and commit_key(r[2], r[3]) == key]
    return out


def test_a_log_of_version_0_records_opens_takes_commits_and_compacts(tmp_path):
    root = str(tmp_path / "store")
    with open_log_store(root, partitions=1) as s:
        s.commit_sync("g", {TP("t", 0): 1, TP("t", 1): OAM(2, "meta", 4)})
        s.commit_sync("h", {TP("u", 0): OAM(3, "", 7)})
        s.commit_sync("g", {TP("t", 2): 9})
        s.delete_offsets("g", [TP("t", 2)])  # a tombstone
        txn = s.init_transactions("tx")
        txn.begin()
        txn.commit_offsets("h", {TP("u", 1): 5})  # a transactional batch
        txn.commit()
        before = store_state(s)
    assert _versions(root) == {1}
    assert _rewrite_as_v0(root) >= 6
    assert _versions(root) == {0}

    with open_log_store(root, partitions=1) as s:
        assert store_state(s) == before
        s.commit_sync("g", {TP("t", 0): 10})  # supersedes a version 0 record of its key
        s.commit_sync("h", {TP("u", 0): OAM(30, "new")})
        expected = store_state(s)
    assert _versions(root) == {0, 1}
    assert expected["g"][TP("t", 0)] == OAM(10) and expected["h"][TP("u", 1)] == OAM(5)

    with open_log_store(root, partitions=1, segment_bytes=1024) as s:
        for i in range(40):  # close the segment holding both versions, so it can be cleaned
            s.commit_sync("pad", {TP("p", 0): i})
        expected = store_state(s)
        (result,) = s.compact()
        assert result.records_after < result.records_before  # superseded ones of both versions
        assert store_state(s) == expected
    # the version 0 record of g/t/0 was superseded by the version 1 one, which is kept
    assert [(r[2], commit_entry(r[2], r[4])[0]) for r in _records_of(root, ("g", "t", 0))] \
        == [(1, 10)]
    with open_log_store(root, partitions=1) as s:
        assert store_state(s) == expected
