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
