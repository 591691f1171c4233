"""Issue 17, defect 2: what the writer accepts, the reader accepts.

A commit call whose batch would exceed the format's limit on a batch (``MAX_BATCH_BYTES``,
1 GiB: ``length`` is 44 header bytes + the payload) is refused before anything is written,
with ``BatchTooLargeError``; every call that is accepted is readable after reopen. The
format's other limits follow from that one: ``record_count`` and ``last_offset_delta`` are
u32 (a record takes more than one byte, so a batch of 2**30 bytes never reaches them),
strings (group, topic, metadata) are msgpack str of up to 2**32 - 1 bytes (more than a batch
holds), and offsets, partitions and leader epochs have their own checks (test_validation).

The property test lowers the writer's limit (to 64 KiB), so that inputs
that straddle it are cheap; one test uses the real 1 GiB limit."""

from __future__ import annotations

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from offsetlog import OffsetAndMetadata as OAM
from offsetlog import TopicPartition as TP
from offsetlog.errors import BatchTooLargeError, InvalidCommitError
from offsetlog.log import records
from offsetlog.log.format import HEADER_AFTER_LENGTH, HEADER_SIZE, MAX_BATCH_BYTES
from offsetlog.log.records import max_call_bytes
from support.durability_helpers import file_sizes
from support.stores import open_log_store

SMALL = 1 << 16  # the lowered limit of a batch, in bytes


@pytest.fixture
def small_limit(monkeypatch):
    """A writer with a batch limit of SMALL bytes: it refuses calls that would make a longer
    batch. (The reader's limit is the native core's constant, 1 GiB; it never sees a batch
    over SMALL here, so whatever the writer accepts it reads.)"""
    monkeypatch.setattr(records, "MAX_CALL_BYTES", max_call_bytes(SMALL))
    return SMALL


def small_store(path):
    # a round of calls shares a batch: its cap must fit a batch too (as config enforces for
    # the real limit: max_group_commit_bytes <= MAX_BATCH_BYTES - HEADER_SIZE)
    return open_log_store(path, partitions=1, metadata_max_bytes=1 << 20,
                          max_group_commit_bytes=SMALL - HEADER_SIZE)


def test_the_call_limit_is_what_one_batch_holds():
    assert max_call_bytes() == MAX_BATCH_BYTES - HEADER_AFTER_LENGTH == records.MAX_CALL_BYTES


def test_a_call_over_the_real_1_gib_limit_is_refused_before_writing(tmp_path):
    store = open_log_store(tmp_path, partitions=1, metadata_max_bytes=1 << 31)
    store.commit_sync("g", {TP("t", 0): 1})
    before = file_sizes(tmp_path)
    huge = "m" * (MAX_BATCH_BYTES - HEADER_AFTER_LENGTH)  # the payload alone is over
    with pytest.raises(BatchTooLargeError) as err:
        store.commit_sync("g", {TP("t", 1): OAM(5, huge)})
    assert err.value.size > err.value.limit == MAX_BATCH_BYTES - HEADER_AFTER_LENGTH
    assert isinstance(err.value, InvalidCommitError)
    del huge
    assert file_sizes(tmp_path) == before  # nothing was written
    store.commit_sync("g", {TP("t", 2): 3})  # the store is not poisoned
    store.close()
    with open_log_store(tmp_path) as again:
        assert again.recovery_report.clean
        assert again.fetch("g") == {TP("t", 0): OAM(1), TP("t", 2): OAM(3)}


@pytest.mark.parametrize("field", ["metadata", "group", "topic", "offsets"])
def test_every_call_around_the_limit_is_refused_or_readable(tmp_path, small_limit, field):
    """Grow one dimension of a call byte by byte across the limit: each call is either
    refused (nothing written) or comes back whole after reopen, and both happen."""
    store = small_store(tmp_path)
    accepted, refused, expected = [], [], {}
    per_offset = records.PLAIN_COMMIT_BOUND + len("topic-0000") + len("g")
    sweep = (range(SMALL - 200, SMALL, 3) if field != "offsets"
             else range(SMALL // per_offset - 20, SMALL // per_offset + 5))
    for n in sweep:
        group, tp, value = "g", TP("t", 0), OAM(1, "")
        offsets = None
        if field == "metadata":
            value = OAM(1, "m" * n)
        elif field == "group":
            group = "g" * n
        elif field == "topic":
            tp = TP("t" * n, 0)
        else:
            offsets = {TP(f"topic-{i:04d}", i): i for i in range(n)}
        offsets = offsets or {tp: value}
        before = file_sizes(tmp_path)
        try:
            store.commit_sync(group, offsets)
        except BatchTooLargeError:
            refused.append(n)
            assert file_sizes(tmp_path) == before
        else:
            accepted.append(n)
            expected.setdefault(group, {}).update(
                {k: v if isinstance(v, OAM) else OAM(v) for k, v in offsets.items()})
    store.close()
    assert accepted and refused, (accepted, refused)
    with open_log_store(tmp_path) as again:
        assert again.recovery_report.clean, again.recovery_report
        for group, offsets in expected.items():
            assert again.fetch(group) == dict(sorted(offsets.items()))


texts = st.integers(min_value=1, max_value=SMALL)


@settings(max_examples=40, deadline=None,
          suppress_health_check=[HealthCheck.function_scoped_fixture,
                                 HealthCheck.too_slow])
@given(calls=st.lists(st.tuples(
    st.integers(1, 40),                      # group length
    st.integers(1, 40),                      # topic length
    st.integers(0, SMALL),                   # metadata length of the first offset
    st.integers(1, 2000),                    # offsets in the call
    st.booleans(),                           # async
    st.sampled_from(["a", "é", "\U0001F600"]),  # metadata character (1, 2 or 4 bytes)
), min_size=1, max_size=6))
def test_property_every_call_is_refused_before_writing_or_readable_after_reopen(
        tmp_path_factory, small_limit, calls):
    path = tmp_path_factory.mktemp("limits")
    store = small_store(path)
    expected: dict = {}
    futures = []
    for i, (glen, tlen, mlen, count, is_async, ch) in enumerate(calls):
        group = f"{i}-" + "g" * glen
        offsets = {TP("t" * tlen, p): OAM(p, ch * mlen if p == 0 else "")
                   for p in range(count)}
        for f in futures:  # nothing else in flight: "nothing written" is then this call's
            f.result()
        before = file_sizes(path)
        try:
            if is_async:
                futures.append(store.commit_async(group, offsets))
            else:
                store.commit_sync(group, offsets)
        except BatchTooLargeError:
            assert file_sizes(path) == before
            continue
        expected[group] = offsets
    for f in futures:
        f.result()
    store.close()
    with open_log_store(path) as again:
        assert again.recovery_report.clean, again.recovery_report
        for group, offsets in expected.items():
            assert again.fetch(group) == dict(sorted(offsets.items())), group
