"""The table's native apply of a live round's records (``_native.apply_records``, which
``OffsetTable.apply_batches`` calls first) against a plain model built with
``records.commit_entry``: plain values, values with metadata, an epoch or an expiry, and
tombstones, in any order."""

from __future__ import annotations

from hypothesis import given, settings
from hypothesis import strategies as st

from offsetlog.log.records import (
    OFFSET_COMMIT_VERSION,
    commit_entry,
    offset_commit,
    offset_tombstone,
)
from offsetlog.table import OffsetTable

keys = st.tuples(st.sampled_from(["g", "h\u00e9"]), st.sampled_from(["t", "orders"]),
                 st.integers(0, 3))
commits = st.builds(
    lambda key, offset, metadata, epoch, expire: ("commit", key, offset, metadata, epoch, expire),
    keys, st.integers(0, 2**40), st.text(max_size=4), st.one_of(st.none(), st.integers(0, 9)),
    st.one_of(st.none(), st.integers(0, 2**41)))
tombstones = st.builds(lambda key: ("tombstone", key), keys)


@settings(max_examples=300, deadline=None)
@given(st.lists(st.one_of(commits, tombstones), min_size=1, max_size=20),
       st.integers(0, 2**30))
def test_a_rounds_records_leave_the_table_the_model_leaves(ops, base):
    records, model = [], {}
    for delta, op in enumerate(ops):
        if op[0] == "tombstone":
            group, topic, partition = op[1]
            records.append(offset_tombstone(delta, group, topic, partition))
            model.get(group, {}).pop((topic, partition), None)
            if group in model and not model[group]:
                del model[group]
            continue
        _, (group, topic, partition), offset, metadata, epoch, expire = op
        record = offset_commit(delta, group, topic, partition, offset, metadata=metadata,
                               leader_epoch=epoch, commit_timestamp=7,
                               expire_timestamp=expire)
        records.append(record)
        model.setdefault(group, {})[(topic, partition)] = commit_entry(OFFSET_COMMIT_VERSION,
                                                                       record[4])
    table = OffsetTable()
    table.apply_batches(((base, records, 0, -1, -1),))
    assert table.offsets == model
    assert (table.next_offset, table.records_applied) == (base + len(ops), len(ops))
