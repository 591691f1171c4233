"""Apache Kafka as the judge of offsets and the group admin calls: OffsetCommit,
OffsetFetch, OffsetDelete, DeleteGroups, ListGroups and FindCoordinator, right and wrong,
every version the clients use (support/kafka_diff.py runs each session on both targets)."""

from __future__ import annotations

import pytest

from support.kafka_diff import Req, at, compare
from support.kafka_steps import commit, commit_body, describe, fetch, formed, leave, ref

COMMIT_VERSIONS = range(2, 10)
FETCH_VERSIONS = range(1, 10)


def expect(**paths):
    def check(answers):
        for path, value in paths.items():
            assert at(answers, path.replace("__", ".").lstrip("_")) == value, path
    return check


def last(steps, path):
    return f"_{len(steps) - 1}__{path}"


@pytest.mark.parametrize("v", COMMIT_VERSIONS)
def test_commit_then_fetch_without_a_group(targets, gid, v):
    steps = [commit(gid, v, metadata="m"), fetch(gid, min(v, 9))]
    compare(*targets, steps, check=expect(_1__error_code="NONE") if v < 8 else None)


@pytest.mark.parametrize("v", COMMIT_VERSIONS)
def test_commit_to_an_unknown_topic(targets, gid, v):
    steps = [commit(gid, v, topic="no-such-topic"), fetch(gid, 5)]
    compare(*targets, steps, check=expect(
        _0__topics__0__partitions__0__error_code="UNKNOWN_TOPIC_OR_PARTITION"))


@pytest.mark.parametrize("v", COMMIT_VERSIONS)
def test_commit_to_a_partition_the_topic_lacks(targets, gid, v):
    steps = [commit(gid, v, partition=99), fetch(gid, 5)]
    compare(*targets, steps, check=expect(
        _0__topics__0__partitions__0__error_code="UNKNOWN_TOPIC_OR_PARTITION"))


@pytest.mark.parametrize("v", COMMIT_VERSIONS)
def test_commit_with_metadata_over_the_limit(targets, gid, v):
    steps = [commit(gid, v, metadata="x" * 4097), commit(gid, v, offset=9, metadata="y" * 4096,
                                                         conn="b"),
             fetch(gid, 5)]
    compare(*targets, steps, check=expect(
        _0__topics__0__partitions__0__error_code="OFFSET_METADATA_TOO_LARGE",
        _1__topics__0__partitions__0__error_code="NONE"))


# Difference: the empty group id (docs/PROTOCOL.md, "Where offsetlog answers differently").
# Kafka's coordinator keeps offsets for the group "" (clients refuse to use it since
# KIP-289); the store refuses an empty group id everywhere, so the server answers
# INVALID_GROUP_ID. Kafka's group "" is shared by every case that uses it: each case commits
# before it reads, so what Kafka answers does not depend on the order of cases.

@pytest.mark.parametrize("v", COMMIT_VERSIONS)
def test_commit_with_an_empty_group_id(targets, v):
    compare(*targets, [commit("", v)], known={
        "0.topics.0.partitions.0.error_code": ("NONE", "INVALID_GROUP_ID")})


@pytest.mark.parametrize("v", FETCH_VERSIONS)
def test_fetch_of_partitions_no_commit_can_name(targets, gid, v):
    # a negative partition and the topic "": no offset, beside one that has one; a topic
    # named again, and with no partition
    topics = (("orders", [-1, 0]), ("", [0]), ("orders", [-7]), ("orders", []))
    compare(*targets, [commit(gid, 8), fetch(gid, v, topics=topics)])


@pytest.mark.parametrize("v", COMMIT_VERSIONS)
def test_commit_with_a_generation_to_an_unknown_group(targets, gid, v):
    steps = [commit(gid, v, gen=1, member="no-such-member")]
    compare(*targets, steps)


@pytest.mark.parametrize("v", COMMIT_VERSIONS)
def test_commit_of_a_member_with_a_wrong_generation(targets, gid, v):
    steps = formed(gid, 5) + [commit(gid, v, gen=lambda c: c["m_gen"] + 1, member=ref("m")),
                              fetch(gid, 5)]
    compare(*targets, steps, check=expect(**{
        last(steps[:-1], "topics__0__partitions__0__error_code"): "ILLEGAL_GENERATION"}))


@pytest.mark.parametrize("v", COMMIT_VERSIONS)
def test_commit_of_an_unknown_member(targets, gid, v):
    steps = formed(gid, 5) + [commit(gid, v, gen=ref("m_gen"), member="no-such-member")]
    compare(*targets, steps, check=expect(**{
        last(steps, "topics__0__partitions__0__error_code"): "UNKNOWN_MEMBER_ID"}))


@pytest.mark.parametrize("v", COMMIT_VERSIONS)
def test_commit_of_a_member_then_fetch(targets, gid, v):
    steps = formed(gid, 5) + [commit(gid, v, gen=ref("m_gen"), member=ref("m"), epoch=3),
                              fetch(gid, 5), fetch(gid, 9)]
    compare(*targets, steps, check=expect(**{
        last(steps[:-2], "topics__0__partitions__0__error_code"): "NONE"}))


@pytest.mark.parametrize("v", [2, 5, 9])
def test_commit_without_a_generation_to_a_group_with_members(targets, gid, v):
    steps = formed(gid, 5) + [commit(gid, v, gen=-1, member="")]
    compare(*targets, steps)


@pytest.mark.parametrize("v", [2, 5, 8, 9])
def test_later_commits_of_a_group_answer_as_kafka(targets, gid, v):
    """A group's first commit takes the long way (the store checks its name then); its later
    plain ones take the native loop's (``wire_conn::plain_commit``, with the coordinator's
    check in the lone commit's lock hold): each case again, after a first commit."""
    steps = formed(gid, 5) + [
        commit(gid, v, gen=ref("m_gen"), member=ref("m")),  # the first: the long way
        commit(gid, v, gen=ref("m_gen"), member=ref("m"), offset=8),
        commit(gid, v, gen=lambda c: c["m_gen"] + 1, member=ref("m"), offset=9),
        commit(gid, v, gen=ref("m_gen"), member="no-such-member", offset=10),
        commit(gid, v, gen=-1, member="", offset=11),
        fetch(gid, 5)]
    first = len(formed(gid, 5))
    compare(*targets, steps, check=expect(**{
        f"_{first + i}__topics__0__partitions__0__error_code": code for i, code in enumerate(
            ("NONE", "NONE", "ILLEGAL_GENERATION", "UNKNOWN_MEMBER_ID"))}))


@pytest.mark.parametrize("v", FETCH_VERSIONS)
def test_fetch_of_an_unknown_group(targets, gid, v):
    compare(*targets, [fetch(gid, v)])


@pytest.mark.parametrize("v", FETCH_VERSIONS)
def test_fetch_of_an_unknown_topic(targets, gid, v):
    steps = [commit(gid, 8), fetch(gid, v, topics=(("no-such-topic", [0]), ("orders", [0])))]
    compare(*targets, steps)


@pytest.mark.parametrize("v", range(2, 10))
def test_fetch_of_all_topics(targets, gid, v):
    steps = [commit(gid, 8), commit(gid, 8, topic="events", partition=1, offset=3),
             fetch(gid, v, topics=None)]
    compare(*targets, steps)


EMPTY_GROUP_FETCHED = [{"name": "orders", "partitions": [
    {"partition_index": 0, "committed_offset": 7, "committed_leader_epoch": -1, "metadata": "",
     "error_code": "NONE"},
    {"partition_index": 1, "committed_offset": -1, "committed_leader_epoch": -1, "metadata": "",
     "error_code": "NONE"}]}]


@pytest.mark.parametrize("v", FETCH_VERSIONS)
def test_fetch_with_an_empty_group_id(targets, v):
    fetched = [{**t, "partitions": [{k: x for k, x in p.items()
                                     if k != "committed_leader_epoch" or v >= 5}
                                    for p in t["partitions"]]} for t in EMPTY_GROUP_FETCHED]
    top = "1.groups.0." if v >= 8 else "1."
    compare(*targets, [commit("", 8, conn="b"), fetch("", v)], known={
        "0.topics.0.partitions.0.error_code": ("NONE", "INVALID_GROUP_ID"),
        top + "topics": (fetched, []),
        **({top + "error_code": ("NONE", "INVALID_GROUP_ID")} if v >= 2 else {})})


@pytest.mark.parametrize("v", [0, 1, 2])
def test_delete_groups_with_an_empty_group_id(targets, v):
    compare(*targets, [commit("", 8), Req(42, v, dict(groups_names=[""]))], known={
        "0.topics.0.partitions.0.error_code": ("NONE", "INVALID_GROUP_ID"),
        "1.results.0.error_code": ("NONE", "INVALID_GROUP_ID")})


@pytest.mark.parametrize("v", [0, 1, 2, 3, 4, 5])
def test_list_groups_shows_a_stable_and_an_offsets_only_group(targets, gid, v):
    other = gid + "-o"
    steps = formed(gid, 5) + [commit(other, 8),
                              Req(16, v, dict(states_filter=[], types_filter=[])),
                              Req(16, v, dict(states_filter=["Stable"], types_filter=[])),
                              Req(16, v, dict(states_filter=[], types_filter=["classic"]))]

    def mine(answers):  # other cases' groups are listed too: keep this case's
        for a in answers[-3:]:
            a["groups"] = sorted((g for g in a["groups"] if g["group_id"] in (gid, other)),
                                 key=lambda g: g["group_id"])
        return answers

    compare(*targets, steps, view=mine)


@pytest.mark.parametrize("v", [0, 1, 2])
def test_delete_groups_empty_non_empty_and_unknown(targets, gid, v):
    empty, unknown = gid + "-e", gid + "-u"
    steps = formed(gid, 5) + [commit(empty, 8),
                              Req(42, v, dict(groups_names=[gid, empty, unknown])),
                              fetch(empty, 5), describe(gid, 5)]
    compare(*targets, steps, check=expect(**{
        last(steps[:-2], "results__0__error_code"): "NON_EMPTY_GROUP",     # sorted by id
        last(steps[:-2], "results__1__error_code"): "NONE",
        last(steps[:-2], "results__2__error_code"): "GROUP_ID_NOT_FOUND"}))


@pytest.mark.parametrize("v", [0, 1, 2])
def test_delete_a_group_after_its_member_left(targets, gid, v):
    steps = formed(gid, 5) + [commit(gid, 8, gen=ref("m_gen"), member=ref("m")), leave(gid, 5),
                              Req(42, v, dict(groups_names=[gid])), describe(gid, 5),
                              fetch(gid, 5)]
    compare(*targets, steps)


def _offset_delete(g, topics):
    return Req(47, 0, dict(group_id=g, topics=[dict(name=t, partitions=[dict(partition_index=p)
                                                                        for p in ps])
                                               for t, ps in topics]))


def test_offset_delete_of_a_subscribed_topic(targets, gid):
    steps = formed(gid, 5) + [commit(gid, 8, gen=ref("m_gen"), member=ref("m")),
                              commit(gid, 8, gen=ref("m_gen"), member=ref("m"), topic="events"),
                              _offset_delete(gid, [("orders", [0]), ("events", [0])]),
                              fetch(gid, 5, topics=None)]
    compare(*targets, steps, check=expect(**{
        last(steps[:-1], "topics__0__partitions__0__error_code"): "GROUP_SUBSCRIBED_TO_TOPIC"}))


def test_offset_delete_of_an_unknown_group(targets, gid):
    compare(*targets, [_offset_delete(gid, [("orders", [0])])],
            check=expect(_0__error_code="GROUP_ID_NOT_FOUND"))


def _topics_by_name(answers):
    """OffsetDelete's topics in name order (Kafka answers the unknown ones first)."""
    for a in answers:
        if "topics" in a and all("name" in t for t in a["topics"] or []):
            a["topics"] = sorted(a["topics"], key=lambda t: t["name"])
    return answers


def test_offset_delete_of_an_empty_group(targets, gid):
    steps = [commit(gid, 8), commit(gid, 8, partition=1),
             _offset_delete(gid, [("orders", [0]), ("no-such-topic", [0])]),
             fetch(gid, 5, topics=None)]
    compare(*targets, steps, view=_topics_by_name, check=expect(
        _2__topics__0__partitions__0__error_code="UNKNOWN_TOPIC_OR_PARTITION"))


def test_offset_delete_with_an_empty_group_id(targets):
    compare(*targets, [commit("", 8), _offset_delete("", [("orders", [0])])], known={
        "0.topics.0.partitions.0.error_code": ("NONE", "INVALID_GROUP_ID")},
        check=expect(_1__error_code="INVALID_GROUP_ID"))  # here Kafka refuses "" too


@pytest.mark.parametrize("v", range(0, 6))
def test_find_the_coordinator_of_a_group(targets, gid, v):
    compare(*targets, [Req(10, v, dict(key=gid, key_type=0, coordinator_keys=[gid]))])


@pytest.mark.parametrize("v", range(1, 6))
def test_find_the_coordinator_of_a_transactional_id(targets, gid, v):
    compare(*targets, [Req(10, v, dict(key=gid, key_type=1, coordinator_keys=[gid]))])


@pytest.mark.parametrize("v", [4, 5])
def test_find_coordinators_batched(targets, gid, v):
    compare(*targets, [Req(10, v, dict(key_type=0, coordinator_keys=[gid, gid + "-2", ""]))])


@pytest.mark.parametrize("v", range(1, 4))
def test_find_the_coordinator_of_an_empty_group_id(targets, v):
    compare(*targets, [Req(10, v, dict(key="", key_type=0))])


@pytest.mark.parametrize("v", [8, 9])
def test_fetch_of_several_groups_at_once(targets, gid, v):
    other, unknown = gid + "-2", gid + "-3"
    ts = [dict(name="orders", partition_indexes=[0, 1])]
    steps = [commit(gid, 8), commit(other, 8, offset=11, partition=1),
             Req(9, v, dict(require_stable=False, groups=[
                 dict(group_id=g, member_id=None, member_epoch=-1, topics=t)
                 for g, t in ((gid, ts), (other, None), (unknown, ts))]))]
    compare(*targets, steps)


@pytest.mark.parametrize("v", [2, 8, 9])
def test_commit_answer_order_with_refused_partitions(targets, gid, v):
    """Kafka answers the partitions it refuses before asking its coordinator (an unknown
    topic or partition) first, topic by topic, then merges in the coordinator's answers (a
    metadata too long among them) in request order."""
    parts = [dict(partition_index=0, committed_offset=5, committed_leader_epoch=-1,
                  committed_metadata="ok", commit_timestamp=-1),
             dict(partition_index=9, committed_offset=1, committed_leader_epoch=-1,
                  committed_metadata="", commit_timestamp=-1),
             dict(partition_index=1, committed_offset=1, committed_leader_epoch=-1,
                  committed_metadata="x" * 4097, commit_timestamp=-1)]
    body = commit_body(gid)
    body["topics"] = [dict(name="events", partitions=parts[:1]),
                      dict(name="orders", partitions=parts),
                      dict(name="no-such-topic", partitions=parts[:1])]
    compare(*targets, [Req(8, v, body)], check=expect(
        _0__topics__0__name="orders", _0__topics__0__partitions__0__partition_index=9,
        _0__topics__2__name="events"))


def test_a_member_commit_to_a_group_of_offsets_only(targets, gid):
    """A group with offsets and no group metadata is Kafka's *simple group*, an Empty classic
    group without members: a commit naming a member or a generation is UNKNOWN_MEMBER_ID
    at every version, not the ILLEGAL_GENERATION / GROUP_ID_NOT_FOUND of a group that does
    not exist (found by test_diff_random_sessions.py: a group deleted, then committed to)."""
    steps = [commit(gid, 8)] + [commit(gid, v, gen=1, member="gone") for v in (2, 8, 9)]
    compare(*targets, steps, check=expect(
        _1__topics__0__partitions__0__error_code="UNKNOWN_MEMBER_ID",
        _3__topics__0__partitions__0__error_code="UNKNOWN_MEMBER_ID"))


def test_a_group_whose_last_offset_was_deleted(targets, gid):
    """Kafka keeps a simple group (one made by a standalone commit) after OffsetDelete took
    its last offset, Empty, until the retention pass or DeleteGroups drops it; offsetlog
    knows a group by its group metadata or its offsets, so the group is gone at once: it is
    described as Dead, and DeleteGroups of it is GROUP_ID_NOT_FOUND (docs/PROTOCOL.md)."""
    steps = [commit(gid, 8), _offset_delete(gid, [("orders", [0])]), describe(gid, 5),
             Req(42, 2, dict(groups_names=[gid])), describe(gid, 5)]
    compare(*targets, steps, known={
        "2.groups.0.group_state": ("Empty", "Dead"),
        "3.results.0.error_code": ("NONE", "GROUP_ID_NOT_FOUND")},
        check=expect(_1__error_code="NONE", _4__groups__0__group_state="Dead"))
