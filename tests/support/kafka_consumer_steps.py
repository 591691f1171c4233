"""Building blocks of the differential sessions of the consumer group protocol (KIP-848):
ConsumerGroupHeartbeat requests as data (tests/support/kafka_diff), and the view that
compares what Kafka 4.4 and offsetlog answer alike."""

from __future__ import annotations

from support.kafka_diff import KEEP, Req

HB, DESCRIBE, COMMIT, FETCH = 68, 69, 8, 9


def owned_of(name):
    return lambda c: c.get(name, [])


def save_owned(name):
    """Save the assignment a heartbeat answer carries as ``name`` (the partitions the member
    then owns); an answer without one leaves the last."""
    def get(answer):
        if answer.assignment is None:
            return KEEP
        return [dict(topic_id=t.topic_id, partitions=list(t.partitions))
                for t in answer.assignment.topic_partitions]
    return {name: get}


def epoch_of(name):
    """Save the member epoch an accepted heartbeat answers as ``name``."""
    return {name: lambda answer: KEEP if int(answer.error_code) else answer.member_epoch}


def hb(g, member, epoch, *, owned=None, join=False, conn="a", save=None, inst=None,
       assignor="range", topics=("orders",), **extra):
    body = dict(group_id=g, member_id=member, member_epoch=epoch, instance_id=inst,
                topic_partitions=owned)
    if join:
        body.update(rebalance_timeout=30_000, subscribed_topic_names=list(topics),
                    server_assignor=assignor, topic_partitions=[])
    body.update(extra)
    return Req(HB, 1, body, conn=conn, save=save)


def without_interval(answers):
    """The answers in full but for ConsumerGroupHeartbeat's interval (offsetlog answers
    shorter ones while a member waits: docs/GROUPS.md, "Heartbeat intervals"). The test
    broker assigns in the heartbeat, as offsetlog does, so epochs and assignments compare."""
    return [{k: v for k, v in a.items() if k != "heartbeat_interval"}
            if isinstance(a, dict) and "heartbeat_interval" in a else a for a in answers]


def codes(answers):
    """Error codes, and the epochs of leaves (negative): what the cases check of Kafka's
    answers (which are compared in full, ``without_interval``)."""
    return [(a.get("error_code"), a["member_epoch"] if a.get("member_epoch", 0) < 0 else None)
            if "member_epoch" in a else a.get("error_code") for a in answers]
