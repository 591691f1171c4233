"""Retention of group-managed offsets (KIP-211): the pure rules and the coordinator's pass."""

from __future__ import annotations

import pytest

from offsetlog.group import (
    STANDALONE,
    GroupState,
    RetentionView,
    expired_offsets,
    should_delete_group,
)
from offsetlog.group.consumer_protocol import encode_subscription
from offsetlog.group.errors import NonEmptyGroupError
from offsetlog.log.records import group_metadata, offset_tombstone
from support.coordinator_harness import CoordinatorHarness

T0 = 1_000_000
DAY = 24 * 3600 * 1000
RETENTION = 7 * DAY


def entry(commit_ts, expire_ts=None, offset=1):
    """A table entry: (offset, metadata, leader_epoch, commit_timestamp, expire_timestamp)."""
    return (offset, "", None, commit_ts, expire_ts)


def view(state, *, ts=None, topics=None, protocol_type="consumer"):
    return RetentionView(state, protocol_type, ts, topics)


# -- the rules ---------------------------------------------------------------------------------

def test_standalone_offsets_expire_after_their_last_commit():
    entries = {("t", 0): entry(T0), ("t", 1): entry(T0 + 1)}
    assert expired_offsets(STANDALONE, entries, T0 + RETENTION - 1, RETENTION) == []
    assert expired_offsets(STANDALONE, entries, T0 + RETENTION, RETENTION) == [("t", 0)]


def test_explicit_expire_timestamp_wins():
    entries = {("t", 0): entry(T0, expire_ts=T0 + 10)}
    assert expired_offsets(STANDALONE, entries, T0 + 10, RETENTION) == [("t", 0)]
    empty = view(GroupState.EMPTY, ts=T0 + 5 * DAY)
    assert expired_offsets(empty, entries, T0 + 10, RETENTION) == [("t", 0)]


def test_empty_group_offsets_expire_after_the_group_became_empty():
    empty_since = T0 + 2 * DAY
    entries = {("t", 0): entry(T0), ("u", 0): entry(T0 + DAY)}
    v = view(GroupState.EMPTY, ts=empty_since)
    assert expired_offsets(v, entries, empty_since + RETENTION - 1, RETENTION) == []
    assert expired_offsets(v, entries, empty_since + RETENTION, RETENTION) == [("t", 0),
                                                                                ("u", 0)]


def test_commit_after_the_group_became_empty_keeps_its_full_retention():
    empty_since = T0
    late = T0 + 5 * DAY
    entries = {("t", 0): entry(T0 - DAY), ("t", 1): entry(late)}
    v = view(GroupState.EMPTY, ts=empty_since)
    assert expired_offsets(v, entries, empty_since + RETENTION, RETENTION) == [("t", 0)]
    assert expired_offsets(v, entries, late + RETENTION, RETENTION) == [("t", 0), ("t", 1)]


def test_empty_group_without_state_timestamp_counts_from_each_commit():
    v = view(GroupState.EMPTY, ts=None)
    entries = {("t", 0): entry(T0), ("t", 1): entry(T0 + DAY)}
    assert expired_offsets(v, entries, T0 + RETENTION, RETENTION) == [("t", 0)]


def test_stable_consumer_group_expires_only_unsubscribed_topics():
    v = view(GroupState.STABLE, ts=T0, topics=frozenset({"orders"}))
    entries = {("orders", 0): entry(T0), ("old-topic", 0): entry(T0),
               ("old-topic", 1): entry(T0 + DAY)}
    assert expired_offsets(v, entries, T0 + 100 * DAY, RETENTION) == [("old-topic", 0),
                                                                      ("old-topic", 1)]
    assert expired_offsets(v, entries, T0 + RETENTION, RETENTION) == [("old-topic", 0)]


@pytest.mark.parametrize("v", [
    view(GroupState.STABLE, ts=T0, topics=None),  # subscriptions unknown
    view(GroupState.STABLE, ts=T0, topics=frozenset(), protocol_type="connect"),
    view(GroupState.PREPARING_REBALANCE, ts=T0, topics=frozenset()),
    view(GroupState.COMPLETING_REBALANCE, ts=T0, topics=frozenset()),
])
def test_other_groups_keep_their_offsets(v):
    assert expired_offsets(v, {("t", 0): entry(T0)}, T0 + 100 * DAY, RETENTION) == []


def test_retention_view_from_a_group_metadata_value():
    sub = encode_subscription(["orders", "payments"])
    value = {"protocol_type": "consumer", "generation": 4, "protocol": "range", "leader": "m",
             "current_state_timestamp": T0,
             "members": [{"member_id": "m", "session_timeout_ms": 10_000, "subscription": sub}]}
    assert RetentionView.of_value(value) == RetentionView(
        GroupState.STABLE, "consumer", T0, frozenset({"orders", "payments"}))
    assert RetentionView.of_value(None) == STANDALONE
    empty = {**value, "members": [], "protocol": None, "leader": None}
    assert RetentionView.of_value(empty) == RetentionView(GroupState.EMPTY, "consumer", T0,
                                                          frozenset())


def test_opaque_subscriptions_mean_unknown_topics():
    value = {"protocol_type": "consumer", "generation": 1, "protocol": "range", "leader": "m",
             "current_state_timestamp": T0,
             "members": [{"member_id": "m", "session_timeout_ms": 10_000,
                          "subscription": b"\xc1 not msgpack"}]}
    assert RetentionView.of_value(value).subscribed_topics is None


def test_should_delete_group():
    assert should_delete_group(view(GroupState.EMPTY, ts=T0), 0)
    assert not should_delete_group(view(GroupState.EMPTY, ts=T0), 1)
    assert not should_delete_group(view(GroupState.STABLE, ts=T0, topics=frozenset()), 0)
    assert not should_delete_group(STANDALONE, 0)


# -- the coordinator's retention pass ----------------------------------------------------------

def subscribed_group(h, topics):
    r = h.join("g", client_id="a", protocols=[("range", encode_subscription(topics))])
    h.advance(3_000)
    a = h.answer(r.request_id).member_id
    h.sync("g", member_id=a, generation_id=1, assignments={a: b""})
    return a


def test_pass_on_a_stable_group_tombstones_unsubscribed_offsets():
    h = CoordinatorHarness(start_ms=T0)
    a = subscribed_group(h, ["orders"])
    offsets = {"g": {("orders", 0): entry(T0), ("gone", 0): entry(T0)},
               "standalone": {("t", 3): entry(T0)}}
    # a short retention, so the member's session (10 s) is still alive when it is judged
    r = h.coordinator.expire_offsets(offsets, now_ms=T0 + 8_000, retention_ms=5_000)
    assert r.records == [offset_tombstone(0, "g", "gone", 0),
                         offset_tombstone(1, "standalone", "t", 3)]
    assert h.describe("g").state == "Stable"
    assert a in [m.member_id for m in h.describe("g").members]


def test_pass_on_an_empty_group_expires_everything_then_deletes_the_group():
    h = CoordinatorHarness(start_ms=T0)
    a = subscribed_group(h, ["orders"])
    h.leave("g", member_id=a)
    empty_since = h.now
    offsets = {"g": {("orders", 0): entry(T0), ("orders", 1): entry(T0)}}
    c = h.coordinator
    r = c.expire_offsets(offsets, now_ms=empty_since + RETENTION - 1, retention_ms=RETENTION)
    assert r.records == [] and c.describe_group("g").state == "Empty"
    r = c.expire_offsets(offsets, now_ms=empty_since + RETENTION, retention_ms=RETENTION)
    assert r.records == [offset_tombstone(0, "g", "orders", 0),
                         offset_tombstone(1, "g", "orders", 1),
                         group_metadata(2, "g", None)]
    assert c.describe_group("g") is None


def test_pass_deletes_an_empty_group_without_offsets_at_once():
    h = CoordinatorHarness(start_ms=T0)
    a = subscribed_group(h, ["orders"])
    h.leave("g", member_id=a)
    r = h.coordinator.expire_offsets({}, now_ms=h.now, retention_ms=RETENTION)
    assert r.records == [group_metadata(0, "g", None)]


def test_delete_group():
    h = CoordinatorHarness(start_ms=T0)
    a = subscribed_group(h, ["orders"])
    with pytest.raises(NonEmptyGroupError):
        h.coordinator.delete_group("g", now_ms=h.now)
    assert h.describe("g").state == "Stable"
    h.leave("g", member_id=a)
    assert h.coordinator.delete_group("g", now_ms=h.now).records == [group_metadata(0, "g", None)]
    assert h.coordinator.delete_group("g", now_ms=h.now).records == []  # already gone
    # the name is free again: a join starts a brand-new group at generation 0
    h.join("g", client_id="b")
    h.advance(3_000)
    assert h.describe("g").generation == 1
