"""The group coordinator's settings in one place, with units and Kafka's broker setting names."""

from __future__ import annotations

import uuid
from dataclasses import dataclass, field
from typing import Callable


def random_member_id(prefix: str) -> str:
    """Kafka's member id: the client id (or, for a static member, its instance id), a dash and a
    random UUID. Tests inject a deterministic generator instead (``member_id_factory``)."""
    return f"{prefix}-{uuid.uuid4()}"


@dataclass(frozen=True)
class GroupConfig:
    #: smallest session timeout a member may ask for, ms (group.min.session.timeout.ms)
    min_session_timeout_ms: int = 6_000
    #: largest session timeout a member may ask for, ms (group.max.session.timeout.ms)
    max_session_timeout_ms: int = 1_800_000
    #: how long a new (Empty) group waits for more members before its first rebalance
    #: completes, extended while members keep arriving, ms (group.initial.rebalance.delay.ms)
    initial_rebalance_delay_ms: int = 3_000
    #: most members a group may have; None = unlimited (group.max.size)
    max_size: int | None = None
    #: how long a new member's JoinGroup may wait for the join phase before it is dropped, ms
    #: (Kafka's fixed GroupCoordinator.NewMemberJoinTimeoutMs)
    new_member_join_timeout_ms: int = 300_000
    #: prefix -> new member id; prefix is the client id, or the instance id of a static member
    member_id_factory: Callable[[str], str] = field(default=random_member_id, compare=False)

    def __post_init__(self) -> None:
        for name in ("min_session_timeout_ms", "max_session_timeout_ms",
                     "initial_rebalance_delay_ms", "new_member_join_timeout_ms"):
            v = getattr(self, name)
            if not isinstance(v, int) or isinstance(v, bool) or v < 0:
                raise ValueError(f"{name} must be an int >= 0, not {v!r}")
        if self.min_session_timeout_ms > self.max_session_timeout_ms:
            raise ValueError("min_session_timeout_ms is above max_session_timeout_ms")
        if self.max_size is not None and (not isinstance(self.max_size, int)
                                          or isinstance(self.max_size, bool) or self.max_size < 1):
            raise ValueError(f"max_size must be None or an int >= 1, not {self.max_size!r}")
        if not callable(self.member_id_factory):
            raise ValueError("member_id_factory must be callable")
