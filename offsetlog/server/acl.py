"""The operations a client may perform on a resource, as Kafka reports them when asked
(DescribeGroups and Metadata's ``include_*_authorized_operations``).

This server has no authentication or authorizer, and Kafka without an authorizer allows
every operation its ACLs know for the resource type: that set, as the 32-bit field Kafka
answers (bit ``1 << code`` per operation). Not asked for, the field is ``NOT_ASKED``.
"""

from __future__ import annotations

#: Kafka's AclOperation codes
READ, WRITE, CREATE, DELETE, ALTER, DESCRIBE = 3, 4, 5, 6, 7, 8
CLUSTER_ACTION, DESCRIBE_CONFIGS, ALTER_CONFIGS, IDEMPOTENT_WRITE = 9, 10, 11, 12

#: the field's value when the request did not ask for the operations (INT32_MIN)
NOT_ASKED = -(2 ** 31)


def _field(*codes: int) -> int:
    bits = 0
    for code in codes:
        bits |= 1 << code
    return bits


#: every operation Kafka's ACLs know, per resource type
GROUP = _field(READ, DESCRIBE, DELETE, DESCRIBE_CONFIGS, ALTER_CONFIGS)
TOPIC = _field(READ, WRITE, CREATE, DESCRIBE, DELETE, ALTER, DESCRIBE_CONFIGS, ALTER_CONFIGS)
CLUSTER = _field(CREATE, CLUSTER_ACTION, DESCRIBE_CONFIGS, ALTER_CONFIGS, IDEMPOTENT_WRITE,
                 ALTER, DESCRIBE)


def authorized(asked: bool, every: int) -> int:
    """The field for a resource whose type allows ``every``: all of it when asked."""
    return every if asked else NOT_ASKED
