"""The consumer-group coordinator: Kafka's classic group protocol as a sans-IO state machine.

Start at :class:`GroupCoordinator` (``offsetlog.group.coordinator``); docs/GROUPS.md is the
user's guide (states, the GROUP_METADATA record, fencing and retention rules).

Modules, one concept each: ``state`` (states and legal transitions), ``member`` and ``group``
(bookkeeping), ``rebalance`` (how a rebalance runs), ``consumer_protocol`` (subscription and
assignment bytes), ``schema`` (the GROUP_METADATA value), ``timers`` (deadlines as data),
``responses`` (what calls return), ``fencing`` (who may commit), ``expiry`` (retention),
``config``, ``errors`` and ``testing`` (a harness for tests). The protocol vote is the
assignors' ``offsetlog.assignors.choose_protocol``. The consumer group protocol (KIP-848) is
the subpackage ``consumer``; ``migration`` links the two coordinators of a log partition so
that groups move between the protocols.
"""

from offsetlog.group.config import GroupConfig
from offsetlog.group.coordinator import GroupCoordinator
from offsetlog.group.expiry import STANDALONE, RetentionView, expired_offsets, should_delete_group
from offsetlog.group.fencing import check_offset_commit
from offsetlog.group.responses import (
                                    GroupDescription,
                                    HeartbeatResponse,
                                    JoinGroupMember,
                                    JoinGroupResponse,
                                    LeaveGroupResponse,
                                    LeaveMemberResponse,
                                    MemberDescription,
                                    MemberIdentity,
                                    Result,
                                    SyncGroupResponse,
)
from offsetlog.group.state import VALID_PREVIOUS_STATES, GroupState

__all__ = [
    "STANDALONE", "VALID_PREVIOUS_STATES", "GroupConfig", "GroupCoordinator", "GroupDescription",
    "GroupState", "HeartbeatResponse", "JoinGroupMember", "JoinGroupResponse",
    "LeaveGroupResponse", "LeaveMemberResponse", "MemberDescription", "MemberIdentity", "Result",
    "RetentionView", "SyncGroupResponse", "check_offset_commit", "expired_offsets",
    "should_delete_group",
]
