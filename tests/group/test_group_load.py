"""Rebuilding groups from the log: ``replay``/``load`` after a "restart"."""

from __future__ import annotations

import pytest

from offsetlog.errors import UnsupportedVersionError
from offsetlog.group import GroupConfig, GroupCoordinator
from offsetlog.group.errors import CoordinatorNotAvailableError, InvalidGroupMetadataError
from offsetlog.log.records import group_metadata, offset_commit
from offsetlog.table import OffsetTable
from support.coordinator_harness import CoordinatorHarness

T0 = 1_000_000


@pytest.fixture
def h():
    return CoordinatorHarness(start_ms=T0)


def test_restart_keeps_the_generation_and_gives_fresh_session_deadlines(h):
    a, b = h.stable_group("g", ["a", "b"], session_timeout_ms=20_000)
    before = h.describe("g")
    restart_at = h.now + 60_000  # down for a minute: longer than any session
    fresh = h.replayed(now_ms=restart_at)
    assert fresh.describe_group("g") == before
    assert fresh.session_deadline("g", a) == restart_at + 20_000
    assert fresh.session_deadline("g", b) == restart_at + 20_000
    # the members carry on in their generation, with their assignment
    hb = fresh.heartbeat("g", member_id=b, generation_id=1, now_ms=restart_at + 1_000)
    assert hb.response.error is None
    sync = fresh.sync_group("g", member_id=b, generation_id=1, now_ms=restart_at + 1_000)
    assert sync.response.assignment == b.encode()
    # one that does not come back is evicted a session after the restart
    r = fresh.poll(restart_at + 20_000)
    assert r.records == [] and fresh.describe_group("g").state == "PreparingRebalance"


def test_static_member_survives_a_restart(h):
    ra = h.join("g", client_id="a", group_instance_id="ia").request_id
    h.advance(3_000)
    a = h.answer(ra).member_id
    h.sync("g", member_id=a, generation_id=1, group_instance_id="ia", assignments={a: b"A"})
    fresh = h.replayed(now_ms=h.now + 5_000)
    r = fresh.join_group("g", group_instance_id="ia", client_id="a", session_timeout_ms=10_000,
                         protocols=[("range", b"range-metadata")], now_ms=h.now + 6_000)
    assert r.response.error is None and r.response.generation_id == 1
    assert fresh.describe_group("g").state == "Stable"
    assert fresh.describe_group("g").members[0].assignment == b"A"


def test_rebalance_in_flight_is_lost_and_the_group_is_back_at_its_last_stable_generation(h):
    a, b = h.stable_group("g", ["a", "b"])
    stable = h.describe("g")
    h.leave("g", member_id=b)
    h.join("g", member_id=a)  # generation 2 is CompletingRebalance, not yet recorded
    assert h.describe("g").generation == 2
    assert h.replayed().describe_group("g") == stable


def test_empty_group_reloads_empty_with_its_state_timestamp(h):
    (a,) = h.stable_group("g", ["a"])
    h.advance(5)
    h.leave("g", member_id=a)
    fresh = h.replayed(now_ms=h.now + 1_000)
    d = fresh.describe_group("g")
    assert (d.state, d.generation, d.state_timestamp) == ("Empty", 2, h.now)
    assert fresh.next_deadline() is None


def test_tombstone_removes_the_group():
    c = GroupCoordinator()
    c.replay(group_metadata(0, "g", {"generation": 3, "members": []}), now_ms=0)
    assert c.describe_group("g").generation == 3
    c.replay(offset_commit(0, "g", "t", 0, 5, commit_timestamp=0), now_ms=0)  # not ours: skipped
    c.replay(group_metadata(0, "g", None), now_ms=0)
    assert c.describe_group("g") is None


def test_loading_from_the_partition_table_matches_replaying_the_log(h):
    h.stable_group("g", ["a", "b"])
    h.stable_group("other", ["c"])
    table = OffsetTable()
    for i, record in enumerate(h.log):
        table.apply(i, record)
    fresh = GroupCoordinator()
    for group, value in table.group_metadata.items():
        fresh.load(group, value, now_ms=h.now)
    replayed = h.replayed()
    for group in ("g", "other"):
        assert fresh.describe_group(group) == replayed.describe_group(group) \
            == h.describe(group)


def test_load_of_an_oversized_group_starts_a_rebalance(h):
    h.stable_group("g", ["a", "b", "c"])
    fresh = GroupCoordinator(GroupConfig(max_size=2))
    for record in h.log:
        fresh.replay(record, now_ms=h.now)
    assert fresh.describe_group("g").state == "PreparingRebalance"


def test_defaults_fill_missing_fields():
    c = GroupCoordinator()
    c.load("g", {"protocol": "range", "leader": "m",
                 "members": [{"member_id": "m", "session_timeout_ms": 30_000}]}, now_ms=5)
    d = c.describe_group("g")
    assert (d.protocol_type, d.generation, d.state_timestamp) == ("consumer", 0, None)
    m = d.members[0]
    assert (m.group_instance_id, m.client_id, m.rebalance_timeout_ms, m.metadata,
            m.assignment) == (None, "", 30_000, b"", b"")


@pytest.mark.parametrize("value, words", [
    ({"members": [{"session_timeout_ms": 1}], "protocol": "x"}, "member_id"),
    ({"generation": "1"}, "generation"),
    ({"members": [{"member_id": "m", "session_timeout_ms": 1}]}, "no protocol"),
    ({"members": [], "leader": "ghost"}, "not a member"),
    ({"generation": True}, "generation"),
])
def test_malformed_values_are_refused(value, words):
    with pytest.raises(InvalidGroupMetadataError, match=words):
        GroupCoordinator().load("g", value, now_ms=0)


def test_newer_record_versions_and_unknown_types_are_refused():
    c = GroupCoordinator()
    with pytest.raises(UnsupportedVersionError):
        c.replay((0, 2, 1, {"group": "g"}, {}), now_ms=0)
    with pytest.raises(UnsupportedVersionError):
        c.replay((0, 42, 0, {"group": "g"}, {}), now_ms=0)
    assert c.group_ids() == []


def test_unload_answers_parked_requests_and_forgets_every_group(h):
    a, b = h.stable_group("g", ["a", "b"])
    parked = h.join("g", member_id=a)
    r = h.coordinator.unload(now_ms=h.now)
    assert isinstance(r.response_to(parked.request_id).error, CoordinatorNotAvailableError)
    assert r.records == [] and h.coordinator.group_ids() == []
    assert h.coordinator.next_deadline() is None


def test_loading_over_a_live_group_answers_its_parked_requests(h):
    a, b = h.stable_group("g", ["a", "b"])
    parked = h.join("g", member_id=a)
    value = h.log[-1][4]
    r = h.coordinator.load("g", value, now_ms=h.now)
    assert isinstance(r.response_to(parked.request_id).error, CoordinatorNotAvailableError)
    assert h.describe("g").state == "Stable"
