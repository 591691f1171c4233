"""Apache Kafka as the judge of what a client asks before it joins a group: ApiVersions,
Metadata, ListOffsets and Fetch of the (empty) topics; and the differences that come from
offsetlog storing no messages, each pinned exactly (docs/PROTOCOL.md, "Where offsetlog
answers differently from Kafka, and why")."""

from __future__ import annotations

import pytest

from support.kafka_diff import Poll, Req, at, compare, normalise, run
from support.kafka_steps import commit_body


def metadata(v, topics=("orders", "events")):
    return Req(3, v, dict(topics=[dict(name=t, topic_id=None) for t in topics],
                          allow_auto_topic_creation=False,
                          include_topic_authorized_operations=True,
                          include_cluster_authorized_operations=True))


def _sorted_topics(answers):
    for a in answers:
        if "topics" in a:
            a["topics"] = sorted(a["topics"], key=lambda t: str(t.get("name")))
            for t in a["topics"]:
                if "partitions" in t:
                    t["partitions"].sort(key=lambda p: p["partition_index"])
    return answers


def expect(path, value):
    def check(answers):
        assert at(answers, path) == value, path
    return check


@pytest.mark.parametrize("v", range(0, 13))
def test_metadata_of_the_topics(targets, v):
    compare(*targets, [metadata(v)], view=_sorted_topics,
            check=expect("0.topics.1.partitions.3.error_code", "NONE"))


@pytest.mark.parametrize("v", [4, 9, 12])
def test_metadata_of_an_unknown_topic(targets, v):
    compare(*targets, [metadata(v, ("no-such-topic",))],
            check=expect("0.topics.0.error_code", "UNKNOWN_TOPIC_OR_PARTITION"))


@pytest.mark.parametrize("v", [1, 4, 12])
def test_metadata_creates_a_topic(targets, gid, v):
    """Difference: Metadata that may create a topic (always before v4). Kafka asks its
    controller to create it and answers at once UNKNOWN_TOPIC_OR_PARTITION (clients ask
    again); offsetlog registers the topic before it answers, so the first answer has it.
    The next answer is the same on both."""
    ask = Req(3, v, dict(topics=[dict(name=gid, topic_id=None)], allow_auto_topic_creation=True,
                         include_topic_authorized_operations=False,
                         include_cluster_authorized_operations=False))
    until = Poll(3, v, ask.body, until=lambda r: r.topics[0].partitions and all(
        int(p.error_code) == 0 for p in r.topics[0].partitions))
    compare(*targets, [ask, until], known={
        "0.topics.0.error_code": ("UNKNOWN_TOPIC_OR_PARTITION", "NONE"),
        "0.topics.0.partitions": ([], [{"error_code": "NONE", "partition_index": 0,
                                        "leader_id": "NODE", "replica_nodes": ["NODE"],
                                        "isr_nodes": ["NODE"],
                                        **({"leader_epoch": 0} if v >= 7 else {}),
                                        **({"offline_replicas": []} if v >= 5 else {})}]),
        **({"0.topics.0.topic_id": (None, "TOPIC_ID")} if v >= 10 else {})},
            view=lambda a: a)


def list_offsets(v, timestamp, topic="orders"):
    return Req(2, v, dict(replica_id=-1, isolation_level=0, topics=[dict(
        name=topic, partitions=[dict(partition_index=0, current_leader_epoch=-1,
                                     timestamp=timestamp)])]))


@pytest.mark.parametrize("v", range(1, 9))
@pytest.mark.parametrize("timestamp", [-2, -1, 1_700_000_000_000])
def test_list_offsets_of_an_empty_partition(targets, v, timestamp):
    """No messages on either target: Kafka's partition is as empty as offsetlog's."""
    compare(*targets, [list_offsets(v, timestamp), list_offsets(v, -1, "no-such-topic")])


def fetch_records(v, offset, topic="orders"):
    return Req(1, v, dict(replica_id=-1, max_wait=50, min_bytes=0, max_bytes=1 << 20,
                          isolation_level=0, session_id=0, session_epoch=-1, rack_id="",
                          forgotten_topics_data=[], topics=[dict(topic=topic, partitions=[dict(
                              partition=0, current_leader_epoch=-1, fetch_offset=offset,
                              last_fetched_epoch=-1, log_start_offset=-1,
                              partition_max_bytes=1 << 20)])]))


@pytest.mark.parametrize("v", [4, 7, 11, 12])
def test_fetch_at_the_log_end(targets, v):
    compare(*targets, [fetch_records(v, 0)])


@pytest.mark.parametrize("v", [4, 11, 12])
def test_fetch_past_the_log_end(targets, v):
    """Difference: a consumer whose committed offset is past the end of Kafka's log gets
    OFFSET_OUT_OF_RANGE (and resets); offsetlog has no log, so every offset is its end: no
    error, high watermark = the fetch offset (a consumer of offsetlog is always caught up)."""
    p = "0.responses.0.partitions.0."
    compare(*targets, [fetch_records(v, 5)], known={
        p + "error_code": ("OFFSET_OUT_OF_RANGE", "NONE"),
        p + "high_watermark": (-1, 5),
        p + "last_stable_offset": (-1, 5),
        **({p + "log_start_offset": (-1, 0)} if v >= 5 else {})})


def test_api_versions_offered_are_a_subset_of_kafkas(targets):
    """Difference: offsetlog offers fewer APIs (no messages, no replication, read-only
    configs, no KIP-848 / KIP-890 v2 versions); each version it offers, Kafka offers."""
    body = dict(client_software_name="diff", client_software_version="1")
    kafka, ours = ({int(a.api_key): (int(a.min_version), int(a.max_version))
                    for a in run(port, [Req(18, 3, body)])[0][0].api_keys}
                   for port in targets)
    assert ours and set(ours) < set(kafka)
    for key, (lo, hi) in ours.items():
        k_lo, k_hi = kafka[key]
        assert k_lo <= lo <= hi <= k_hi, (key, (lo, hi), (k_lo, k_hi))
    # the lowest versions Kafka still serves that offsetlog does not: Produce 0-2 (records
    # in the old message formats, which offsetlog never reads); SaslHandshake 0 is served
    # (tests/security/test_sasl_sessions.py)
    assert {k: (kafka[k][0], lo - 1) for k, (lo, _) in ours.items() if lo > kafka[k][0]} == {
        0: (0, 2)}


def test_no_concurrent_transactions_while_a_transaction_ends(targets, gid):
    """Difference: Kafka answers CONCURRENT_TRANSACTIONS (retriable) to a producer's next
    request while a transaction's markers are being written after EndTxn; offsetlog writes
    them before it answers EndTxn, so the next request is answered at once. After the
    client's retries the answers are the same (the other cases compare them)."""
    from support.kafka_diff import Req as R
    init = R(22, 4, dict(transactional_id=gid, transaction_timeout=60_000, producer_id=-1,
                         producer_epoch=-1),
             save={"p": lambda r: r.producer_id, "e": lambda r: r.producer_epoch})
    add = R(25, 3, dict(transactional_id=gid, producer_id=lambda c: c["p"],
                        producer_epoch=lambda c: c["e"], group_id=gid))
    txn = R(28, 3, {**commit_body(gid), "transactional_id": gid,
                    "producer_id": lambda c: c["p"], "producer_epoch": lambda c: c["e"]})
    end = R(26, 3, dict(transactional_id=gid, producer_id=lambda c: c["p"],
                        producer_epoch=lambda c: c["e"], committed=True))
    again = R(25, 3, dict(transactional_id=gid, producer_id=lambda c: c["p"],
                          producer_epoch=lambda c: c["e"], group_id=gid), retry=False)
    kafka_answers, _ = run(targets[0], [init, add, txn, end, again])
    ours_answers, ours_ctx = run(targets[1], [init, add, txn, end, again])
    assert normalise(ours_answers)[4]["error_code"] == "NONE"
    assert "_retried" not in ours_ctx  # nothing was ever CONCURRENT_TRANSACTIONS here
    assert normalise(kafka_answers)[4]["error_code"] in ("CONCURRENT_TRANSACTIONS", "NONE")


def create_topics(v, name, partitions=2, replication=1, validate=False):
    return Req(19, v, dict(topics=[dict(name=name, num_partitions=partitions,
                                        replication_factor=replication, assignments=[],
                                        configs=[])],
                           timeout=5000, validate_only=validate))


def _config_names(answers):
    """A created topic's configs as their names (Kafka lists its topic configs' defaults)."""
    for a in answers:
        for t in a.get("topics", []):
            if t.get("configs"):
                t["configs"] = sorted(c["name"] for c in t["configs"])
    return answers


#: Difference: CreateTopics v5+ lists the new topic's configs. Kafka has these, with their
#: defaults; offsetlog stores no messages, so no topic config applies and it lists none
#: (DescribeConfigs of a topic says the same).
KAFKA_TOPIC_CONFIGS = sorted([
    "cleanup.policy", "compression.gzip.level", "compression.lz4.level", "compression.type",
    "compression.zstd.level", "delete.retention.ms", "errors.deadletterqueue.group.enable",
    "file.delete.delay.ms", "flush.messages", "flush.ms",
    "follower.replication.throttled.replicas", "index.interval.bytes",
    "leader.replication.throttled.replicas", "local.retention.bytes", "local.retention.ms",
    "max.compaction.lag.ms", "max.decompressed.message.bytes", "max.message.bytes",
    "message.timestamp.after.max.ms", "message.timestamp.before.max.ms",
    "message.timestamp.type", "min.cleanable.dirty.ratio", "min.compaction.lag.ms",
    "min.insync.replicas", "preallocate", "remote.copy.lag.bytes", "remote.copy.lag.ms",
    "remote.log.copy.disable", "remote.log.delete.on.disable", "remote.storage.enable",
    "retention.bytes", "retention.ms", "segment.bytes", "segment.index.bytes",
    "segment.jitter.ms", "segment.ms", "unclean.leader.election.enable"])


@pytest.mark.parametrize("v", range(2, 8))
def test_create_topics_right_and_wrong(targets, gid, v):
    steps = [create_topics(v, gid), create_topics(v, gid),
             create_topics(v, gid + "-none", partitions=0),
             create_topics(v, gid + "-rf", replication=3),
             create_topics(v, gid + "-check", validate=True),
             create_topics(v, gid + "-default", partitions=-1, replication=-1),
             # (Kafka's broker learns of new topics from its controller a moment later)
             Poll(3, 9, metadata(9, (gid, gid + "-default")).body,
                  until=lambda r: all(int(t.error_code) == 0 for t in r.topics)),
             metadata(9, (gid + "-check",))]
    configs = {f"{i}.topics.0.configs": (KAFKA_TOPIC_CONFIGS, []) for i in (0, 4, 5)} \
        if v >= 5 else {}
    compare(*targets, steps, view=lambda a: _sorted_topics(_config_names(a)), known=configs,
            check=lambda a: [expect(f"{i}.topics.0.error_code", code)(a) for i, code in (
                (1, "TOPIC_ALREADY_EXISTS"), (2, "INVALID_PARTITIONS"),
                (3, "INVALID_REPLICATION_FACTOR"), (4, "NONE"),
                (7, "UNKNOWN_TOPIC_OR_PARTITION"))])
