"""Apache Kafka as the judge of KIP-848's online migration between the classic and the consumer
group protocol: the same raw JoinGroup / SyncGroup / Heartbeat / LeaveGroup /
ConsumerGroupHeartbeat sessions against the real broker (group.consumer.migration.policy
bidirectional, its default) and ``offsetlog serve``, answers compared after normalisation
(support/kafka_diff.py).

What is compared: every answer in full (``whole``: generations, members, assignments and
epochs too, the test broker computing targets in the heartbeat as offsetlog does) but for
ConsumerGroupHeartbeat's interval and ListGroups (which lists every group on the broker); each
case's checks read a narrower view of Kafka's answers (``codes``, the group type ListGroups
shows), so that a case cannot pass by both targets saying nothing."""

from __future__ import annotations

import pytest

from offsetlog.group.consumer_protocol import encode_subscription
from support.kafka_consumer_steps import without_interval
from support.kafka_diff import Recv, Req, Send, compare
from support.kafka_steps import (
    await_state,
    formed,
    heartbeat,
    join,
    join_body,
    leave,
    protocols,
    ref,
    sync,
)

HB, CG_DESCRIBE, LIST = 68, 69, 16


def hb(g, member, epoch, *, join_=False, conn="b", save=None, owned=None, **extra):
    body = dict(group_id=g, member_id=member, member_epoch=epoch, instance_id=None,
                topic_partitions=owned)
    if join_:
        body.update(rebalance_timeout=30_000, subscribed_topic_names=["orders"],
                    server_assignor="range", topic_partitions=[])
    body.update(extra)
    return Req(HB, 1, body, conn=conn, save=save)


def cg_describe(g):
    return Req(CG_DESCRIBE, 1, dict(group_ids=[g], include_authorized_operations=False))


def list_types(types):
    return Req(LIST, 5, dict(states_filter=[], types_filter=types))


def is_list(answer) -> bool:
    """A ListGroups answer (the groups of DescribeGroups and ConsumerGroupDescribe have
    members)."""
    return ("groups" in answer and "member_epoch" not in answer
            and not any("members" in g for g in answer["groups"]))


def codes(answers):
    """Each answer's error code (a leave's epoch too; LeaveGroup's members' codes too);
    ListGroups answers are left out (``by_gid`` looks at them)."""
    out = []
    for a in answers:
        if is_list(a):
            continue
        code = a.get("error_code")
        if "member_epoch" in a and a.get("member_epoch", 0) < 0:
            out.append((code, a["member_epoch"]))
        elif a.get("members") and "error_code" in a["members"][0]:
            out.append((code, [m["error_code"] for m in a["members"]]))
        else:
            out.append(code)
    return out


def whole(answers):
    """Every answer but ListGroups' (which lists every group on the broker) in full, but for
    ConsumerGroupHeartbeat's interval: JoinGroup's generations and members, SyncGroup's
    assignments, epochs (the test broker assigns in the heartbeat, as offsetlog does)."""
    return without_interval([a for a in answers if not is_list(a)])


def by_gid(gid):
    """Per ListGroups answer: (type, protocol type) of the group ``gid``, if listed."""
    return lambda answers: [[(g.get("group_type"), g.get("protocol_type"))
                             for g in a["groups"] if g["group_id"] == gid]
                            for a in answers if is_list(a)]


def expect_codes(expected):
    """A check of the codes (the view's answers) Kafka gave."""
    def check(kafka_codes):
        assert kafka_codes == expected, kafka_codes
    return check


def test_upgrade_keeps_the_classic_member(targets, gid):
    """A consumer-protocol member joins a Stable classic group: the group becomes a consumer
    group, the classic member is told to rejoin and does, as a classic member of it."""
    x = f"{gid}-x"
    steps = formed(gid, 5) + [
        hb(gid, x, 0, join_=True),
        heartbeat(gid, 4),                              # generation 1 is behind: rejoin
        *join(gid, 7, member=ref("m")),                 # rejoins with its id
        list_types(["consumer"]),
        list_types(["classic"]),
        sync(gid, 5),                                   # at its new generation
        heartbeat(gid, 4),
    ]

    def view(answers):
        rejoin = answers[5]
        joined = {k: rejoin[k] for k in ("error_code", "protocol_type", "protocol_name",
                                         "leader", "members")}
        return [codes(answers), joined, by_gid(gid)(answers)]
    kafka = compare(*targets, steps, whole=whole, view=view)
    assert kafka[0] == ["MEMBER_ID_REQUIRED", "NONE", "NONE", "NONE", "REBALANCE_IN_PROGRESS",
                        "NONE", "NONE", "NONE"], kafka[0]
    assert kafka[1]["protocol_name"] == "range" and kafka[1]["members"] == []
    assert kafka[2] == [[("consumer", "consumer")], []], kafka[2]


def test_classic_member_in_a_consumer_group_as_describe_shows_it(targets, gid):
    x = f"{gid}-x"
    steps = formed(gid, 5) + [hb(gid, x, 0, join_=True), cg_describe(gid)]

    def view(answers):
        group = answers[-1]["groups"][0]
        members = sorted(({k: m[k] for k in ("member_type", "subscribed_topic_names",
                                              "instance_id", "rack_id")}
                          for m in group["members"]), key=repr)
        return [group["error_code"], group["group_state"] != "Empty", members]
    kafka = compare(*targets, steps, whole=whole, view=view)
    assert sorted(m["member_type"] for m in kafka[2]) == [0, 1], kafka


def test_what_a_classic_member_is_refused_in_a_consumer_group(targets, gid):
    x = f"{gid}-x"
    steps = formed(gid, 5) + [
        hb(gid, x, 0, join_=True),
        heartbeat(gid, 4, gen=lambda c: c["m_gen"] + 7),               # wrong generation
        heartbeat(gid, 4, member=x, gen=1),                             # not a classic member
        heartbeat(gid, 4, member="no-such-member", gen=1),
        Req(11, 5, join_body(gid, ptype="connect"), conn="c"),          # another protocol type
        Req(11, 5, join_body(gid, protos=protocols("roundrobin")), conn="c"),  # not in common
        Req(11, 5, join_body(gid), conn="c"),                           # needs a member id
        sync(gid, 5, gen=lambda c: c["m_gen"] + 7),                     # wrong generation
        leave(gid, 3, member="no-such-member"),
    ]
    kafka = compare(*targets, steps, whole=whole, view=codes)
    assert kafka == ["MEMBER_ID_REQUIRED", "NONE", "NONE", "NONE", "ILLEGAL_GENERATION", "UNKNOWN_MEMBER_ID",
                     "UNKNOWN_MEMBER_ID", "INCONSISTENT_GROUP_PROTOCOL",
                     "INCONSISTENT_GROUP_PROTOCOL", "MEMBER_ID_REQUIRED", "ILLEGAL_GENERATION",
                     ("NONE", ["UNKNOWN_MEMBER_ID"])], kafka


def test_classic_leave_removes_a_consumer_protocol_member(targets, gid):
    """Kafka 4.4's LeaveGroup removes any member of a consumer group (admin tools remove
    members with it); the last consumer-protocol one leaving so downgrades the group."""
    x = f"{gid}-x"
    steps = formed(gid, 5) + [
        hb(gid, x, 0, join_=True),
        leave(gid, 3, member=x),
        hb(gid, x, 1, owned=[]),
        list_types(["consumer"]),
        list_types(["classic"]),
        heartbeat(gid, 4),
    ]
    kafka = compare(*targets, steps, whole=whole, view=lambda a: [codes(a), by_gid(gid)(a)])
    assert kafka == [["MEMBER_ID_REQUIRED", "NONE", "NONE", "NONE", ("NONE", ["NONE"]),
                      "GROUP_ID_NOT_FOUND", "ILLEGAL_GENERATION"],
                     [[], [("classic", "consumer")]]], kafka


def test_what_a_consumer_member_is_refused_by_a_classic_group(targets, gid):
    """A classic group of another protocol type (its member joined: Kafka refuses its sync of
    "consumer") is not upgraded; a heartbeat with an epoch finds no consumer group either."""
    steps = formed(gid, 5, ptype="connect") + [
        hb(gid, f"{gid}-x", 0, join_=True),
        hb(f"{gid}", f"{gid}-y", 3, owned=[]),
    ]
    compare(*targets, steps, whole=whole, view=codes, check=expect_codes(
        ["MEMBER_ID_REQUIRED", "NONE", "INCONSISTENT_GROUP_PROTOCOL", "GROUP_ID_NOT_FOUND",
         "GROUP_ID_NOT_FOUND"]))


def test_downgrade_when_the_consumer_member_leaves(targets, gid):
    """The last consumer-protocol member leaves: the group is classic again and rebalances;
    the classic member rejoins and leads the new generation."""
    x = f"{gid}-x"
    steps = formed(gid, 5) + [
        hb(gid, x, 0, join_=True, save={"x_epoch": lambda r: r.member_epoch}),
        heartbeat(gid, 4),                                            # rejoin
        hb(gid, x, -1),                                               # the last one leaves
        heartbeat(gid, 4),                              # generation 1 is not the group epoch
        list_types(["classic"]),
        *join(gid, 5, member=ref("m")),
    ]

    def view(answers):
        rejoin = answers[-1]
        return [codes(answers), by_gid(gid)(answers),
                rejoin["leader"] == rejoin["member_id"], len(rejoin["members"])]
    kafka = compare(*targets, steps, whole=whole, view=view)
    assert kafka[0] == ["MEMBER_ID_REQUIRED", "NONE", "NONE", "NONE", "REBALANCE_IN_PROGRESS",
                        ("NONE", -1), "ILLEGAL_GENERATION", "NONE"], kafka[0]
    assert kafka[1] == [[("classic", "consumer")]] and kafka[2:] == [True, 1], kafka


def test_empty_groups_of_the_other_protocol_are_taken_over(targets, gid):
    """An empty classic group becomes a consumer group when a consumer-protocol member joins,
    and an empty consumer group a classic group when a classic member joins."""
    other = f"{gid}-2"
    x = f"{gid}-x"
    steps = formed(gid, 5) + [
        leave(gid, 3),
        hb(gid, x, 0, join_=True),
        list_types(["consumer"]),
        hb(other, x, 0, join_=True),
        hb(other, x, -1),
        *join(other, 5, as_="k", conn="c"),
        list_types(["classic"]),
    ]

    def view(answers):
        return [codes(answers), by_gid(gid)(answers), [
            [(g["group_type"], g["protocol_type"]) for g in a["groups"] if g["group_id"] == other]
            for a in answers if "groups" in a and "member_epoch" not in a]]
    kafka = compare(*targets, steps, whole=whole, view=view)
    assert kafka[0] == ["MEMBER_ID_REQUIRED", "NONE", "NONE", ("NONE", ["NONE"]), "NONE", "NONE",
                        ("NONE", -1),
                        "MEMBER_ID_REQUIRED", "NONE"], kafka[0]
    assert kafka[1] == [[("consumer", "consumer")], []], kafka[1]
    assert kafka[2] == [[], [("classic", "consumer")]], kafka[2]


@pytest.mark.parametrize("offset_by", ["member", "stranger"])
def test_classic_member_commits_with_its_generation(targets, gid, offset_by):
    """OffsetCommit of a classic member of a consumer group: fenced by generation = member
    epoch (ILLEGAL_GENERATION), an unknown member by UNKNOWN_MEMBER_ID."""
    from support.kafka_steps import commit
    x = f"{gid}-x"
    member = ref("m") if offset_by == "member" else "no-such-member"
    steps = formed(gid, 5) + [
        hb(gid, x, 0, join_=True),
        commit(gid, 8, gen=lambda c: c["m_gen"] + 7, member=member),
    ]

    def view(answers):
        return [a["topics"][0]["partitions"][0]["error_code"] for a in answers[-1:]]
    kafka = compare(*targets, steps, whole=whole, view=view)
    assert kafka == ["ILLEGAL_GENERATION" if offset_by == "member" else "UNKNOWN_MEMBER_ID"]


def test_upgrade_answers_a_parked_join_rebalance_in_progress(targets, gid):
    """A classic group rebalancing (a second member's JoinGroup waits for the first to rejoin)
    is upgraded: the waiting JoinGroup is answered REBALANCE_IN_PROGRESS."""
    k_join = join(gid, 5, as_="k", conn="c")
    steps = formed(gid, 5) + [
        k_join[0],                                              # MEMBER_ID_REQUIRED
        Send(11, 5, join_body(gid, ref("k")), conn="c"),        # parked
        await_state(gid, "PreparingRebalance"),
        hb(gid, f"{gid}-x", 0, join_=True),
        Recv(conn="c"),
    ]
    kafka = compare(*targets, steps, whole=whole, view=lambda a: codes(a[:4] + a[5:]))
    assert kafka == ["MEMBER_ID_REQUIRED", "NONE", "NONE", "MEMBER_ID_REQUIRED", "NONE",
                     "REBALANCE_IN_PROGRESS"], kafka


def test_static_classic_member_in_a_consumer_group(targets, gid):
    """A static classic member joins a consumer group, syncs, heartbeats; a new process of it
    (no member id) takes its place and fences the old one; an operator removes it by its
    instance id."""
    x = f"{gid}-x"
    steps = [
        hb(gid, x, 0, join_=True),
        Req(11, 5, join_body(gid, inst="S"), save={"m": lambda r: r.member_id,
                                                   "m_gen": lambda r: r.generation_id}),
        sync(gid, 5, inst="S"),
        heartbeat(gid, 4, inst="S"),
        Req(11, 5, join_body(gid, inst="S"), conn="c", save={
            "m2": lambda r: r.member_id, "m2_gen": lambda r: r.generation_id}),
        heartbeat(gid, 4, inst="S"),                                  # the old process
        heartbeat(gid, 4, "m2", inst="S", conn="c"),
        Req(13, 3, dict(group_id=gid, members=[dict(member_id="", group_instance_id="S")])),
        heartbeat(gid, 4, "m2", inst="S", conn="c"),
    ]
    kafka = compare(*targets, steps, whole=whole, view=codes)
    assert kafka[:2] == ["NONE", "NONE"] and kafka[5] == "FENCED_INSTANCE_ID", kafka
    assert kafka[7:] == [("NONE", ["NONE"]), "UNKNOWN_MEMBER_ID"], kafka


def test_classic_process_replacing_the_static_consumer_member_downgrades(targets, gid):
    """The last consumer-protocol member is static; a classic process with its instance id
    joins in its place: the group becomes a classic group, without a rebalance. The JoinGroup
    is answered with the group's generation, and the process's SyncGroup at it is taken.
    (Kafka 4.4 assigning off the request path, its default, answers generation 0 instead, so
    the SyncGroup is ILLEGAL_GENERATION and the process joins again.)"""
    x = f"{gid}-x"
    steps = [
        hb(gid, x, 0, join_=True, instance_id="I"),
        *join(gid, 5, conn="a"),                                   # a classic member, m
        Req(11, 5, join_body(gid, inst="I"), conn="c", save={
            "k": lambda r: r.member_id, "k_gen": lambda r: r.generation_id}),
        list_types(["classic"]),
        list_types(["consumer"]),
        sync(gid, 5, "k", inst="I", conn="c"),
    ]
    kafka = compare(*targets, steps, whole=whole, view=lambda a: [codes(a), by_gid(gid)(a),
                                                     a[3]["generation_id"]])
    assert kafka == [["NONE", "MEMBER_ID_REQUIRED", "NONE", "NONE", "NONE"],
                     [[("classic", "consumer")], []], 3], kafka


def _replaced_with_a_stale_target(gid: str, *, left: bool) -> list:
    """The static consumer-protocol member x ("I") and a classic member m; then a classic
    process joins as "I" while the group's target is behind its epoch: because another
    classic member n joined and left just before (``left``), or because the process
    subscribes to a topic more than x did (its own join bumps the epoch). (n is static, "N":
    range orders static members by instance id before the others by member id, and member
    ids are random, so with two dynamic classic members who got which range was chance.)"""
    both = protocols(metadata=encode_subscription(["orders", "events"]))
    steps = [hb(gid, f"{gid}-x", 0, join_=True, instance_id="I"), *join(gid, 5, conn="a")]
    if left:
        steps += [*join(gid, 5, as_="n", conn="e", inst="N"),
                  leave(gid, 3, "n", conn="e", inst="N")]
    return steps + [
        Req(11, 5, join_body(gid, inst="I", protos=None if left else both), conn="c",
            save={"k": lambda r: r.member_id, "k_gen": lambda r: r.generation_id}),
        Req(15, 5, dict(groups=[gid], include_authorized_operations=False), conn="d"),
        list_types(["classic"]),
        sync(gid, 5, "k", inst="I", conn="c"),
        heartbeat(gid, 4, "m", conn="a"),
        # the rebalance completes once both rejoin
        Send(11, 5, join_body(gid, ref("m")), conn="a"),
        Req(11, 5, join_body(gid, ref("k"), inst="I", protos=None if left else both),
            conn="c"),
        Recv(conn="a"),
    ]


@pytest.mark.parametrize("why", ["a leave", "a new subscription"])
def test_a_replacing_process_downgrades_a_stale_group_with_a_rebalance(targets, gid, why):
    """Kafka 4.4 (KAFKA-20273): a downgrade by a classic process replacing the last
    consumer-protocol member, while the group's target assignment is behind its epoch, leaves
    the stale target as the classic assignments and starts a rebalance: the process is
    answered generation 0 (its SyncGroup at it ILLEGAL_GENERATION), the group is
    PreparingRebalance at the generation it had, and the members rejoin."""
    steps = _replaced_with_a_stale_target(gid, left=why == "a leave")

    def view(answers):
        n = 2 if why == "a leave" else 0  # n's join and leave
        rest = answers[3 + n:]
        return [rest[0]["generation_id"], rest[1]["groups"][0]["group_state"],
                by_gid(gid)(answers), codes(rest[3:5])]
    kafka = compare(*targets, steps, whole=whole, view=view)
    stale_gen = "ILLEGAL_GENERATION" if why == "a leave" else "REBALANCE_IN_PROGRESS"
    assert kafka == [0, "PreparingRebalance", [[("classic", "consumer")]],
                     ["ILLEGAL_GENERATION", stale_gen]], kafka
