"""An embeddable consumer-group member: Kafka's ``KafkaConsumer`` group management for a
service that keeps its offsets in an :class:`~offsetlog.store.OffsetStore` in the same process.

Start at :class:`GroupMember`; docs/MEMBER.md shows how to embed one. Modules: ``group_member``
(the member and its threads), ``heartbeat`` (its heartbeat), ``rebalance`` and ``commits`` (its
rebalance steps and commit rules), ``consumer_member`` (a member of the consumer group protocol,
KIP-848: ``GroupMember(..., group_protocol="consumer")``), ``protocol`` (subscription metadata and the leader's assignment,
pure), ``listener`` (:class:`RebalanceListener`), ``errors``.
"""

from offsetlog.member.consumer_member import ConsumerGroupMember
from offsetlog.member.errors import MemberClosedError, NotSubscribedError, PartitionNotAssignedError
from offsetlog.member.group_member import GroupMember, MemberState
from offsetlog.member.listener import RebalanceListener

__all__ = ["ConsumerGroupMember", "GroupMember", "MemberClosedError", "MemberState", "NotSubscribedError",
           "PartitionNotAssignedError", "RebalanceListener"]
