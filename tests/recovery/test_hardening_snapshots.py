"""Issue 17, defect 7: a damaged snapshot database is discarded *with a word*: the recovery
report says what was discarded and why, and is not clean (the data still comes back right,
from the log)."""

from __future__ import annotations

import os

import pytest

from offsetlog import TopicPartition as TP
from offsetlog.log import naming
from support.durability_helpers import store_state
from support.stores import open_store


@pytest.mark.parametrize("damage", ["garbage", "empty"])
def test_a_damaged_snapshot_database_is_reported_and_the_report_is_not_clean(tmp_path, damage):
    store = open_store(tmp_path, partitions=2)
    for i in range(30):
        store.commit_sync(f"g{i}", {TP("t", i % 3): i})
    expected = store_state(store)
    store.close()  # snapshots every partition
    data = os.path.join(naming.snapshot_dir(str(tmp_path)), "data.mdb")
    assert os.path.getsize(data) > 0
    with open(data, "r+b") as f:
        if damage == "garbage":
            f.write(os.urandom(8192))
        else:
            f.truncate(0)
    with open_store(tmp_path, partitions=2) as again:
        assert store_state(again) == expected
        report = again.recovery_report
        assert not report.clean
        assert report.snapshot_store_discarded, report
        assert "discarded every snapshot" in str(report)
        assert not report.snapshots_loaded
    with open_store(tmp_path, partitions=2) as third:  # snapshots written again on close
        assert third.recovery_report.clean and store_state(third) == expected
