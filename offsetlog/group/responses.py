"""What the coordinator hands back: a :class:`Result` of records to append and responses to send.

Every handler call gets a fresh ``request_id`` (``Result.request_id``). Each response names the
request it answers, because an answer may come later, from another call: a JoinGroup is parked
until the join phase completes (Kafka's delayed join), a follower's SyncGroup until the leader
syncs, and those answers come out of the call that completes them (another member's request, or
``poll``). Every request is answered exactly once.

Errors are not raised: a response carries the Kafka error as an exception instance in ``error``
(``None`` for success), as a broker puts an error code in its response; ``raise_for_error()``
raises it for callers that prefer exceptions.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from offsetlog.errors import OffsetlogError
from offsetlog.log.records import Record


@dataclass(frozen=True)
class _Response:
    request_id: int
    error: OffsetlogError | None

    @property
    def error_code(self) -> int:
        """Kafka's error code: 0 for success."""
        return 0 if self.error is None else (self.error.code or -1)

    def raise_for_error(self) -> None:
        if self.error is not None:
            raise self.error


@dataclass(frozen=True)
class JoinGroupMember:
    """One entry of the member list the leader receives."""

    member_id: str
    group_instance_id: str | None
    metadata: bytes


@dataclass(frozen=True)
class JoinGroupResponse(_Response):
    """:ivar member_id: the member's id (a new member learns it here; with MemberIdRequired it
        is the id to join again with)
    :ivar members: the members and their metadata for the chosen protocol, for the leader
        (who computes the assignment); empty for everyone else
    :ivar skip_assignment: the leader must not compute a new assignment (a static leader
        rejoined a Stable group: the current assignment stands)
    """

    member_id: str = ""
    generation_id: int = -1
    protocol_type: str | None = None
    protocol_name: str | None = None
    leader_id: str = ""
    members: tuple[JoinGroupMember, ...] = ()
    skip_assignment: bool = False

    @property
    def is_leader(self) -> bool:
        return bool(self.member_id) and self.member_id == self.leader_id


@dataclass(frozen=True)
class SyncGroupResponse(_Response):
    protocol_type: str | None = None
    protocol_name: str | None = None
    assignment: bytes = b""


@dataclass(frozen=True)
class HeartbeatResponse(_Response):
    pass


@dataclass(frozen=True)
class MemberIdentity:
    """Who leaves, in a LeaveGroup: a member id, or (``member_id=""``) a static member's
    instance id, which lets an operator remove static members by name."""

    member_id: str = ""
    group_instance_id: str | None = None


@dataclass(frozen=True)
class LeaveMemberResponse:
    member_id: str
    group_instance_id: str | None
    error: OffsetlogError | None


@dataclass(frozen=True)
class LeaveGroupResponse(_Response):
    """``error`` is the request-level error; each member's outcome is in ``members``."""

    members: tuple[LeaveMemberResponse, ...] = ()


Response = JoinGroupResponse | SyncGroupResponse | HeartbeatResponse | LeaveGroupResponse


@dataclass
class Result:
    """The outcome of one coordinator call.

    The caller must append ``records`` (one batch, offset deltas 0..n-1, all for the log
    partition this coordinator serves) and have them durable before it delivers ``responses``:
    the coordinator has already moved on in memory, and a response must never announce a state
    the log could lose. If the append fails, the store is failed anyway; the coordinator is
    rebuilt from the log when the store is reopened.

    :ivar request_id: the id given to this call's request (None for ``poll``)
    :ivar records: GROUP_METADATA (and, from expiry, OFFSET_COMMIT tombstone) records
    :ivar responses: answers to this request and to parked ones that this call completed
    """

    request_id: int | None = None
    records: list[Record] = field(default_factory=list)
    responses: list[Response] = field(default_factory=list)

    @property
    def response(self) -> Response | None:
        """The answer to this call's own request, or None if it was parked."""
        for r in self.responses:
            if r.request_id == self.request_id:
                return r
        return None

    def response_to(self, request_id: int) -> Response | None:
        for r in self.responses:
            if r.request_id == request_id:
                return r
        return None


@dataclass(frozen=True)
class MemberDescription:
    member_id: str
    group_instance_id: str | None
    client_id: str
    client_host: str
    session_timeout_ms: int
    rebalance_timeout_ms: int
    #: its metadata for the group's protocol (b"" when no protocol is chosen); like Kafka's
    #: DescribeGroups, the protocols the vote did not choose are not shown (nor recorded)
    metadata: bytes
    assignment: bytes


@dataclass(frozen=True)
class GroupDescription:
    """A snapshot of a group (Kafka's DescribeGroups, plus generation, leader and timestamp).

    Two coordinators whose groups describe equal agree on everything the log records about them
    and on their state.
    """

    group_id: str
    state: str
    generation: int
    protocol_type: str | None
    protocol: str | None
    leader: str | None
    state_timestamp: int | None
    #: in join order, oldest first
    members: tuple[MemberDescription, ...]
