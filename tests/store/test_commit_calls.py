"""Commit calls framed and applied from their fields (``framing.frame_fields``,
``OffsetTable.apply_commit_calls``) against the path through records they replace, and the
lone commit (``store/lone_commit.py``): a ``commit_sync`` that finds its partition idle."""

from __future__ import annotations

import threading

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from offsetlog import OffsetAndMetadata as OAM
from offsetlog import OffsetStore, StoreFailedError
from offsetlog import TopicPartition as TP
from offsetlog.log import segment
from offsetlog.log.framing import encode_batch, frame_fields
from offsetlog.log.records import offset_commit_fields, records_from_fields
from offsetlog.store.group_commit import GroupCommitter
from offsetlog.table import OffsetTable

topics = st.sampled_from(["a", "orders", "payments-eu", "t\u00e9"])
values = st.one_of(
    st.integers(0, 2**63 - 1),
    st.builds(OAM, st.integers(0, 2**40), st.text(max_size=8),
              st.one_of(st.none(), st.integers(0, 2**31 - 1))))
calls = st.lists(
    st.tuples(st.sampled_from(["g", "grp-\u00e9", "orders-reader"]),
              st.dictionaries(st.builds(TP, topics, st.integers(0, 50)), values,
                              min_size=1, max_size=5),
              st.integers(0, 2**41)),
    min_size=1, max_size=6)


def fields_of(call):
    group, offsets, timestamp = call
    fields, _ = offset_commit_fields(group, offsets, timestamp, 4096)
    return fields


@settings(max_examples=300)
@given(calls, st.integers(0, 2**40), st.integers(0, 2**41))
def test_frame_fields_is_the_batch_of_the_calls_records(calls, base, timestamp):
    fielded = [fields_of(c) for c in calls]
    every = [f for fields in fielded for f in fields]
    assert frame_fields(base, timestamp, fielded) == encode_batch(
        base, records_from_fields(every), timestamp=timestamp)


@settings(max_examples=200)
@given(calls, st.integers(0, 2**40), st.booleans())
def test_applying_calls_from_fields_leaves_the_table_their_records_leave(calls, base, txn):
    fielded = [fields_of(c) for c in calls]
    every = [f for fields in fielded for f in fields]
    by_fields, by_records = OffsetTable(), OffsetTable()
    if txn:  # a group with pending transactional offsets takes the records' path
        for table in (by_fields, by_records):
            table.txn.keys["g"] = {}
    by_fields.apply_commit_calls(base, fielded)
    by_records.apply_batches(((base, records_from_fields(every), 0, -1, -1),))
    assert by_fields.offsets == by_records.offsets
    assert (by_fields.next_offset, by_fields.records_applied) == (
        by_records.next_offset, by_records.records_applied) == (base + len(every) // 3,
                                                                len(every) // 3)


def test_frame_fields_refuses_what_is_not_triples():
    with pytest.raises(ValueError):
        frame_fields(0, 0, [])
    with pytest.raises(ValueError):
        frame_fields(0, 0, [(["g", "t", 0], 1)])


def test_a_commit_sync_alone_in_its_partition_takes_the_lone_path(tmp_path, monkeypatch):
    """The usual commit_sync (nothing else in its partition) is written and applied by the
    lone path; a transaction's offsets and a queued partition are not."""
    taken = []
    real = GroupCommitter._queue_sync

    def counting(self, part, fields, *rest):  # the queued path, taken when not alone
        taken.append(fields)
        return real(self, part, fields, *rest)

    monkeypatch.setattr(GroupCommitter, "_queue_sync", counting)
    with OffsetStore.open(str(tmp_path), partitions=1, fsync="always") as store:
        store.commit_sync("g", {TP("t", 0): 5, TP("t", 1): OAM(7, "m", 3)})
        assert taken == []  # alone: not queued
        assert store.fetch("g") == {TP("t", 0): OAM(5), TP("t", 1): OAM(7, "m", 3)}
        with store.init_transactions("tx") as txn:
            txn.commit_offsets("g", {TP("t", 2): 9})
        assert taken == []  # (a transaction's offsets are queued otherwise: not a commit_sync)
        assert store.fetch("g")[TP("t", 2)] == OAM(9)
    with OffsetStore.open(str(tmp_path), partitions=1) as again:
        assert again.fetch("g")[TP("t", 1)] == OAM(7, "m", 3)


def test_a_failed_lone_write_fails_the_call_and_poisons_the_store(tmp_path, monkeypatch):
    def failing(fd, data, offset):
        raise OSError(5, "Input/output error")

    with OffsetStore.open(str(tmp_path), partitions=1, fsync="always") as store:
        store.commit_sync("g", {TP("t", 0): 1})
        monkeypatch.setattr(segment, "_write_dsync", failing)
        with pytest.raises(StoreFailedError) as err:
            store.commit_sync("g", {TP("t", 0): 2})
        assert isinstance(err.value.cause, OSError)
        monkeypatch.undo()
        assert store.fetch("g") == {TP("t", 0): OAM(1)}  # never applied
        with pytest.raises(StoreFailedError):  # poisoned: nothing later is written
            store.commit_sync("h", {TP("t", 0): 3})


def test_commits_queued_behind_a_lone_commit_are_handed_on(tmp_path, monkeypatch):
    """While a lone commit writes, others queue; its end hands them on (to the async writer),
    so none waits for nobody, and the log keeps call order per key."""
    release = threading.Event()
    entered = threading.Event()
    real = segment._write_dsync

    def slow(fd, data, offset):
        if not entered.is_set():
            entered.set()
            release.wait(10)
        return real(fd, data, offset)

    monkeypatch.setattr(segment, "_write_dsync", slow)
    with OffsetStore.open(str(tmp_path), partitions=1, fsync="always") as store:
        first = threading.Thread(target=store.commit_sync, args=("g", {TP("t", 0): 1}))
        first.start()
        assert entered.wait(10)
        later = [threading.Thread(target=store.commit_sync, args=("g", {TP("t", 0): n}))
                 for n in (2,)]
        for t in later:
            t.start()
        fut = store.commit_async("g", {TP("t", 1): 3})
        release.set()
        first.join(10)
        for t in later:
            t.join(10)
        assert fut.result(10) is None
        assert store.fetch("g") == {TP("t", 0): OAM(2), TP("t", 1): OAM(3)}
    with OffsetStore.open(str(tmp_path), partitions=1) as again:
        assert again.fetch("g") == {TP("t", 0): OAM(2), TP("t", 1): OAM(3)}


def test_the_usual_durable_write_is_made_natively(tmp_path, monkeypatch):
    """Once RWF_DSYNC worked on the active segment, a commit's write into its reserved space
    is the native one (partition_log.write_durable): the segment's Python write path is not
    entered; a replaced ``_write_dsync`` hook (a test's fault injection) is what that native
    path then calls, at the same place with the same bytes; a hook set to None (no combined
    write: write + sync) sends the write back through the Python path."""
    from offsetlog.log.segment import SegmentFile

    entered = []
    real = SegmentFile.begin_durable

    def counting(self, data):
        entered.append(len(data))
        return real(self, data)

    monkeypatch.setattr(SegmentFile, "begin_durable", counting)
    with OffsetStore.open(str(tmp_path), partitions=1, fsync="always") as store:
        store.commit_sync("g", {TP("t", 0): 0})  # the segment's first write: RWF_DSYNC tried
        if not store._writer.partitions[0].log._active.dsync:
            pytest.skip("RWF_DSYNC refused on this filesystem: every write is write + sync")
        first = len(entered)
        for n in range(1, 50):
            store.commit_sync("g", {TP("t", 0): n})
        assert len(entered) == first
        real_dsync, hooked = segment._write_dsync, []

        def hook(fd, data, offset):
            hooked.append((offset, bytes(data)))
            return real_dsync(fd, data, offset)

        monkeypatch.setattr(segment, "_write_dsync", hook)
        size = store._writer.partitions[0].log._active.size
        store.commit_sync("g", {TP("t", 0): 50})
        assert len(entered) == first
        assert [at for at, _ in hooked] == [size]
        assert store._writer.partitions[0].log._active.size == size + len(hooked[0][1])
        monkeypatch.setattr(segment, "_write_dsync", None)
        store.commit_sync("g", {TP("t", 0): 51})
        assert len(entered) == first + 1 and len(hooked) == 1
    with OffsetStore.open(str(tmp_path), partitions=1) as again:
        assert again.fetch("g") == {TP("t", 0): OAM(51)}


def test_a_failed_native_write_fails_the_call_and_poisons_the_store(tmp_path):
    """The native write's own error (no hook replaced): the active segment's fd is made
    read-only under it, so its ``pwritev2`` fails with EBADF; the call fails, nothing is
    applied, the store is poisoned, and what was acknowledged before reopens."""
    import errno
    import os

    with OffsetStore.open(str(tmp_path), partitions=1, fsync="always") as store:
        store.commit_sync("g", {TP("t", 0): 1})
        active = store._writer.partitions[0].log._active
        if not active.dsync:
            pytest.skip("RWF_DSYNC refused on this filesystem: every write is write + sync")
        store.commit_sync("g", {TP("t", 0): 2})
        read_only = os.open(active.path, os.O_RDONLY)
        try:
            os.dup2(read_only, active.fd)
        finally:
            os.close(read_only)
        with pytest.raises(StoreFailedError) as err:
            store.commit_sync("g", {TP("t", 0): 3})
        assert isinstance(err.value.cause, OSError) and err.value.cause.errno == errno.EBADF
        assert store.fetch("g") == {TP("t", 0): OAM(2)}
        with pytest.raises(StoreFailedError):
            store.commit_sync("h", {TP("t", 0): 4})
    with OffsetStore.open(str(tmp_path), partitions=1) as again:
        assert again.fetch("g") == {TP("t", 0): OAM(2)}
