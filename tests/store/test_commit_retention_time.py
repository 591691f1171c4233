"""``commit_sync``/``commit_async``'s ``retention_time_ms``: a commit's own expiry (the
pre-KIP-211 API, OffsetCommit v2-4 on the wire), written into its records and honoured by the
retention pass instead of the store's ``retention_ms``."""

from __future__ import annotations

from pathlib import Path

import pytest

from offsetlog import OffsetAndMetadata, TopicPartition
from offsetlog.errors import InvalidArgumentError
from offsetlog.log.records import OFFSET_COMMIT
from offsetlog.partitioner import partition_for
from offsetlog.validation import MAX_TIME_MS
from support import format_oracle as oracle
from support.groups import SESSION, form_group
from support.stores import open_group_store, open_log_store

TP0, TP1 = TopicPartition("orders", 0), TopicPartition("orders", 1)
HOUR = 3_600_000
DAY = 24 * HOUR


def _expire_timestamps(root: str, group: str, partitions: int = 50) -> list:
    """The expire timestamp (value position 4, None when absent) of every OFFSET_COMMIT
    record of ``group`` in the log, in log order, as the reference reader reads them."""
    pdir = Path(root) / f"__consumer_offsets-{partition_for(group, partitions)}"
    segs = sorted(pdir.glob("*.log"))
    batches, problem = oracle.read_store_partition(
        [(int(s.name[:20]), s.read_bytes()) for s in segs])
    assert problem is None
    out = []
    for b in batches:
        for _delta, rtype, _version, key, value in b["records"]:
            if rtype == OFFSET_COMMIT and key[0] == group and value is not None:
                out.append(value[4] if len(value) > 4 else None)
    return out


@pytest.mark.parametrize("how", ["sync", "async"])
def test_an_offset_expires_at_its_own_retention_time(store_dir, clock, how):
    with open_log_store(store_dir, clock=clock, retention_ms=DAY) as s:
        if how == "sync":
            s.commit_sync("g", {TP0: 5}, retention_time_ms=HOUR)
        else:
            s.commit_async("g", {TP0: 5}, retention_time_ms=HOUR).result(10)
        s.commit_sync("g", {TP1: 7})  # the store's rules: a day
        clock.advance(HOUR - 1)
        assert s.expire_offsets() == 0
        clock.advance(1)
        assert s.expire_offsets() == 1
        assert s.fetch("g") == {TP1: OffsetAndMetadata(7)}
    assert _expire_timestamps(store_dir, "g") == [clock.now, None]


def test_a_retention_time_longer_than_the_stores_keeps_the_offset(store_dir, clock):
    with open_log_store(store_dir, clock=clock, retention_ms=DAY) as s:
        s.commit_sync("g", {TP0: OffsetAndMetadata(5, "m", 3)}, retention_time_ms=3 * DAY)
        clock.advance(DAY)
        assert s.expire_offsets() == 0
    # the expire timestamp is in the record: it holds after a reopen (a replay)
    with open_log_store(store_dir, clock=clock, retention_ms=DAY) as s:
        clock.advance(2 * DAY - 1)
        assert s.expire_offsets() == 0
        assert s.fetch("g") == {TP0: OffsetAndMetadata(5, "m", 3)}
        clock.advance(1)
        assert s.expire_offsets() == 1
        assert s.fetch("g") == {}


def test_a_later_commit_without_one_goes_back_to_the_stores_rules(store_dir, clock):
    with open_log_store(store_dir, clock=clock, retention_ms=DAY) as s:
        s.commit_sync("g", {TP0: 5}, retention_time_ms=HOUR)
        s.commit_sync("g", {TP0: 6})
        clock.advance(HOUR)
        assert s.expire_offsets() == 0
        clock.advance(DAY - HOUR)
        assert s.expire_offsets() == 1


def test_zero_expires_at_the_next_pass(store_dir, clock):
    with open_log_store(store_dir, clock=clock, retention_ms=DAY) as s:
        s.commit_sync("g", {TP0: 5, TP1: 6}, retention_time_ms=0)
        assert s.expire_offsets() == 2
        assert s.groups() == []


def test_a_sum_past_int64_stays_at_its_maximum(store_dir, clock):
    with open_log_store(store_dir, clock=clock, retention_ms=DAY) as s:
        s.commit_sync("g", {TP0: 5}, retention_time_ms=MAX_TIME_MS)
        assert s.expire_offsets(now_ms=MAX_TIME_MS - 1) == 0
    assert _expire_timestamps(store_dir, "g") == [MAX_TIME_MS]


@pytest.mark.parametrize("bad", [-1, -HOUR, MAX_TIME_MS + 1, True, 1.5, "60000"])
@pytest.mark.parametrize("how", ["sync", "async"])
def test_bad_retention_times_are_refused_and_nothing_is_written(store_dir, clock, bad, how):
    with open_log_store(store_dir, clock=clock) as s:
        call = s.commit_sync if how == "sync" else s.commit_async
        with pytest.raises(InvalidArgumentError, match="retention_time_ms"):
            call("g", {TP0: 5}, retention_time_ms=bad)
        assert s.fetch("g") == {}
    assert _expire_timestamps(store_dir, "g") == []


def test_a_stable_members_subscribed_offsets_wait_for_the_group(store_dir, clock):
    """The pass looks at a group's state first (KIP-211): a Stable consumer group's offsets
    of subscribed topics stay, an explicit expiry or not; once the group is Empty, the
    explicit one counts, not the time since it emptied."""
    with open_group_store(store_dir, clock, retention_ms=DAY) as s:
        gen, (m1,) = form_group(s, clock)
        s.commit_sync("g", {TP0: 5}, generation_id=gen, member_id=m1, retention_time_ms=HOUR)
        s.commit_sync("g", {TopicPartition("events", 0): 6}, generation_id=gen, member_id=m1,
                      retention_time_ms=HOUR)
        for _ in range(2 * HOUR // (SESSION // 2)):
            clock.advance(SESSION // 2)
            assert s.heartbeat("g", member_id=m1, generation_id=gen).result(10).error is None
        # the topic no member subscribes to goes; the subscribed one waits for the group
        assert s.expire_offsets() == 1
        assert s.fetch("g") == {TP0: OffsetAndMetadata(5)}
        assert s.leave_group("g", member_id=m1).result(10).error is None
        assert s.expire_offsets() == 1
        assert s.fetch("g") == {}
