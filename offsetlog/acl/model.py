"""Kafka's ACL vocabulary: resource types, pattern types, operations and permissions by their
wire codes, a binding (one ACL) and a binding filter, as Kafka's ``AclBinding`` and
``AclBindingFilter`` define them. Plain values: no I/O, no state."""

from __future__ import annotations

from enum import IntEnum
from typing import NamedTuple


class ResourceType(IntEnum):
    UNKNOWN = 0
    ANY = 1  # filters only
    TOPIC = 2
    GROUP = 3
    CLUSTER = 4
    TRANSACTIONAL_ID = 5
    DELEGATION_TOKEN = 6
    USER = 7


class PatternType(IntEnum):
    UNKNOWN = 0
    ANY = 1  # filters only: any pattern type, the name compared exactly
    MATCH = 2  # filters only: every pattern that would match the name
    LITERAL = 3
    PREFIXED = 4


class Operation(IntEnum):
    UNKNOWN = 0
    ANY = 1  # filters only
    ALL = 2
    READ = 3
    WRITE = 4
    CREATE = 5
    DELETE = 6
    ALTER = 7
    DESCRIBE = 8
    CLUSTER_ACTION = 9
    DESCRIBE_CONFIGS = 10
    ALTER_CONFIGS = 11
    IDEMPOTENT_WRITE = 12
    CREATE_TOKENS = 13
    DESCRIBE_TOKENS = 14
    TWO_PHASE_COMMIT = 15


class Permission(IntEnum):
    UNKNOWN = 0
    ANY = 1  # filters only
    DENY = 2
    ALLOW = 3


#: a literal pattern of this name matches every resource of its type; ``User:*`` every user
WILDCARD = "*"
WILDCARD_PRINCIPAL = "User:*"
#: the one name of the cluster resource
CLUSTER_NAME = "kafka-cluster"
#: an unauthenticated connection's principal
ANONYMOUS = "User:ANONYMOUS"

#: the operations an ACL of each resource type can grant (Kafka's authorized-operations sets)
OPERATIONS = {
    ResourceType.TOPIC: (Operation.READ, Operation.WRITE, Operation.CREATE, Operation.DESCRIBE,
                         Operation.DELETE, Operation.ALTER, Operation.DESCRIBE_CONFIGS,
                         Operation.ALTER_CONFIGS),
    ResourceType.GROUP: (Operation.READ, Operation.DESCRIBE, Operation.DELETE,
                         Operation.DESCRIBE_CONFIGS, Operation.ALTER_CONFIGS),
    ResourceType.CLUSTER: (Operation.CREATE, Operation.CLUSTER_ACTION,
                           Operation.DESCRIBE_CONFIGS, Operation.ALTER_CONFIGS,
                           Operation.IDEMPOTENT_WRITE, Operation.ALTER, Operation.DESCRIBE),
    ResourceType.TRANSACTIONAL_ID: (Operation.DESCRIBE, Operation.WRITE,
                                    Operation.TWO_PHASE_COMMIT),
}


class AclBinding(NamedTuple):
    """One ACL: a resource pattern and an access control entry, by wire codes."""

    resource_type: int
    name: str
    pattern_type: int
    principal: str
    host: str
    operation: int
    permission: int

    def __str__(self) -> str:
        return (f"{ResourceType(self.resource_type).name}:{PatternType(self.pattern_type).name}"
                f":{self.name} {Permission(self.permission).name} {self.principal} "
                f"{Operation(self.operation).name} from {self.host}")


class AclFilter(NamedTuple):
    """Kafka's ``AclBindingFilter``: ANY codes and None strings match everything."""

    resource_type: int = ResourceType.ANY
    name: str | None = None
    pattern_type: int = PatternType.ANY
    principal: str | None = None
    host: str | None = None
    operation: int = Operation.ANY
    permission: int = Permission.ANY

    def matches(self, b: AclBinding) -> bool:
        if self.resource_type != ResourceType.ANY and self.resource_type != b.resource_type:
            return False
        if self.pattern_type not in (PatternType.ANY, PatternType.MATCH, b.pattern_type):
            return False
        if self.name is not None:
            if self.pattern_type in (PatternType.ANY, b.pattern_type):
                if self.name != b.name:
                    return False
            elif b.pattern_type == PatternType.LITERAL:  # MATCH
                if b.name not in (self.name, WILDCARD):
                    return False
            elif not self.name.startswith(b.name):  # MATCH, a prefixed pattern
                return False
        if self.principal is not None and self.principal != b.principal:
            return False
        if self.host is not None and self.host != b.host:
            return False
        if self.operation != Operation.ANY and self.operation != b.operation:
            return False
        return self.permission in (Permission.ANY, b.permission)

    def unknown(self) -> bool:
        """Kafka's ``isUnknown``: a code this version does not know (a filter so refused)."""
        return (_unknown(ResourceType, self.resource_type)
                or _unknown(PatternType, self.pattern_type)
                or _unknown(Operation, self.operation)
                or _unknown(Permission, self.permission))


def _unknown(enum, code: int) -> bool:
    try:
        return enum(code) == 0
    except ValueError:
        return True


def concrete(b: AclBinding) -> bool:
    """Whether every code of ``b`` names one thing: no ANY, MATCH or UNKNOWN (nor a code
    this version does not know). Kafka fails a whole CreateAcls request holding a binding
    that is not (UNKNOWN_SERVER_ERROR for each creation)."""
    return (not _unknown(ResourceType, b.resource_type) and b.resource_type != ResourceType.ANY
            and b.pattern_type in (PatternType.LITERAL, PatternType.PREFIXED)
            and not _unknown(Operation, b.operation) and b.operation != Operation.ANY
            and b.permission in (Permission.DENY, Permission.ALLOW))


def binding_error(b: AclBinding) -> str | None:
    """Why Kafka refuses to create the (``concrete``) binding ``b`` (INVALID_REQUEST, this
    message), or None: the broker's checks (the cluster's name, an empty name), then the
    controller's."""
    if b.resource_type == ResourceType.CLUSTER and b.name != CLUSTER_NAME:
        return f"The only valid name for the CLUSTER resource is {CLUSTER_NAME}"
    if not b.name:
        return "Invalid empty resource name"
    if ":" not in b.principal:
        return (f"Could not parse principal from `{b.principal}` (no colon is present "
                "separating the principal type from the principal name)")
    if not b.host:
        return "Host pattern cannot be null or empty"
    return None


def _name(enum, code: int) -> str:
    try:
        return enum(code).name
    except ValueError:
        return "UNKNOWN"
