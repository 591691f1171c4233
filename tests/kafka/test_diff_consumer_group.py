"""Apache Kafka as the judge of the consumer group protocol (KIP-848): the same raw
ConsumerGroupHeartbeat / ConsumerGroupDescribe / OffsetCommit / OffsetFetch sessions against
the real broker and ``offsetlog serve``, answers compared after normalisation
(support/kafka_diff.py; topic ids are ``TOPIC_ID``, member ids placeholders).

Members name the ``range`` assignor, whose assignment is deterministic on both (Kafka's
``uniform`` walks members in hash order). Answers are compared in full but for the heartbeat
interval (``without_interval``): the test broker assigns in the heartbeat, as offsetlog does
(offsetlog.bench.kafka_broker.BASE_PROPERTIES); ``codes`` is what the cases check."""

from __future__ import annotations

import pytest

from support.kafka_consumer_steps import (
    COMMIT,
    DESCRIBE,
    FETCH,
    codes,
    epoch_of,
    hb,
    owned_of,
    save_owned,
    without_interval,
)
from support.kafka_diff import Req, at, compare


def describe(g, conn="a"):
    return Req(DESCRIBE, 1, dict(group_ids=[g], include_authorized_operations=False),
               conn=conn)


def check(**paths):
    def run(answers):
        for path, value in paths.items():
            assert at(answers, path.replace("__", ".").lstrip("_")) == value, path
    return run


def test_zombies_unknown_members_and_leaving(targets, gid):
    a = f"{gid}-a"
    steps = [
        hb(gid, a, 0, join=True, save=epoch_of("e")),
        hb(gid, a, lambda c: c["e"] + 5, owned=[]),          # a zombie from the future
        hb(gid, f"{gid}-nobody", 1, owned=[]),
        hb(gid, a, -1),                                      # leaves
        hb(gid, a, lambda c: c["e"], owned=[]),              # gone
        hb(gid, a, -1),                                      # leaves again
        hb(f"{gid}-x", a, 4, owned=[]),                      # a group nobody made
    ]
    compare(*targets, steps, view=without_interval, check=lambda k: codes(k) == [
        ("NONE", None), ("FENCED_MEMBER_EPOCH", None), ("UNKNOWN_MEMBER_ID", None),
        ("NONE", -1), ("UNKNOWN_MEMBER_ID", None), ("UNKNOWN_MEMBER_ID", None),
        ("GROUP_ID_NOT_FOUND", None)] or pytest.fail(repr(k)))


def test_requests_kafka_refuses(targets, gid):
    steps = [
        hb(gid, f"{gid}-a", 0, join=True, rebalance_timeout=-1),
        hb(gid, f"{gid}-a", 0, join=True, assignor="no-such-assignor"),
        hb(gid, f"{gid}-a", 0, join=True, subscribed_topic_names=None),
        hb(gid, "", 0, join=True),
        hb(gid, f"{gid}-a", -2),
        hb(f"{gid}-unknown", f"{gid}-a", 3, owned=[]),
        describe(f"{gid}-unknown"),
    ]
    compare(*targets, steps, check=check(
        _0__error_code="INVALID_REQUEST", _1__error_code="UNSUPPORTED_ASSIGNOR",
        _2__error_code="INVALID_REQUEST", _3__error_code="INVALID_REQUEST",
        _4__error_code="INVALID_REQUEST"))


def test_static_member_leaves_for_now_and_is_replaced(targets, gid):
    steps = [
        hb(gid, f"{gid}-a1", 0, join=True, inst="A"),
        hb(gid, f"{gid}-a1", -2, inst="A"),                       # leaves for now
        hb(gid, f"{gid}-a2", 0, join=True, inst="A", conn="b"),   # replaces it
        hb(gid, f"{gid}-a3", 0, join=True, inst="A", conn="c"),   # A is taken
        hb(gid, f"{gid}-a1", -2, inst="A"),                       # the old one: fenced
        hb(gid, f"{gid}-b", -2, inst="B"),                        # an instance id unknown
    ]
    compare(*targets, steps, view=without_interval, check=lambda k: codes(k) == [
        ("NONE", None), ("NONE", -2), ("NONE", None), ("UNRELEASED_INSTANCE_ID", None),
        ("FENCED_INSTANCE_ID", None), ("UNKNOWN_MEMBER_ID", None)] or pytest.fail(repr(k)))


def test_offset_commit_and_fetch_check_the_member_epoch(targets, gid):
    a = f"{gid}-a"

    def commit(epoch, member=a):
        return Req(COMMIT, 9, dict(group_id=gid, generation_id_or_member_epoch=epoch,
                                   member_id=member, group_instance_id=None, topics=[
                                       dict(name="orders", partitions=[dict(
                                           partition_index=0, committed_offset=5,
                                           committed_leader_epoch=-1,
                                           committed_metadata="")])]))

    def fetch(epoch, member=a):
        return Req(FETCH, 9, dict(require_stable=False, groups=[dict(
            group_id=gid, member_id=member, member_epoch=epoch,
            topics=[dict(name="orders", partition_indexes=[0])])]))

    e = ref_epoch = (lambda d: (lambda c: c["e"] + d))
    steps = [hb(gid, a, 0, join=True, save=epoch_of("e")), commit(e(0)), commit(e(1)),
             commit(1, member="nobody"), commit(-1, member=""), fetch(e(0)), fetch(e(1)),
             fetch(1, member="nobody"), fetch(-1, member=None)]
    del ref_epoch
    compare(*targets, steps, view=lambda answers: answers[1:], check=check(
        _0__topics__0__partitions__0__error_code="NONE",
        _1__topics__0__partitions__0__error_code="STALE_MEMBER_EPOCH",
        _2__topics__0__partitions__0__error_code="UNKNOWN_MEMBER_ID",
        _4__groups__0__topics__0__partitions__0__committed_offset=5,
        _5__groups__0__error_code="STALE_MEMBER_EPOCH"))


def test_list_and_describe_groups_show_the_type(targets, gid):
    steps = [hb(gid, f"{gid}-a", 0, join=True, inst="I"),
             Req(16, 5, dict(states_filter=[], types_filter=["consumer"])),
             Req(16, 5, dict(states_filter=[], types_filter=["classic"])),
             Req(15, 5, dict(groups=[gid], include_authorized_operations=False)),
             describe(gid)]

    def view(answers):
        listed = [[dict(g, group_state=None) for g in a["groups"] if g["group_id"] == gid]
                  for a in answers[1:3]]
        # the members as ConsumerGroupDescribe shows them, less epochs and assignments
        # (Kafka 4.4 assigns later, KIP-1263)
        members = [{k: v for k, v in m.items() if k not in (
            "member_epoch", "assignment", "target_assignment")}
            for m in answers[4]["groups"][0]["members"]]
        return listed + [answers[3], members]
    compare(*targets, steps, view=view, check=check(
        _0__0__group_type="consumer", _0__0__protocol_type="consumer", _1=[],
        _2__groups__0__group_state="Dead", _3__0__instance_id="I",
        _3__0__subscribed_topic_names=["orders"], _3__0__member_type=1))


def test_metadata_by_topic_id_with_an_empty_name(targets):
    """The Java client (4.4) on the consumer protocol looks up its assignment's topics by id
    with the name "" (librdkafka sends null): both are a lookup by id, on Kafka and here."""
    import socket

    from support.wire_raw import call

    answers = []
    for port in targets:
        with socket.create_connection(("127.0.0.1", port), timeout=10) as sock:
            tid = call(sock, 3, 12, topics=[dict(name="orders", topic_id=None)],
                       allow_auto_topic_creation=False,
                       include_topic_authorized_operations=False).topics[0].topic_id
            got = []
            for name in ("", None):
                r = call(sock, 3, 12, topics=[dict(name=name, topic_id=tid)],
                         allow_auto_topic_creation=False,
                         include_topic_authorized_operations=False)
                got.append([(int(t.error_code), t.name, t.topic_id == tid, len(t.partitions))
                            for t in r.topics])
            answers.append(got)
    assert answers[0] == answers[1] == [[(0, "orders", True, 4)]] * 2


def test_the_heartbeat_interval_answered(targets, gid):
    """A declared difference (docs/GROUPS.md, "Heartbeat intervals"): Kafka answers every
    heartbeat with group.consumer.heartbeat.interval.ms (5 s on both targets); offsetlog answers
    a member waiting for partitions another member owns, and a member told to revoke, with
    group.consumer.reconciliation.heartbeat.interval.ms (250 ms), so each comes back soon."""
    a, b = f"{gid}-a", f"{gid}-b"
    steps = [
        hb(gid, a, 0, join=True, save={**save_owned("a"), **epoch_of("ea")}),  # all of orders
        hb(gid, b, 0, join=True, conn="b"),            # range: orders-2,3 are b's, still a's
        hb(gid, a, lambda c: c["ea"], owned=owned_of("a")),  # a is told to give them up
    ]

    def view(answers):
        return [[x["error_code"], x["heartbeat_interval"]] for x in answers]
    compare(*targets, steps, view=view, known={"1.1": (5_000, 250), "2.1": (5_000, 250)},
            check=lambda k: k == [["NONE", 5_000]] * 3 or pytest.fail(repr(k)))


def test_delete_groups_and_offset_delete_of_a_consumer_group(targets, gid):
    """DeleteGroups refuses a consumer group with a member (NON_EMPTY_GROUP) and OffsetDelete
    a topic it subscribes to (GROUP_SUBSCRIBED_TO_TOPIC); once the member left, the group
    is deleted, offsets and all."""
    a = f"{gid}-a"
    commit = Req(COMMIT, 9, dict(group_id=gid, generation_id_or_member_epoch=lambda c: c["e"],
                                 member_id=a, group_instance_id=None, topics=[dict(
                                     name="orders", partitions=[dict(
                                         partition_index=0, committed_offset=5,
                                         committed_leader_epoch=-1, committed_metadata="")])]))
    delete_group = Req(42, 2, dict(groups_names=[gid]))
    delete_offset = Req(47, 0, dict(group_id=gid, topics=[dict(
        name="orders", partitions=[dict(partition_index=0)])]))
    fetch = Req(FETCH, 9, dict(require_stable=False, groups=[dict(
        group_id=gid, member_id=None, member_epoch=-1,
        topics=[dict(name="orders", partition_indexes=[0])])]))
    steps = [hb(gid, a, 0, join=True, save=epoch_of("e")), commit, delete_group,
             delete_offset, fetch, hb(gid, a, -1), delete_group, describe(gid), fetch]
    compare(*targets, steps, view=without_interval,
        check=check(_2__results__0__error_code="NON_EMPTY_GROUP",
                    _3__topics__0__partitions__0__error_code="GROUP_SUBSCRIBED_TO_TOPIC",
                    _4__groups__0__topics__0__partitions__0__committed_offset=5,
                    _6__results__0__error_code="NONE",
                    _7__groups__0__error_code="GROUP_ID_NOT_FOUND",
                    _8__groups__0__topics__0__partitions__0__committed_offset=-1))


def test_deletes_of_a_consumer_group_that_never_committed(targets, gid):
    a = f"{gid}-a"
    delete_offset = Req(47, 0, dict(group_id=gid, topics=[dict(
        name="orders", partitions=[dict(partition_index=0)])]))
    steps = [hb(gid, a, 0, join=True), delete_offset, hb(gid, a, -1), delete_offset,
             Req(42, 2, dict(groups_names=[gid])), describe(gid)]
    compare(*targets, steps, view=without_interval,
        check=check(_1__topics__0__partitions__0__error_code="GROUP_SUBSCRIBED_TO_TOPIC",
                    _3__error_code="NONE", _4__results__0__error_code="NONE",
                    _5__groups__0__error_code="GROUP_ID_NOT_FOUND"))


def test_a_consumer_protocol_member_commits_at_v9_or_above(targets, gid):
    """Kafka refuses a consumer-protocol member's OffsetCommit below v9 with
    UNSUPPORTED_VERSION, after it found the member and before it judges the epoch; an unknown
    member stays UNKNOWN_MEMBER_ID, a standalone commit of an empty group is taken. The
    commits at v9 first route the group, so the later ones reach the native request loop's
    plain commit, which must leave them to the Python path."""
    a = f"{gid}-a"

    def commit(v, epoch, member=a, offset=5):
        return Req(COMMIT, v, dict(group_id=gid, generation_id_or_member_epoch=epoch,
                                   generation_id=epoch, member_id=member,
                                   group_instance_id=None, retention_time=-1, topics=[dict(
                                       name="orders", partitions=[dict(
                                           partition_index=0, committed_offset=offset,
                                           committed_leader_epoch=-1, committed_metadata="",
                                           commit_timestamp=-1)])]))

    e = (lambda d: (lambda c: c["e"] + d))
    steps = [hb(gid, a, 0, join=True, save=epoch_of("e")), commit(9, e(0)), commit(9, e(0)),
             commit(8, e(0), offset=6), commit(2, e(0), offset=6), commit(8, e(-1)),
             commit(8, e(0), member="nobody"),
             Req(FETCH, 9, dict(require_stable=False, groups=[dict(
                 group_id=gid, member_id=None, member_epoch=-1,
                 topics=[dict(name="orders", partition_indexes=[0])])])),
             hb(gid, a, -1), commit(8, -1, member="", offset=7), commit(8, e(0), offset=8)]
    code = "_{}__topics__0__partitions__0__error_code".format
    compare(*targets, steps, view=lambda answers: answers[1:8] + answers[9:], check=check(**{
        code(0): "NONE", code(1): "NONE", code(2): "UNSUPPORTED_VERSION",
        code(3): "UNSUPPORTED_VERSION", code(4): "UNSUPPORTED_VERSION",
        code(5): "UNKNOWN_MEMBER_ID",
        "_6__groups__0__topics__0__partitions__0__committed_offset": 5,
        code(7): "NONE", code(8): "UNKNOWN_MEMBER_ID"}))


@pytest.mark.parametrize("v", [0, 3, 4])
def test_a_transactional_commit_to_a_consumer_group(targets, gid, v):
    """TxnOffsetCommit into a consumer-protocol group: a member's at its epoch is taken; at
    another epoch Kafka answers ILLEGAL_GENERATION (TxnOffsetCommit has no
    STALE_MEMBER_EPOCH); an unknown member is UNKNOWN_MEMBER_ID; one naming no member (v0-2
    cannot name one) is not checked against the group's members at all. Then the committed
    transaction's offsets are the last taken one's."""
    from support.kafka_steps import add_offsets, end, init, stable_fetch, txn_commit

    a, tid = f"{gid}-a", f"{gid}-t"
    e = (lambda d: (lambda c: c["e"] + d))
    steps = [hb(gid, a, 0, join=True, save=epoch_of("e")), init(tid, 4), add_offsets(tid, gid),
             txn_commit(tid, gid, v, gen=e(0), member=a, offset=5),
             txn_commit(tid, gid, v, gen=e(1), member=a, offset=6),
             txn_commit(tid, gid, v, gen=e(-1), member=a, offset=7),
             txn_commit(tid, gid, v, gen=e(0), member="nobody", offset=8),
             txn_commit(tid, gid, v, offset=9),
             end(tid, True), stable_fetch(gid, 9)]
    code = "_{}__topics__0__partitions__0__error_code".format
    member_fields = v >= 3
    compare(*targets, steps, view=lambda answers: answers[3:], check=check(**{
        code(0): "NONE", code(1): "ILLEGAL_GENERATION" if member_fields else "NONE",
        code(2): "ILLEGAL_GENERATION" if member_fields else "NONE",
        code(3): "UNKNOWN_MEMBER_ID" if member_fields else "NONE", code(4): "NONE",
        "_6__groups__0__topics__0__partitions__0__committed_offset": 9}))


def test_a_refused_member_commit_naming_unknown_partitions(targets, gid):
    """Kafka answers the partitions it refuses before asking its coordinator (an unknown
    topic, a partition the topic lacks) with their own code, whatever the coordinator then
    says of the member; the coordinator's refusal (UNKNOWN_MEMBER_ID, STALE_MEMBER_EPOCH,
    UNSUPPORTED_VERSION) covers the rest. A commit of unknown partitions only never asks the
    coordinator."""
    a = f"{gid}-a"
    known = dict(name="orders", partitions=[dict(
        partition_index=i, committed_offset=5, committed_leader_epoch=-1,
        committed_metadata="", commit_timestamp=-1) for i in (0, 99)])
    unknown = dict(name="no-such-topic", partitions=known["partitions"][:1])

    def commit(v, epoch, member=a, topics=(known, unknown)):
        return Req(COMMIT, v, dict(group_id=gid, generation_id_or_member_epoch=epoch,
                                   generation_id=epoch, member_id=member,
                                   group_instance_id=None, retention_time=-1,
                                   topics=list(topics)))

    e = (lambda d: (lambda c: c["e"] + d))
    steps = [hb(gid, a, 0, join=True, save=epoch_of("e")), commit(9, e(1)),
             commit(9, e(0), member="nobody"), commit(8, e(0)), commit(9, e(1), topics=[unknown]),
             commit(9, e(0))]
    refused = "UNKNOWN_TOPIC_OR_PARTITION"
    compare(*targets, steps, view=lambda answers: answers[1:], check=check(
        _0__topics__0__partitions__0__error_code=refused,
        _0__topics__0__partitions__1__error_code="STALE_MEMBER_EPOCH",
        _0__topics__1__partitions__0__error_code=refused,
        _1__topics__0__partitions__1__error_code="UNKNOWN_MEMBER_ID",
        _2__topics__0__partitions__1__error_code="UNSUPPORTED_VERSION",
        _3__topics__0__partitions__0__error_code=refused,
        _4__topics__0__partitions__1__error_code="NONE"))
