"""``offsetlog serve``'s settings: Kafka broker property names, parsed from ``--config
KEY=VALUE``. An unknown key or a bad value is an error at start (``ConfigError``)."""

from __future__ import annotations

from dataclasses import dataclass, field, fields

from offsetlog.group import GroupConfig
from offsetlog.group.consumer import ConsumerGroupConfig
from offsetlog.group.consumer.config import MIGRATION_POLICIES, MIN_RECONCILIATION_INTERVAL_MS
from offsetlog.server.security_config import SECURITY_PROPERTIES, SecurityConfig


class ConfigError(ValueError):
    """A ``--config`` or ``--topic`` argument that cannot be used."""


def _bool(text: str) -> bool:
    if text.lower() in ("true", "false"):
        return text.lower() == "true"
    raise ValueError(f"{text!r} is not true or false")


def _int(low: int, high: int | None = None):
    def parse(text: str) -> int:
        v = int(text)
        if v < low:
            raise ValueError(f"{v} is below {low}")
        if high is not None and v > high:
            raise ValueError(f"{v} is above {high}")
        return v
    return parse


#: the authorizers ``authorizer.class.name`` accepts: Kafka's (the KRaft one and the ZooKeeper
#: one it replaced), both meaning offsetlog's own (offsetlog.acl); "" is none
AUTHORIZERS = ("org.apache.kafka.metadata.authorizer.StandardAuthorizer",
               "kafka.security.authorizer.AclAuthorizer", "")


def _authorizer(text: str) -> str:
    if text not in AUTHORIZERS:
        raise ValueError("the authorizers are " + ", ".join(a for a in AUTHORIZERS if a))
    return text


def _text(text: str) -> str:
    return text


def _names(text: str) -> tuple[str, ...]:
    names = tuple(n.strip() for n in text.split(",") if n.strip())
    if not names or any(n not in ("uniform", "range") for n in names):
        raise ValueError("the server assignors are uniform and range")
    return names


def _migration_policy(text: str) -> str:
    policy = text.strip().lower()  # Kafka reads it case-insensitively
    if policy not in MIGRATION_POLICIES:
        raise ValueError("the policies are " + ", ".join(MIGRATION_POLICIES))
    return policy


#: Kafka property -> (ServerConfig field, parser); Kafka's defaults are the fields' defaults
PROPERTIES = {
    "group.initial.rebalance.delay.ms": ("initial_rebalance_delay_ms", _int(0)),
    "group.min.session.timeout.ms": ("min_session_timeout_ms", _int(0)),
    "group.max.session.timeout.ms": ("max_session_timeout_ms", _int(0)),
    "group.max.size": ("group_max_size", _int(1)),
    "group.consumer.session.timeout.ms": ("consumer_session_timeout_ms", _int(1)),
    "group.consumer.heartbeat.interval.ms": ("consumer_heartbeat_interval_ms", _int(1)),
    # offsetlog's own (Kafka has no such setting): the interval told to a member in the middle
    # of a reconciliation (docs/GROUPS.md, "Heartbeat intervals")
    "group.consumer.reconciliation.heartbeat.interval.ms":
        ("consumer_reconciliation_heartbeat_interval_ms", _int(MIN_RECONCILIATION_INTERVAL_MS)),
    "group.consumer.max.size": ("consumer_group_max_size", _int(1)),
    "group.consumer.assignors": ("consumer_assignors", _names),
    "group.consumer.migration.policy": ("consumer_migration_policy", _migration_policy),
    "offsets.retention.minutes": ("offsets_retention_minutes", _int(1)),
    "offsets.retention.check.interval.ms": ("retention_check_interval_ms", _int(1)),
    "offsets.topic.num.partitions": ("log_partitions", _int(1)),
    "offset.metadata.max.bytes": ("metadata_max_bytes", _int(0)),
    "auto.create.topics.enable": ("auto_create_topics", _bool),
    "num.partitions": ("num_partitions", _int(1)),
    "socket.request.max.bytes": ("socket_request_max_bytes", _int(1)),
    "transaction.max.timeout.ms": ("transaction_max_timeout_ms", _int(1)),
    "transaction.abort.timed.out.transaction.cleanup.interval.ms":
        ("transaction_check_interval_ms", _int(1)),
    "connections.max.idle.ms": ("connections_max_idle_ms", _int(1)),
    # capped (Kafka is not): each is a thread of this process, and past a few they only
    # wait longer for the GIL
    "num.io.threads": ("num_io_threads", _int(1, 256)),
    # ACLs (docs/SECURITY.md)
    "authorizer.class.name": ("authorizer", _authorizer),
    "super.users": ("super_users", _text),
    "allow.everyone.if.no.acl.found": ("allow_everyone_if_no_acl", _bool),
    # the node's rack: Metadata gives it for the node (every partition's one replica)
    "broker.rack": ("broker_rack", _text),
}


@dataclass(frozen=True)
class ServerConfig:
    #: group.initial.rebalance.delay.ms: a new group waits this long for more members
    initial_rebalance_delay_ms: int = 3_000
    #: group.min.session.timeout.ms / group.max.session.timeout.ms
    min_session_timeout_ms: int = 6_000
    max_session_timeout_ms: int = 1_800_000
    #: group.max.size: None = unlimited
    group_max_size: int | None = None
    #: group.consumer.*: the consumer group protocol (KIP-848), Kafka's defaults
    consumer_session_timeout_ms: int = 45_000
    consumer_heartbeat_interval_ms: int = 5_000
    #: group.consumer.reconciliation.heartbeat.interval.ms, offsetlog's own: the interval
    #: answered instead to a member with partitions to revoke or waiting for partitions another
    #: member is releasing (never above the heartbeat interval)
    consumer_reconciliation_heartbeat_interval_ms: int = 250
    consumer_group_max_size: int | None = None
    consumer_assignors: tuple[str, ...] = ("uniform", "range")
    #: group.consumer.migration.policy: bidirectional, upgrade, downgrade or disabled
    consumer_migration_policy: str = "bidirectional"
    #: offsets.retention.minutes (7 days)
    offsets_retention_minutes: int = 7 * 24 * 60
    #: offsets.retention.check.interval.ms
    retention_check_interval_ms: int = 600_000
    #: offsets.topic.num.partitions: log partitions of a new store (an existing store keeps
    #: its own count)
    log_partitions: int | None = None
    #: offset.metadata.max.bytes
    metadata_max_bytes: int = 4096
    #: auto.create.topics.enable: Metadata creates the topics it is asked about
    auto_create_topics: bool = True
    #: num.partitions: partitions of an auto-created topic, and of CreateTopics' -1
    num_partitions: int = 1
    #: socket.request.max.bytes (100 MiB): a longer frame closes its connection
    socket_request_max_bytes: int = 100 * 1024 * 1024
    #: transaction.max.timeout.ms: longest transaction timeout a producer may ask for
    transaction_max_timeout_ms: int = 900_000
    #: transaction.abort.timed.out.transaction.cleanup.interval.ms: how often transactions
    #: open past their timeout are looked for (and aborted, fencing their producer)
    transaction_check_interval_ms: int = 10_000
    #: connections.max.idle.ms (10 min): a connection that sends nothing and is owed nothing
    #: for this long is closed (a half-sent frame cannot hold one open)
    connections_max_idle_ms: int = 600_000
    #: num.io.threads: accepted, so a Kafka broker's configuration loads, and not used: each
    #: connection's thread does its own requests' work (connection.py)
    num_io_threads: int = 8
    #: listeners, TLS, SASL and connection limits (security_config.py, docs/SECURITY.md)
    security: SecurityConfig = field(default_factory=SecurityConfig)
    #: authorizer.class.name: "" (none: every request is allowed, the ACL APIs answer
    #: SECURITY_DISABLED) or Kafka's StandardAuthorizer, checking ACLs per request
    authorizer: str = ""
    #: super.users: principals (``User:NAME``) separated by semicolons, allowed everything
    super_users: str = ""
    #: allow.everyone.if.no.acl.found: allow an action on a resource no ACL applies to
    allow_everyone_if_no_acl: bool = False
    #: broker.rack: the rack Metadata names for this node, so every partition's (one) replica
    #: is in it; None: no rack, as Kafka's default. Kafka 4.4's server-side assignors
    #: (``uniform``, ``range``) do not read racks, and neither do ours (docs/GROUPS.md)
    broker_rack: str | None = None
    #: the settings given, by Kafka name (for the startup log)
    given: dict = field(default_factory=dict, compare=False)

    @classmethod
    def parse(cls, items: list[str] | None) -> "ServerConfig":
        """``KEY=VALUE`` strings -> config.

        :raises ConfigError: an unknown key, a malformed item or a bad value
        """
        values: dict = {}
        security: dict = {}
        given: dict = {}
        for item in items or ():
            key, sep, text = item.partition("=")
            key = key.strip()
            if not sep:
                raise ConfigError(f"--config {item!r}: expected KEY=VALUE")
            if key not in PROPERTIES and key not in SECURITY_PROPERTIES:
                raise ConfigError(f"--config {key}: unknown setting; known: "
                                  + ", ".join(sorted({**PROPERTIES, **SECURITY_PROPERTIES})))
            name, parse = PROPERTIES.get(key) or SECURITY_PROPERTIES[key]
            try:
                (values if key in PROPERTIES else security)[name] = parse(text.strip())
            except ValueError as e:
                raise ConfigError(f"--config {key}={text}: {e}") from None
            given[key] = text.strip()
        config = cls(**values, security=SecurityConfig(**security), given=given)
        if config.min_session_timeout_ms > config.max_session_timeout_ms:
            raise ConfigError("group.min.session.timeout.ms is above "
                              "group.max.session.timeout.ms")
        delay = config.security.failed_authentication_delay_ms
        if delay >= config.connections_max_idle_ms:  # Kafka's check, and its words
            raise ConfigError(f"connection.failed.authentication.delay.ms={delay} should always "
                              "be less than connections.max.idle.ms="
                              f"{config.connections_max_idle_ms} to prevent failed "
                              "authentication responses from timing out")
        return config

    def group_config(self) -> GroupConfig:
        return GroupConfig(min_session_timeout_ms=self.min_session_timeout_ms,
                           max_session_timeout_ms=self.max_session_timeout_ms,
                           initial_rebalance_delay_ms=self.initial_rebalance_delay_ms,
                           max_size=self.group_max_size)

    def consumer_group_config(self) -> ConsumerGroupConfig:
        return ConsumerGroupConfig(session_timeout_ms=self.consumer_session_timeout_ms,
                                   heartbeat_interval_ms=self.consumer_heartbeat_interval_ms,
                                   reconciliation_heartbeat_interval_ms=(
                                       self.consumer_reconciliation_heartbeat_interval_ms),
                                   max_size=self.consumer_group_max_size,
                                   assignors=self.consumer_assignors,
                                   migration_policy=self.consumer_migration_policy)

    @property
    def retention_ms(self) -> int:
        return self.offsets_retention_minutes * 60_000


assert {name for name, _ in PROPERTIES.values()} <= {f.name for f in fields(ServerConfig)}


def parse_topic(spec: str, default_partitions: int) -> tuple[str, int]:
    """``NAME[:PARTITIONS]`` of ``--topic``."""
    name, sep, count = spec.rpartition(":")
    if not sep:
        return spec, default_partitions
    try:
        n = int(count)
    except ValueError:
        raise ConfigError(f"--topic {spec!r}: expected NAME:PARTITIONS") from None
    if n < 1:
        raise ConfigError(f"--topic {spec!r}: partitions must be >= 1")
    return name, n
