"""The group protocol vote (choose_protocol) and the rebalance protocol a member runs
(select_rebalance_protocol)."""

from __future__ import annotations

import itertools

import pytest

from offsetlog.assignors import (
    AssignorArgumentError,
    CooperativeStickyAssignor,
    InconsistentGroupProtocolError,
    PartitionAssignor,
    RangeAssignor,
    RebalanceProtocol,
    StickyAssignor,
    choose_protocol,
    select_rebalance_protocol,
)
from offsetlog.errors import OffsetlogError


def test_single_member_gets_its_first_choice():
    assert choose_protocol({"m": ["roundrobin", "range"]}) == "roundrobin"


def test_unanimous_first_choice_wins():
    assert choose_protocol({"a": ["sticky", "range"], "b": ["sticky", "range"]}) == "sticky"


def test_majority_wins():
    votes = {"a": ["range", "roundrobin"], "b": ["roundrobin", "range"], "c": ["roundrobin", "range"]}
    assert choose_protocol(votes) == "roundrobin"


def test_a_protocol_not_everyone_supports_cannot_win_even_with_most_first_choices():
    votes = {"a": ["cooperative-sticky", "range"], "b": ["cooperative-sticky", "range"], "c": ["range"]}
    assert choose_protocol(votes) == "range"


def test_members_vote_for_their_best_common_protocol():
    # a's favourite is not common, so a votes for its second choice, roundrobin.
    votes = {"a": ["sticky", "roundrobin", "range"], "b": ["range", "roundrobin"], "c": ["roundrobin", "range"]}
    assert choose_protocol(votes) == "roundrobin"


def test_tie_goes_to_the_protocol_the_group_ranks_higher():
    # x and y get one vote each; z none. Ranks: x 0+1+1 = 2, y 1+0+2 = 3, z 2+2+0... c votes z.
    votes = {"a": ["x", "y", "z"], "b": ["y", "x", "z"], "c": ["z", "x", "y"]}
    assert choose_protocol(votes) == "x"


def test_full_tie_goes_to_the_first_name():
    assert choose_protocol({"a": ["roundrobin", "range"], "b": ["range", "roundrobin"]}) == "range"


def test_vote_does_not_depend_on_member_order():
    votes = {"a": ["x", "y", "z"], "b": ["y", "z", "x"], "c": ["z", "x", "y"], "d": ["y", "x", "z"]}
    results = {choose_protocol(dict(order)) for order in itertools.permutations(votes.items())}
    assert results == {"y"}


def test_repeated_name_counts_once():
    assert choose_protocol({"a": ["x", "x", "y"], "b": ["y", "x"], "c": ["y"]}) == "y"


def test_no_common_protocol_is_inconsistent_group_protocol():
    with pytest.raises(InconsistentGroupProtocolError, match="share no protocol") as info:
        choose_protocol({"a": ["range"], "b": ["roundrobin"]})
    assert info.value.code == 23
    assert isinstance(info.value, OffsetlogError) and isinstance(info.value, ValueError)
    assert info.value.member_protocols == {"a": ("range",), "b": ("roundrobin",)}


def test_member_with_no_protocols_makes_the_group_inconsistent():
    with pytest.raises(InconsistentGroupProtocolError):
        choose_protocol({"a": ["range"], "b": []})


def test_empty_group_is_refused():
    with pytest.raises(AssignorArgumentError):
        choose_protocol({})


def test_a_bare_string_is_refused():
    with pytest.raises(TypeError):
        choose_protocol({"a": "range"})


def test_cooperative_when_every_assignor_supports_it():
    assert select_rebalance_protocol([CooperativeStickyAssignor()]) is RebalanceProtocol.COOPERATIVE


def test_eager_when_one_assignor_only_supports_eager():
    assert select_rebalance_protocol([CooperativeStickyAssignor(), RangeAssignor()]) is RebalanceProtocol.EAGER
    assert select_rebalance_protocol([StickyAssignor()]) is RebalanceProtocol.EAGER


def test_no_common_rebalance_protocol_is_refused():
    class CooperativeOnly(PartitionAssignor):
        name = "cooperative-only"
        supported_protocols = (RebalanceProtocol.COOPERATIVE,)

        def assign_partitions(self, partitions_per_topic, subscriptions):
            return {}

    with pytest.raises(AssignorArgumentError, match="no rebalance protocol"):
        select_rebalance_protocol([CooperativeOnly(), RangeAssignor()])
    with pytest.raises(AssignorArgumentError):
        select_rebalance_protocol([])


def test_protocol_values_and_ids():
    assert [p.value for p in RebalanceProtocol] == ["eager", "cooperative"]
    assert RebalanceProtocol("cooperative").id > RebalanceProtocol.EAGER.id
