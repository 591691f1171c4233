"""DescribeClientQuotas (48): offsetlog has no quotas (docs/SECURITY.md), so every valid
filter matches nothing, and the answer is an empty list, as Kafka's broker answers when no
quota is set. ``kafka-configs --describe --entity-type users`` asks it before it asks for the
users' SCRAM credentials, so the tool needs it to describe users at all.

A filter is checked as Kafka 4.4 checks it (measured against the broker): an empty or
repeated entity type and an exact match without a name are INVALID_REQUEST, an entity type
other than user, client-id and ip UNSUPPORTED_VERSION, an ip component beside a user or
client-id one INVALID_REQUEST. AlterClientQuotas is not offered: setting a quota this server
would not enforce would be a lie, and clients report the API as unsupported.
"""

from __future__ import annotations

from offsetlog.server import errors as E
from offsetlog.server.context import Call, Context

#: Kafka's entity types of client quotas
ENTITY_TYPES = ("user", "client-id", "ip")
#: match types: the name given, the default entity, any entity
EXACT, DEFAULT, ANY = 0, 1, 2


def filter_error(components) -> tuple[int, str] | None:
    """(error code, Kafka's message) of an invalid filter, or None."""
    seen: set[str] = set()
    for c in components:
        if not c.entity_type:
            return E.INVALID_REQUEST, "Invalid empty entity type."
        if c.entity_type in seen:
            return (E.INVALID_REQUEST, f"Entity type {c.entity_type} cannot appear more than "
                                       "once in the filter.")
        seen.add(c.entity_type)
        if c.match_type == EXACT and c.match is None:
            return (E.INVALID_REQUEST, "Request specified MATCH_TYPE_EXACT, but set match "
                                       "string to null.")
        if c.match_type not in (EXACT, DEFAULT, ANY):
            return E.INVALID_REQUEST, f"Unknown match type {c.match_type}"
        if c.entity_type not in ENTITY_TYPES:
            return E.UNSUPPORTED_VERSION, f"Unsupported entity type {c.entity_type}"
    if "ip" in seen and seen & {"user", "client-id"}:
        return (E.INVALID_REQUEST, "Invalid entity filter component combination. IP filter "
                                   "component should not be used with user or clientId filter "
                                   "component.")
    return None


def describe_client_quotas(ctx: Context, call: Call, now_ms: int):
    problem = filter_error(call.body.components)
    if problem is not None:
        return call.respond(error_code=problem[0], error_message=problem[1], entries=None)
    return call.respond(error_code=E.NONE, error_message="", entries=[])
