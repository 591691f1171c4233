"""Choosing protocols: which assignor a group uses, and which rebalance protocol a member runs.

**The group protocol vote** (Kafka's ``GroupMetadata.selectProtocol`` /
``ClassicGroup.selectProtocol``). Every member lists the assignors it can use, most preferred
first. The candidates are the protocols every member lists. Each member votes for the first
candidate in its own list, and the candidate with the most votes wins.

Kafka leaves a tie to hash-map iteration order. Here a tie goes to the tied protocol the group
as a whole ranks higher: the smallest sum, over all members, of its position in each member's
list (a Borda count), and if that ties too, the name that sorts first. So a tie between a protocol
everyone lists early and one some members list last goes to the former, and the result never
depends on the order members are given in.

**The rebalance protocol** (Kafka's ``ConsumerCoordinator`` constructor). A member configured
with several assignors runs the most advanced rebalance protocol that all of them support
(cooperative over eager).
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence

from offsetlog.assignors.base import PartitionAssignor, RebalanceProtocol
from offsetlog.assignors.errors import AssignorArgumentError, InconsistentGroupProtocolError
from offsetlog.assignors.ordering import java_order


def choose_protocol(member_protocols: Mapping[str, Sequence[str]]) -> str:
    """Run the group's protocol vote.

    :param member_protocols: member id -> protocol names it supports, most preferred first
    :return: the chosen protocol name
    :raises InconsistentGroupProtocolError: no protocol is supported by every member
    :raises AssignorArgumentError: no members

    >>> choose_protocol({"a": ["cooperative-sticky", "range"], "b": ["range"], "c": ["range"]})
    'range'
    >>> choose_protocol({"a": ["range", "roundrobin"], "b": ["roundrobin", "range"]})
    'range'
    """
    if not member_protocols:
        raise AssignorArgumentError("cannot choose a protocol for a group with no members")
    lists: dict[str, tuple[str, ...]] = {}
    for member_id, protocols in member_protocols.items():
        if isinstance(protocols, str):  # ("range") is a str, not a one-protocol tuple
            raise TypeError(f"protocols of {member_id!r} must be a sequence of names, not a str")
        lists[member_id] = tuple(dict.fromkeys(protocols))  # a repeated name counts once
    common = set.intersection(*(set(protocols) for protocols in lists.values()))
    if not common:
        raise InconsistentGroupProtocolError(
            "the members share no protocol: "
            + "; ".join(f"{m}: {', '.join(p) or '(none)'}" for m, p in sorted(lists.items())),
            member_protocols=lists)
    votes = dict.fromkeys(common, 0)
    rank_sum = dict.fromkeys(common, 0)
    for protocols in lists.values():
        ranked = [p for p in protocols if p in common]
        votes[ranked[0]] += 1
        for position, protocol in enumerate(ranked):
            rank_sum[protocol] += position
    return min(common, key=lambda p: (-votes[p], rank_sum[p], java_order(p)))


def select_rebalance_protocol(assignors: Iterable[PartitionAssignor]) -> RebalanceProtocol:
    """The rebalance protocol a member configured with ``assignors`` runs: the most advanced one
    they all support.

    :raises AssignorArgumentError: no assignors, or none in common
    """
    assignors = list(assignors)
    if not assignors:
        raise AssignorArgumentError("at least one assignor is needed")
    common = set(assignors[0].supported_protocols)
    for assignor in assignors[1:]:
        common &= set(assignor.supported_protocols)
    if not common:
        raise AssignorArgumentError(
            "the assignors share no rebalance protocol: "
            + "; ".join(f"{a.name}: {', '.join(a.supported_protocols)}" for a in assignors))
    return max(common, key=lambda protocol: protocol.id)
