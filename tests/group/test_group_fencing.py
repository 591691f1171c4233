"""Offset-commit fencing: one test per rule of ``offsetlog.group.fencing``, in Kafka's order."""

from __future__ import annotations

import pytest

from offsetlog.errors import (
    FencedInstanceIdError,
    IllegalGenerationError,
    RebalanceInProgressError,
    UnknownMemberIdError,
)
from offsetlog.group import check_offset_commit
from offsetlog.group.errors import CoordinatorNotAvailableError
from offsetlog.group.group import Group
from offsetlog.group.state import DEAD
from support.coordinator_harness import CoordinatorHarness

T0 = 1_000_000


@pytest.fixture
def h():
    return CoordinatorHarness(start_ms=T0)


@pytest.fixture
def stable(h):
    """A Stable generation-1 group: dynamic member a, static member s (instance "inst")."""
    ra = h.join("g", client_id="a").request_id
    rs = h.join("g", client_id="s", group_instance_id="inst").request_id
    h.advance(6_000)
    a, s = h.answer(ra).member_id, h.answer(rs).member_id
    h.sync("g", member_id=a, generation_id=1, assignments={})
    h.sync("g", member_id=s, generation_id=1, group_instance_id="inst")
    return a, s


# rule 1: no such group

def test_unknown_group_accepts_generation_minus_one(h):
    h.commit("g")
    h.commit("g", member_id="whoever")  # Kafka ignores the member id here
    assert h.coordinator.group_ids() == []  # and creates nothing


def test_unknown_group_rejects_a_generation(h):
    with pytest.raises(IllegalGenerationError):
        h.commit("g", member_id="m", generation_id=3)


# rule 2: Dead

def test_dead_group_is_coordinator_not_available():
    group = Group("g", state=DEAD, state_timestamp=0)
    error = check_offset_commit(group, member_id="", group_instance_id=None, generation_id=-1)
    assert isinstance(error, CoordinatorNotAvailableError) and error.code == 15


# rule 3: generation -1 on an Empty group

def test_empty_group_accepts_generation_minus_one(h, stable):
    a, s = stable
    h.leave("g", member_id=a)
    h.leave("g", member_id=s, group_instance_id="inst")
    assert h.describe("g").state == "Empty"
    h.commit("g")
    h.commit("g", member_id="admin-tool")


def test_empty_group_rejects_members_of_old_generations(h, stable):
    a, s = stable
    h.leave("g", member_id=a)
    h.leave("g", member_id=s, group_instance_id="inst")
    with pytest.raises(UnknownMemberIdError):
        h.commit("g", member_id=a, generation_id=1)


# rule 4: membership claims, in order a-d

def test_unknown_instance_id(h, stable):
    a, _ = stable
    with pytest.raises(UnknownMemberIdError):
        h.commit("g", member_id=a, group_instance_id="other", generation_id=1)


def test_instance_id_bound_to_another_member_is_fenced(h, stable):
    a, s = stable
    with pytest.raises(FencedInstanceIdError):
        h.commit("g", member_id="s-old", group_instance_id="inst", generation_id=1)


def test_unknown_member_id(h, stable):
    with pytest.raises(UnknownMemberIdError):
        h.commit("g", member_id="ghost", generation_id=1)


def test_wrong_generation(h, stable):
    a, _ = stable
    with pytest.raises(IllegalGenerationError):
        h.commit("g", member_id=a, generation_id=0)
    with pytest.raises(IllegalGenerationError):
        h.commit("g", member_id=a, generation_id=-1)  # a member id claims membership


def test_fencing_is_checked_before_the_generation(h, stable):
    # both wrong: the instance rule comes first
    with pytest.raises(FencedInstanceIdError):
        h.commit("g", member_id="s-old", group_instance_id="inst", generation_id=99)
    with pytest.raises(UnknownMemberIdError):
        h.commit("g", member_id="ghost", generation_id=99)


# rule 5: anonymous commits to a group with members

def test_generation_minus_one_without_member_id_on_a_group_with_members(h, stable):
    with pytest.raises(UnknownMemberIdError):
        h.commit("g")


# rule 6: rebalance states

def test_completing_rebalance_rejects_with_rebalance_in_progress(h):
    ra = h.join("g", client_id="a").request_id
    h.advance(3_000)
    a = h.answer(ra).member_id
    assert h.describe("g").state == "CompletingRebalance"
    with pytest.raises(RebalanceInProgressError):
        h.commit("g", member_id=a, generation_id=1)


def test_preparing_rebalance_accepts_the_current_generation(h, stable):
    a, s = stable
    h.join("g", client_id="newcomer")
    assert h.describe("g").state == "PreparingRebalance"
    h.commit("g", member_id=a, generation_id=1)
    h.commit("g", member_id=s, group_instance_id="inst", generation_id=1)


def test_stable_accepts_and_the_commit_counts_as_a_heartbeat(h, stable):
    a, _ = stable
    h.advance(9_000)
    h.commit("g", member_id=a, generation_id=1)
    assert h.coordinator.session_deadline("g", a) == h.now + 10_000


def test_a_lapsed_session_is_treated_as_evicted_even_before_poll(h, stable):
    a, _ = stable
    deadline = h.coordinator.session_deadline("g", a)
    h.now = deadline  # the clock moved, but nobody polled
    with pytest.raises(UnknownMemberIdError):
        h.commit("g", member_id=a, generation_id=1)
    h.advance(0)  # poll: the eviction really happens
    assert a not in [m.member_id for m in h.describe("g").members]


def test_rejected_commit_changes_nothing(h, stable):
    a, _ = stable
    before = h.coordinator.session_deadline("g", a)
    h.advance(1_000)
    with pytest.raises(IllegalGenerationError):
        h.commit("g", member_id=a, generation_id=5)
    assert h.coordinator.session_deadline("g", a) == before


# the transactional exemption (TxnOffsetCommit)

def test_transactional_commit_without_member_is_accepted_from_a_group_with_members(h, stable):
    with pytest.raises(UnknownMemberIdError):
        h.commit("g")
    h.commit("g", transactional=True)


def test_transactional_commit_still_checks_a_claimed_membership(h, stable):
    with pytest.raises(UnknownMemberIdError):
        h.commit("g", member_id="stranger", generation_id=1, transactional=True)
