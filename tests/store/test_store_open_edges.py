"""What ``OffsetStore.open`` does with a path that is no store, and ``delete_group`` with a
group that is not there (issue 15, items 1 and 3)."""

import os

import pytest

from offsetlog import (GroupIdNotFoundError, OffsetStore, StoreConfigError, StoreNotFoundError,
                       TopicPartition)

from support.stores import open_store


def test_create_false_refuses_a_directory_that_is_no_store_and_changes_nothing(tmp_path):
    fleet = tmp_path / "fleet"
    (fleet / "a").mkdir(parents=True)
    with pytest.raises(StoreNotFoundError) as e:
        OffsetStore.open(fleet, create=False)
    assert e.value.path == str(fleet) and "meta.json" in str(e.value)
    assert os.listdir(fleet) == ["a"]
    with pytest.raises(StoreNotFoundError, match="no such directory"):
        OffsetStore.open(tmp_path / "typo", create=False)
    assert not (tmp_path / "typo").exists()


def test_create_false_opens_an_existing_store(store_dir):
    with open_store(store_dir, partitions=2) as s:
        s.commit_sync("g", {TopicPartition("t", 0): 3})
    with OffsetStore.open(store_dir, create=False) as s:
        assert s.committed("g", TopicPartition("t", 0)).offset == 3


def test_open_on_a_file_names_the_path(tmp_path):
    path = tmp_path / "offsets"
    path.write_text("not a store")
    with pytest.raises(StoreConfigError, match=str(path)):
        OffsetStore.open(path)


def test_open_reports_replay_progress(store_dir):
    with open_store(store_dir, partitions=2, snapshots=False) as s:
        for i in range(20):
            s.commit_sync(f"g{i}", {TopicPartition("t", 0): i})
    seen = []
    with OffsetStore.open(store_dir, snapshots=False, progress=seen.append):
        pass
    assert seen and sum(seen) > 0


def test_delete_group_of_an_unknown_group_raises_group_id_not_found(store_dir):
    with open_store(store_dir, partitions=2) as s:
        with pytest.raises(GroupIdNotFoundError) as e:
            s.delete_group("nobody")
        assert e.value.code == 69
        s.commit_sync("g", {TopicPartition("t", 0): 1})
        s.delete_group("g")
        with pytest.raises(GroupIdNotFoundError):
            s.delete_group("g")  # deleted: gone, as Kafka answers a second DeleteGroups
