"""Partition assignors: how a consumer group's leader splits partitions among its members.

The built-ins reproduce Kafka's ``range``, ``roundrobin``, ``sticky`` and ``cooperative-sticky``;
docs/ASSIGNORS.md explains how each decides. Everything here is pure: no clock, randomness or I/O.

>>> from offsetlog.assignors import RangeAssignor, Subscription
>>> result = RangeAssignor().assign({"t0": 3}, {"c0": Subscription(["t0"]), "c1": Subscription(["t0"])})
>>> {member: [str(tp) for tp in partitions] for member, partitions in result.items()}
{'c0': ['t0-0', 't0-1'], 'c1': ['t0-2']}
"""

from offsetlog.assignors.base import (
                                        NO_GENERATION,
                                        PartitionAssignor,
                                        RebalanceProtocol,
                                        Subscription,
)
from offsetlog.assignors.cooperative import (
                                        CooperativeStickyAssignor,
                                        validate_cooperative_assignment,
)
from offsetlog.assignors.errors import (
                                        AssignorArgumentError,
                                        InconsistentGroupProtocolError,
                                        InvalidAssignmentError,
                                        UnknownAssignorError,
)
from offsetlog.assignors.protocol import choose_protocol, select_rebalance_protocol
from offsetlog.assignors.range import RangeAssignor
from offsetlog.assignors.registry import available_assignors, get_assignor, register_assignor
from offsetlog.assignors.roundrobin import RoundRobinAssignor
from offsetlog.assignors.sticky import StickyAssignor

__all__ = [
    "NO_GENERATION",
    "AssignorArgumentError",
    "CooperativeStickyAssignor",
    "InconsistentGroupProtocolError",
    "InvalidAssignmentError",
    "PartitionAssignor",
    "RangeAssignor",
    "RebalanceProtocol",
    "RoundRobinAssignor",
    "StickyAssignor",
    "Subscription",
    "UnknownAssignorError",
    "available_assignors",
    "choose_protocol",
    "get_assignor",
    "register_assignor",
    "select_rebalance_protocol",
    "validate_cooperative_assignment",
]
