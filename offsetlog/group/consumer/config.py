"""The consumer group protocol's settings, with Kafka's broker setting names."""

from __future__ import annotations

import base64
import uuid
from collections.abc import Callable
from dataclasses import dataclass, field

from offsetlog.group.consumer.assignors import ASSIGNORS, DEFAULT_ASSIGNORS

#: group.consumer.migration.policy's values, Kafka's ConsumerGroupMigrationPolicy
MIGRATION_POLICIES = ("bidirectional", "upgrade", "downgrade", "disabled")
#: the lowest group.consumer.reconciliation.heartbeat.interval.ms, ms: below it a member waiting
#: for partitions would mostly be asking again for nothing (the Java client backs off 100 ms
#: between heartbeats anyway)
MIN_RECONCILIATION_INTERVAL_MS = 50


def random_member_id() -> str:
    """A member id for a v0 ConsumerGroupHeartbeat, or a classic member's JoinGroup, that
    joins a consumer group without one (from v1 a heartbeat's client makes its own): a random
    UUID written as Kafka writes its ``Uuid``, 22 characters of URL-safe base64 and never a
    leading "-" (so no id reads as a command-line option)."""
    while True:
        out = base64.urlsafe_b64encode(uuid.uuid4().bytes).rstrip(b"=").decode("ascii")
        if not out.startswith("-"):
            return out


@dataclass(frozen=True)
class ConsumerGroupConfig:
    #: a member that sends no heartbeat for this long is removed, ms
    #: (group.consumer.session.timeout.ms)
    session_timeout_ms: int = 45_000
    #: how often members are told to heartbeat, ms (group.consumer.heartbeat.interval.ms)
    heartbeat_interval_ms: int = 5_000
    #: the interval told instead to a member in the middle of a reconciliation (partitions to
    #: revoke, or partitions of its target still owned by a member that will release them), ms;
    #: never more than ``heartbeat_interval_ms``. offsetlog's own setting, Kafka has none
    #: (group.consumer.reconciliation.heartbeat.interval.ms; docs/GROUPS.md, "Heartbeat
    #: intervals")
    reconciliation_heartbeat_interval_ms: int = 250
    #: most members a consumer group may have; None = unlimited (group.consumer.max.size)
    max_size: int | None = None
    #: the server assignors, the first the default (group.consumer.assignors)
    assignors: tuple[str, ...] = DEFAULT_ASSIGNORS
    #: which way a group may change protocol while it has members (KIP-848's online
    #: migration): bidirectional, upgrade, downgrade or disabled
    #: (group.consumer.migration.policy)
    migration_policy: str = "bidirectional"
    member_id_factory: Callable[[], str] = field(default=random_member_id, compare=False)

    def __post_init__(self) -> None:
        for name in ("session_timeout_ms", "heartbeat_interval_ms"):
            v = getattr(self, name)
            if not isinstance(v, int) or isinstance(v, bool) or v < 1:
                raise ValueError(f"{name} must be an int >= 1, not {v!r}")
        v = self.reconciliation_heartbeat_interval_ms
        if (not isinstance(v, int) or isinstance(v, bool)
                or v < MIN_RECONCILIATION_INTERVAL_MS):
            raise ValueError("reconciliation_heartbeat_interval_ms must be an int >= "
                             f"{MIN_RECONCILIATION_INTERVAL_MS}, not {v!r}")
        if self.max_size is not None and (not isinstance(self.max_size, int)
                                          or isinstance(self.max_size, bool) or self.max_size < 1):
            raise ValueError(f"max_size must be None or an int >= 1, not {self.max_size!r}")
        if self.migration_policy not in MIGRATION_POLICIES:
            raise ValueError(f"migration_policy must be one of {', '.join(MIGRATION_POLICIES)}, "
                             f"not {self.migration_policy!r}")
        if not self.assignors or any(a not in ASSIGNORS for a in self.assignors):
            raise ValueError(f"assignors must name some of {sorted(ASSIGNORS)}, "
                             f"not {self.assignors!r}")

    @property
    def upgrade_enabled(self) -> bool:
        """A classic group with members may become a consumer group."""
        return self.migration_policy in ("bidirectional", "upgrade")

    @property
    def downgrade_enabled(self) -> bool:
        """A consumer group whose members all speak the classic protocol may become a classic
        group again."""
        return self.migration_policy in ("bidirectional", "downgrade")
