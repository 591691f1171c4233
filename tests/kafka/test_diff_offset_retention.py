"""Apache Kafka as the judge of OffsetCommit v2-4's ``retention_time_ms``: an offset committed
with one expires at commit time + it, by the pre-KIP-211 rule, where the retention pass may
expire its group's offsets at all. Both targets run the pass every half second
(``RETENTION_CHECK``), a pair of their own: the pass deletes any group Empty without
offsets, such as one between a KIP-394 JoinGroup and its member's second, which would make
the shared pair's cases race with it. Each case waits for an expiry it expects with a
``Poll``, and reads what stayed afterwards."""

from __future__ import annotations

import pytest

from support.kafka_broker import separate_targets
from support.kafka_diff import Poll, Req, compare
from support.kafka_steps import commit, describe, fetch, fetch_body, formed, leave, ref

OLD_COMMIT_VERSIONS = (2, 3, 4)
TOPICS = ["orders:4", "events:2"]
RETENTION_CHECK = "offsets.retention.check.interval.ms"


@pytest.fixture(scope="module")
def targets(kafka_broker, tmp_path_factory):
    """``(kafka port, offsetlog port)`` with the retention pass every half second."""
    with separate_targets(str(tmp_path_factory.mktemp("retention") / "store"), TOPICS,
                          extra={RETENTION_CHECK: 500}, config=[f"{RETENTION_CHECK}=500"]
                          ) as ports:
        yield ports


def _offsets(answer) -> dict:
    """``{(topic, partition): committed offset}`` of an OffsetFetch v5 answer."""
    return {(t.name, int(p.partition_index)): int(p.committed_offset)
            for t in answer.topics for p in t.partitions}


def until_gone(g, topic, partitions, topics):
    """OffsetFetch v5 of ``topics`` until ``topic``'s ``partitions`` (one or a tuple) have no
    offset: one poll for offsets expiring in the same pass, whose answer would otherwise
    depend on whether a pass fell between their commits."""
    wanted = partitions if isinstance(partitions, tuple) else (partitions,)
    return Poll(9, 5, fetch_body(g, topics), timeout=30, until=lambda r: all(
        _offsets(r)[(topic, p)] == -1 for p in wanted))


@pytest.mark.parametrize("v", OLD_COMMIT_VERSIONS)
def test_a_standalone_commit_expires_by_its_own_retention_time(targets, gid, v):
    """Retention 0 and a negative one (both a time already past) expire at the next pass;
    an hour's and none (-1: the broker's seven days) stay."""
    topics = (("orders", [0, 1, 2, 3]),)
    steps = [commit(gid, v, partition=0, offset=10, retention=0),
             commit(gid, v, partition=1, offset=11, retention=-5_000),
             commit(gid, v, partition=2, offset=12, retention=3_600_000),
             commit(gid, v, partition=3, offset=13),
             until_gone(gid, "orders", (0, 1), topics),
             fetch(gid, 5, topics=topics)]
    kafka = compare(*targets, steps)
    offsets = {p["partition_index"]: p["committed_offset"]
               for p in kafka[-1]["topics"][0]["partitions"]}
    assert offsets == {0: -1, 1: -1, 2: 12, 3: 13}


@pytest.mark.parametrize("v", OLD_COMMIT_VERSIONS)
def test_a_stable_groups_subscribed_offsets_wait_until_it_is_empty(targets, gid, v):
    """A Stable consumer group (subscribed to "orders" alone) loses at once the offset of
    a topic no member subscribes to, keeps the subscribed one while Stable, and loses it
    once its member left: then the group, empty and offset-less, is deleted too."""
    topics = (("orders", [0]), ("events", [0]))
    member = dict(gen=ref("m_gen"), member=ref("m"), retention=0)
    # (JoinGroup v3: one join, no KIP-394 second one, between which the group is Empty and
    # without offsets, and a pass may delete it, on either target)
    steps = formed(gid, 3) + [
        commit(gid, v, topic="orders", offset=20, **member),
        commit(gid, v, topic="events", offset=21, **member),
        until_gone(gid, "events", 0, topics),
        fetch(gid, 5, topics=topics),
        leave(gid, 3),
        until_gone(gid, "orders", 0, topics),
        Poll(15, 5, dict(groups=[gid], include_authorized_operations=False),
             until=lambda r: str(r.groups[0].group_state) == "Dead", timeout=30),
        describe(gid, 5)]
    kafka = compare(*targets, steps)
    stable = {t["name"]: t["partitions"][0]["committed_offset"]
              for t in kafka[len(formed(gid, 3)) + 3]["topics"]}
    assert stable == {"orders": 20, "events": -1}


def _consumer_heartbeat(g, member, epoch):
    """ConsumerGroupHeartbeat v1 (KIP-848): a member subscribed to "orders" joining (epoch
    0), or leaving (-1)."""
    body = dict(group_id=g, member_id=member, member_epoch=epoch, instance_id=None,
                topic_partitions=None)
    if epoch == 0:
        body.update(rebalance_timeout=30_000, subscribed_topic_names=["orders"],
                    server_assignor="range", topic_partitions=[])
    return Req(68, 1, body)


def _until_deleted(g):
    """ConsumerGroupDescribe v1 until the group is gone (GROUP_ID_NOT_FOUND)."""
    return Poll(69, 1, dict(group_ids=[g], include_authorized_operations=False),
                until=lambda r: int(r.groups[0].error_code) == 69, timeout=30)


@pytest.mark.parametrize("committed", [True, False])
def test_an_empty_consumer_group_is_deleted_once_its_offsets_expired(targets, gid, committed):
    """A consumer-protocol group whose member left is Empty: its offsets expire by their
    commits (here an explicit retention of 0, committed by the admin's way, generation -1),
    and then, or at once without any, the pass deletes the group."""
    member = f"{gid}-a"
    steps = [_consumer_heartbeat(gid, member, 0), _consumer_heartbeat(gid, member, -1)]
    if committed:
        # (a pass between the leave and this commit may delete the group first, on either
        # target: the commit then makes a simple group, whose offset the next pass expires;
        # so both the offset's expiry and the group's deletion are waited for)
        steps += [commit(gid, 2, offset=30, retention=0),
                  until_gone(gid, "orders", 0, (("orders", [0]),))]
    steps += [_until_deleted(gid), fetch(gid, 5, topics=(("orders", [0]),))]
    # (the heartbeats' error codes only: Kafka 4.4 batches target assignments, KIP-1263, so
    # its member epochs differ from ours: tests/kafka/test_diff_consumer_group.py)
    kafka = compare(*targets, steps, view=lambda answers: [
        a.get("error_code") for a in answers[:2]] + answers[2:])
    assert kafka[:2] == ["NONE", "NONE"]
    assert kafka[-1]["topics"][0]["partitions"][0]["committed_offset"] == -1
