"""A group call that writes nothing is answered in its caller's thread when its log partition is
idle, and waits behind whatever is still on its way to the disk when it is not
(``GroupCommitter.submit_computed``)."""

import threading

import pytest

from offsetlog import TopicPartition
from offsetlog.errors import UnknownMemberIdError
from offsetlog.log import segment
from offsetlog.store.group_commit import GroupCommitter
from support.groups import form_group
from support.stores import open_group_store

TP0 = TopicPartition("orders", 0)

needs_dsync = pytest.mark.skipif(segment._write_dsync is None, reason="no pwritev/RWF_DSYNC here")


@pytest.fixture
def wakes(monkeypatch):
    """The partitions whose queued work was handed to the async writer, in order."""
    woken = []
    real = GroupCommitter._wake_async

    def counted(self, part):
        woken.append(part.index)
        real(self, part)

    monkeypatch.setattr(GroupCommitter, "_wake_async", counted)
    return woken


def heartbeat(store, member, generation):
    return store.heartbeat("g", member_id=member, generation_id=generation,
                           group_instance_id=None)


def test_a_heartbeat_in_an_idle_partition_is_answered_at_once(store_dir, clock, wakes):
    with open_group_store(store_dir, clock, fsync="always") as s:
        gen, (m1,) = form_group(s, clock)
        s.flush()
        wakes.clear()
        ok = heartbeat(s, m1, gen)
        refused = heartbeat(s, "intruder", gen)
        assert ok.done() and refused.done()  # resolved before the call returned
        assert ok.result().error is None
        assert isinstance(refused.result().error, UnknownMemberIdError)
        assert wakes == []
        # A call that writes records still goes to the log through a round: the member's
        # leave empties the group, whose new state is a record.
        s.leave_group("g", member_id=m1, members=None).result(timeout=10)
        assert wakes == [s.partition_of("g")]
    with open_group_store(store_dir, clock) as again:
        assert again.describe_group("g").state == "Empty"


@needs_dsync
def test_a_heartbeat_behind_a_round_being_written_waits_for_it(store_dir, clock, monkeypatch):
    with open_group_store(store_dir, clock, fsync="always") as s:
        gen, (m1,) = form_group(s, clock)
        s.flush()
        writing, release = threading.Event(), threading.Event()
        real = segment._write_dsync

        def held(fd, data, offset):
            writing.set()
            release.wait(10)
            return real(fd, data, offset)

        monkeypatch.setattr(segment, "_write_dsync", held)
        commit = threading.Thread(target=s.commit_sync, args=("g", {TP0: 5}),
                                  kwargs=dict(generation_id=gen, member_id=m1))
        commit.start()
        try:
            assert writing.wait(10)
            fut = heartbeat(s, m1, gen)
            # the commit's round is still being written: the heartbeat waits behind it
            assert not fut.done()
        finally:
            release.set()
            commit.join(10)
        assert fut.result(timeout=10).error is None
        assert s.committed("g", TP0).offset == 5
