import pytest

from offsetlog.errors import UnsupportedVersionError
from offsetlog.log import records as rec
from offsetlog.log.framing import BatchReader, encode_batch
from offsetlog.table import OffsetTable


def commit(delta, group, topic, partition, offset, ts=1000, **kw):
    return rec.offset_commit(delta, group, topic, partition, offset, commit_timestamp=ts, **kw)


def test_apply_sets_and_overwrites_and_tombstone_removes():
    t = OffsetTable()
    t.apply_batch(0, (commit(0, "g", "t", 0, 5), commit(1, "g", "t", 1, 6)))
    t.apply_batch(2, (commit(0, "g", "t", 0, 9, metadata="m", leader_epoch=4),))
    assert t.get("g", "t", 0) == (9, "m", 4, 1000, None)
    assert t.get("g", "t", 1) == (6, "", None, 1000, None)
    t.apply_batch(3, (rec.offset_tombstone(0, "g", "t", 0),))
    assert t.get("g", "t", 0) is None
    t.apply_batch(4, (rec.offset_tombstone(0, "g", "t", 1),))
    assert "g" not in t.offsets  # the last tombstone removes the group
    assert t.next_offset == 5 and t.records_applied == 5


def test_tombstone_for_unknown_key_is_harmless():
    t = OffsetTable()
    t.apply_batch(0, (rec.offset_tombstone(0, "g", "t", 0),))
    assert t.as_dict() == {"offsets": {}, "group_metadata": {}}


def test_next_offset_follows_last_delta_not_count():
    # A compacted batch keeps its original offsets: deltas may have gaps.
    t = OffsetTable()
    t.apply_batch(10, (commit(0, "g", "t", 0, 1), commit(7, "g", "t", 1, 2)))
    assert t.next_offset == 18


def test_apply_single_record():
    t = OffsetTable()
    t.apply(41, commit(0, "g", "t", 3, 8))
    assert t.get("g", "t", 3)[0] == 8 and t.next_offset == 42


def test_live_records_and_decoded_records_give_the_same_table():
    live, replayed = OffsetTable(), OffsetTable()
    batches = [(0, (commit(0, "g", "t", 0, 1), commit(1, "h", "u", 2, 3, metadata="x"))),
               (2, (rec.offset_tombstone(0, "h", "u", 2), commit(1, "g", "t", 0, 4,
                                                                  leader_epoch=1))),
               (4, (rec.group_metadata(0, "g", {"generation": 3, "members": []}),))]
    data = b"".join(encode_batch(b, r, timestamp=1) for b, r in batches)
    for base, records in batches:
        live.apply_batch(base, records)
    for batch in BatchReader(data):
        replayed.apply_batch(batch.base_offset, batch.records())
    assert live.as_dict() == replayed.as_dict()
    assert live.group_metadata["g"]["generation"] == 3


def test_group_metadata_tombstone_removes_it():
    t = OffsetTable()
    t.apply_batch(0, (rec.group_metadata(0, "g", {"generation": 1}),))
    t.apply_batch(1, (rec.group_metadata(0, "g", None),))
    assert t.groups() == set()


def test_unknown_record_type_fails_loudly():
    t = OffsetTable()
    with pytest.raises(UnsupportedVersionError, match="unknown record type 99"):
        t.apply_batch(0, ((0, 99, 0, {}, None),))


def test_newer_record_version_fails_loudly():
    t = OffsetTable()
    with pytest.raises(UnsupportedVersionError, match="version 2 is newer"):
        t.apply_batch(0, ((0, rec.OFFSET_COMMIT, 2, ["g", "t", 0], [1, 1]),))


def test_transactional_batches_hold_offsets_pending_until_their_marker():
    t = OffsetTable()
    t.apply_batch(0, (commit(0, "g", "t", 0, 1),), attributes=1, producer_id=4,
                  producer_epoch=0)
    assert t.get("g", "t", 0) is None and t.txn.pending_partitions("g") == {("t", 0)}
    t.apply_batch(1, (rec.transaction_marker(0, 4, 0, rec.COMMIT),), attributes=3,
                  producer_id=4, producer_epoch=0)
    assert t.get("g", "t", 0)[0] == 1 and not t.txn.keys


def test_control_batch_with_a_data_record_is_refused():
    t = OffsetTable()
    with pytest.raises(UnsupportedVersionError, match="not a transaction marker"):
        t.apply_batch(0, (commit(0, "g", "t", 0, 1),), attributes=3, producer_id=1,
                      producer_epoch=0)


def test_topics_are_interned():
    t = OffsetTable()
    a = "".join(["top", "ic"])
    b = "".join(["to", "pic"])
    assert a is not b
    t.apply_batch(0, (commit(0, "g1", a, 0, 1), commit(1, "g2", b, 0, 1)))
    (k1,), (k2,) = t.offsets["g1"].keys(), t.offsets["g2"].keys()
    assert k1[0] is k2[0]
