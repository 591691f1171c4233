"""OFFSET_COMMIT version 1 (fields by position, written) and version 0 (named fields, still
read) say the same thing: each reader gets the same key and entry from either."""

from __future__ import annotations

import msgpack
import pytest
from hypothesis import given
from hypothesis import strategies as st

from offsetlog.compaction.rules import record_key
from offsetlog.errors import UnsupportedVersionError
from offsetlog.log.framing import encode_payload
from offsetlog.log.records import (
    OFFSET_COMMIT,
    OFFSET_COMMIT_VERSION,
    commit_entry,
    commit_key,
    describe,
    offset_commit,
    offset_tombstone,
    record_group,
)
from offsetlog.table import OffsetTable
from support.records import as_v0

texts = st.text(min_size=1, max_size=12)
commits = st.tuples(texts, texts, st.integers(0, 2**31 - 1), st.integers(0, 2**62),
                    st.text(max_size=20), st.none() | st.integers(0, 2**31 - 1),
                    st.integers(0, 2**62), st.none() | st.integers(0, 2**62))


def decoded(records):
    return msgpack.unpackb(encode_payload(records))


@given(commits)
def test_both_versions_read_the_same(c):
    group, topic, partition, offset, metadata, epoch, ts, expire = c
    v1 = offset_commit(0, group, topic, partition, offset, metadata=metadata,
                       leader_epoch=epoch, commit_timestamp=ts, expire_timestamp=expire)
    assert v1[2] == OFFSET_COMMIT_VERSION == 1
    for record in decoded([v1, as_v0(v1)]):
        _, _, version, key, value = record
        assert commit_key(version, key) == (group, topic, partition)
        assert commit_entry(version, value) == (offset, metadata, epoch, ts, expire)
        assert record_key(record) == (OFFSET_COMMIT, group, topic, partition)
        assert record_group(record) == group
        assert describe(record)["key"] == {"group": group, "topic": topic,
                                           "partition": partition}
    assert len(encode_payload([v1])) < len(encode_payload([as_v0(v1)]))
    # dumps show both alike, fields in the same order (only the version differs)
    views = [describe(r) for r in decoded([v1, as_v0(v1)])]
    assert [(list(v["key"].items()), list(v["value"].items())) for v in views] == [
        (list(views[0]["key"].items()), list(views[0]["value"].items()))] * 2


def test_trailing_defaults_are_left_out_and_later_fields_ignored():
    plain = offset_commit(0, "g", "t", 0, 5, commit_timestamp=9)
    assert plain[3:] == (["g", "t", 0], [5, 9])
    assert offset_commit(0, "g", "t", 0, 5, metadata="m", commit_timestamp=9)[4] == [5, 9, "m"]
    # an epoch without metadata writes the metadata default in front of it
    assert offset_commit(0, "g", "t", 0, 5, leader_epoch=3, commit_timestamp=9)[4] == [5, 9, "", 3]
    assert commit_entry(1, [5, 9, "m", 3, 11, "a later field"]) == (5, "m", 3, 9, 11)
    with pytest.raises(ValueError):
        commit_entry(1, [5])


@given(st.lists(st.tuples(st.sampled_from(["g", "h"]), st.sampled_from(["t", "u"]),
                          st.integers(0, 2), st.booleans(), st.booleans(),
                          st.integers(0, 100)), max_size=40))
def test_a_table_applies_either_version_as_the_same_change(ops):
    """A log mixing both versions (a store written before and after the upgrade) leaves
    the table a plain dict model of the commits and tombstones says."""
    table, model = OffsetTable(), {}
    for i, (group, topic, partition, tomb, old, offset) in enumerate(ops):
        if tomb:
            record = offset_tombstone(0, group, topic, partition)
            model.pop((group, topic, partition), None)
        else:
            record = offset_commit(0, group, topic, partition, offset, metadata=str(offset % 3),
                                   commit_timestamp=i)
            model[(group, topic, partition)] = (offset, str(offset % 3), None, i, None)
        (record,) = decoded([as_v0(record) if old else record])
        table.apply_batch(i, (record,))
    assert dict(table.items()) == model


def test_a_newer_version_and_a_malformed_record_are_refused():
    table = OffsetTable()
    with pytest.raises(UnsupportedVersionError):
        table.apply_batch(0, ((0, OFFSET_COMMIT, 2, ["g", "t", 0], [1, 1]),))
    with pytest.raises(ValueError):  # a key that is not 3 fields: corruption on replay
        table.apply_batch(0, ((0, OFFSET_COMMIT, 1, ["g", "t"], [1, 1]),))
    with pytest.raises(ValueError):
        table.apply_batch(0, ((0, OFFSET_COMMIT, 1, ["g", "t", 0], [1]),))
