"""Errors of the group member that are about how it is used, not about the group protocol.

Protocol errors (a fenced commit, a replaced static member, ...) keep the Kafka-named classes of
:mod:`offsetlog.errors`; these three are the member's equivalents of the ``IllegalStateException``
Kafka's consumer throws.
"""

from __future__ import annotations

from offsetlog.errors import OffsetlogError


class MemberClosedError(OffsetlogError):
    """The member was closed; create a new one to rejoin the group."""


class NotSubscribedError(OffsetlogError, RuntimeError):
    """``poll`` before ``subscribe``: a member without topics has nothing to join for."""


class PartitionNotAssignedError(OffsetlogError, KeyError):
    """``seek``/``record_consumed`` on a partition the member does not own (any more).

    :ivar partition: the partition
    """

    def __init__(self, partition) -> None:
        super().__init__(f"partition {partition} is not assigned to this member")
        self.partition = partition

    def __str__(self) -> str:  # KeyError would print the repr of the message
        return self.args[0]
