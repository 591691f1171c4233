"""The consumer group protocol (KIP-848): groups whose assignment the coordinator computes.

Start at :class:`ConsumerGroupCoordinator` (``coordinator``), a sans-IO state machine like the
classic ``offsetlog.group.GroupCoordinator``. Modules: ``assignors`` (``uniform``, ``range``),
``member`` (a member and its reconciliation), ``group`` (a group and its records), ``regex``
(subscriptions by regular expression), ``classic`` (classic-protocol members of a consumer
group), ``schedule`` (the heartbeat interval each answer names), ``config``, ``errors``. docs/GROUPS.md, "The consumer group protocol", is the guide.
"""

from offsetlog.group.consumer.assignors import ASSIGNORS, AssignorMember
from offsetlog.group.consumer.config import ConsumerGroupConfig
from offsetlog.group.consumer.coordinator import (
    ConsumerGroupCoordinator,
    ConsumerHeartbeatResponse,
    ConsumerResult,
)
from offsetlog.group.consumer.group import KINDS, ConsumerGroup
from offsetlog.group.consumer.member import ConsumerMember

__all__ = ["ASSIGNORS", "KINDS", "AssignorMember", "ConsumerGroup", "ConsumerGroupConfig",
           "ConsumerGroupCoordinator", "ConsumerHeartbeatResponse", "ConsumerMember",
           "ConsumerResult"]
