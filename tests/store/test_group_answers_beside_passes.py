"""A parked group request is answered even when its deadline comes due while the store runs a
call that keeps only records: the retention pass and ``delete_group`` (deferred producers,
offsetlog/store/deferred.py). Such a call once fired the partition's due deadlines itself,
and the answers those gave (a JoinGroup's, once its join phase ended) were dropped with the
rest of its Result: the member waited for ever. Seen on the wire with a retention pass every
half second (tests/kafka/test_diff_offset_retention.py)."""

from __future__ import annotations

import pytest

from offsetlog import TopicPartition
from offsetlog.group.consumer_protocol import encode_subscription
from offsetlog.store import groups as store_groups
from support.stores import counted_group_config, open_store

DELAY = 3_000


@pytest.fixture
def store(store_dir, clock, monkeypatch):
    # the timer thread polls on its own every 50 ms of real time: here only the test does
    monkeypatch.setattr(store_groups, "GROUP_TIMER_INTERVAL_S", 3_600.0)
    with open_store(store_dir, clock=clock, partitions=1, group_config=counted_group_config(
            initial_rebalance_delay_ms=DELAY)) as s:
        yield s


def _parked_join(store):
    fut = store.join_group("joining", client_id="c", session_timeout_ms=10_000,
                           rebalance_timeout_ms=10_000,
                           protocols=[("range", encode_subscription(["orders"]))])
    assert not fut.done()  # the initial delay: parked
    return fut


@pytest.mark.parametrize("call", ["expire_offsets", "delete_group"])
def test_a_join_whose_delay_ends_before_a_pass_is_still_answered(store, clock, call):
    store.commit_sync("standalone", {TopicPartition("orders", 0): 1})  # (the pass runs here)
    fut = _parked_join(store)
    clock.advance(DELAY)  # the join phase is due; nobody polled yet
    if call == "expire_offsets":
        assert store.expire_offsets() == 0
    else:
        store.delete_group("standalone")
    store.poll_groups()
    join = fut.result(timeout=10)
    assert join.error is None and join.generation_id == 1
