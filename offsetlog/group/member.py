"""One member of a classic group, as the coordinator knows it (Kafka's ``MemberMetadata``).

Besides what the log keeps about a member (ids, timeouts, protocols, assignment), a member holds
*soft* state that no record carries: the JoinGroup or SyncGroup request of it that the
coordinator has parked, and whether it is new (joined in the current rebalance and has not yet
received a generation). Its session deadline lives in the coordinator's timer queue.
"""

from __future__ import annotations

from dataclasses import dataclass

#: (protocol name, protocol metadata): one entry of a JoinGroup's protocol list
Protocol = tuple[str, bytes]


@dataclass(eq=False, slots=True)
class Member:
    member_id: str
    group_instance_id: str | None
    client_id: str
    client_host: str
    #: ms without a heartbeat after which the member is evicted
    session_timeout_ms: int
    #: ms the member may take to rejoin once a rebalance starts
    rebalance_timeout_ms: int
    #: the protocols it supports, most preferred first
    protocols: tuple[Protocol, ...]
    #: what the leader assigned it in the current generation (opaque bytes)
    assignment: bytes = b""
    #: id of its JoinGroup request that waits for the join phase to complete, if any
    join_request: int | None = None
    #: id of its SyncGroup request that waits for the leader's assignment, if any
    sync_request: int | None = None
    #: joined during the current rebalance and has no generation yet; a new member that never
    #: completes its join is dropped after ``new_member_join_timeout_ms``
    is_new: bool = False

    @property
    def awaiting_join(self) -> bool:
        return self.join_request is not None

    @property
    def awaiting_sync(self) -> bool:
        return self.sync_request is not None

    @property
    def is_static(self) -> bool:
        return self.group_instance_id is not None

    def protocol_names(self) -> list[str]:
        return [name for name, _ in self.protocols]

    def metadata(self, protocol: str) -> bytes:
        """The metadata it sent for ``protocol``; ``KeyError`` if it does not support it."""
        for name, metadata in self.protocols:
            if name == protocol:
                return metadata
        raise KeyError(f"member {self.member_id!r} does not support protocol {protocol!r}")

    def matches(self, protocols: tuple[Protocol, ...]) -> bool:
        """Same protocols, in the same order, with the same metadata."""
        return self.protocols == protocols

    def satisfies_heartbeat(self) -> bool:
        """Whether its session timer may lapse without evicting it: a member parked in a
        JoinGroup or SyncGroup is alive by definition (it is waiting for the coordinator), except
        a new member, which has never heartbeated (Kafka's ``hasSatisfiedHeartbeat``)."""
        if self.is_new:
            return False
        return self.awaiting_join or self.awaiting_sync
