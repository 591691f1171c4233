"""Issue 17, defect 3: every public argument is checked before anything happens; a bad one is
a clear error and never poisons the store."""

from __future__ import annotations

import math

import pytest

from offsetlog import TopicPartition as TP
from offsetlog.errors import InvalidArgumentError, OffsetlogError
from support.stores import open_log_store

BAD_TIMES = [2 ** 64, 2 ** 63, -1, True, False, 1.5, "1", None.__class__]


def usable(store) -> None:
    """The store still takes commits on every partition (it was not poisoned)."""
    for i in range(12):
        store.commit_sync(f"g{i}", {TP("t", 0): i})
    assert store.committed("g3", TP("t", 0)).offset == 3


@pytest.fixture
def store(tmp_path):
    s = open_log_store(tmp_path, partitions=3)
    for i in range(12):
        s.commit_sync(f"g{i}", {TP("t", 0): 100 + i})
    yield s
    s.close()


@pytest.mark.parametrize("now_ms", BAD_TIMES)
def test_expire_offsets_refuses_a_bad_now_ms_and_the_store_goes_on(store, now_ms):
    with pytest.raises(InvalidArgumentError):
        store.expire_offsets(now_ms=now_ms)
    usable(store)


@pytest.mark.parametrize("call", ["compact", "poll_groups", "poll_transactions"])
@pytest.mark.parametrize("now_ms", [2 ** 64, -1, True])
def test_other_now_ms_arguments_are_checked_too(store, call, now_ms):
    with pytest.raises(InvalidArgumentError):
        getattr(store, call)(now_ms=now_ms)
    usable(store)


@pytest.mark.parametrize("timeout", [-1, -0.001, math.nan, True, "1", [1]])
def test_commit_sync_refuses_a_bad_timeout_before_queueing(store, timeout):
    with pytest.raises(InvalidArgumentError):
        store.commit_sync("g0", {TP("t", 0): 7}, timeout=timeout)
    assert store.committed("g0", TP("t", 0)).offset == 100  # nothing was committed
    usable(store)


@pytest.mark.parametrize("timeout", [math.inf, 1e300, 0, 0.5, 10])
def test_commit_sync_takes_every_sensible_timeout(store, timeout):
    store.commit_sync("g0", {TP("t", 0): 8}, timeout=timeout)
    assert store.committed("g0", TP("t", 0)).offset == 8


@pytest.mark.parametrize("call", ["compact", "snapshot"])
@pytest.mark.parametrize("partitions", [[99], [3], [-1], [True], [0, "1"], "0", 5, [1.0]])
def test_compact_and_snapshot_refuse_partitions_the_store_does_not_have(store, call,
                                                                        partitions):
    with pytest.raises(InvalidArgumentError) as err:
        getattr(store, call)(partitions)
    assert isinstance(err.value, (OffsetlogError, ValueError))
    usable(store)


def test_compact_and_snapshot_take_real_partition_numbers(store):
    store.compact([0, 2])
    assert [r.partition for r in store.snapshot([2, 0])] == [2, 0]


@pytest.mark.parametrize("offset", [-1, -2, -(1 << 63)])
def test_negative_offsets_only_where_the_store_was_opened_to_take_them(tmp_path, offset):
    from offsetlog import OffsetAndMetadata
    from offsetlog.errors import InvalidCommitError, StoreConfigError

    with open_log_store(tmp_path / "strict", partitions=3) as strict:
        for value in (offset, OffsetAndMetadata(offset, "m")):
            with pytest.raises(InvalidCommitError, match="offset must be an int from 0"):
                strict.commit_sync("g", {TP("t", 0): value})
            with pytest.raises(InvalidCommitError):
                strict.commit_async("g", {TP("t", 1): 5, TP("t", 0): value})
        assert strict.fetch("g") == {}
    kafka_like = tmp_path / "kafka-like"
    with open_log_store(kafka_like, partitions=3, negative_offsets=True) as s:
        s.commit_sync("g", {TP("t", 0): offset})
        s.commit_async("g", {TP("t", 1): OffsetAndMetadata(offset, "m")}).result(10)
        with pytest.raises(InvalidCommitError):  # int64 is still the range
            s.commit_sync("g", {TP("t", 2): -(1 << 63) - 1})
    with open_log_store(kafka_like, partitions=3, negative_offsets=True) as s:
        assert s.fetch("g") == {TP("t", 0): OffsetAndMetadata(offset),
                                TP("t", 1): OffsetAndMetadata(offset, "m")}
    with pytest.raises(StoreConfigError):
        open_log_store(tmp_path / "bad", negative_offsets="yes")
