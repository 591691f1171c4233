"""The GROUP_METADATA record value (record version 0): what a group's state looks like in the log,
and the two conversions, :func:`group_value` (live group -> value) and :func:`load_group`
(value -> group, as after a restart).

The value is a msgpack-friendly dict (only str, int, bytes, None, lists and dicts), modelled on
Kafka's ``GroupMetadataValue`` v3. Every field is listed below with the version that introduced
it and the default a reader uses when it is absent, so fields can be added without a version
bump; a change that old readers must not ignore bumps the record version, and
``offsetlog.log.records.check_version`` makes old readers refuse it. docs/GROUPS.md shows the same
table for users.

The value is the *durable* part of a group. The soft state (parked requests, session deadlines,
who still has to rejoin or sync) is rebuilt on load: a loaded group is Stable if it has members
and Empty otherwise, and each member's session deadline is restarted at load time.
"""

from __future__ import annotations

from typing import Any

from offsetlog.group.errors import InvalidGroupMetadataError
from offsetlog.group.group import Group
from offsetlog.group.member import Member
from offsetlog.group.state import EMPTY, STABLE
from offsetlog.log.records import GROUP_METADATA, VALUE_DEFAULTS

#: the record version this module writes and reads (offsetlog.log.records.group_metadata writes it)
VERSION = 0

_REQUIRED = object()

#: group-level fields: name -> (since version, default, allowed types, meaning)
GROUP_FIELDS: dict[str, tuple[int, Any, tuple, str]] = {
    "protocol_type": (0, VALUE_DEFAULTS[GROUP_METADATA]["protocol_type"], (str, type(None)),
                      'what the members speak: "consumer" for Kafka-style consumers'),
    "generation": (0, VALUE_DEFAULTS[GROUP_METADATA]["generation"], (int,),
                   "generation id; +1 at every completed rebalance"),
    "protocol": (0, VALUE_DEFAULTS[GROUP_METADATA]["protocol"], (str, type(None)),
                 "the protocol the vote chose (the assignor name); None when Empty"),
    "leader": (0, VALUE_DEFAULTS[GROUP_METADATA]["leader"], (str, type(None)),
               "member id of the leader; None when Empty"),
    "current_state_timestamp": (0, VALUE_DEFAULTS[GROUP_METADATA]["current_state_timestamp"],
                                (int, type(None)),
                                "epoch ms the group entered the state it was written in "
                                "(Stable or Empty); KIP-211 expiry counts from it"),
    "members": (0, VALUE_DEFAULTS[GROUP_METADATA]["members"], (list,),
                "the members, in join order (oldest first); see MEMBER_FIELDS"),
}

#: fields of each entry of ``members``: name -> (since version, default, allowed types, meaning)
MEMBER_FIELDS: dict[str, tuple[int, Any, tuple, str]] = {
    "member_id": (0, _REQUIRED, (str,), "the member id the coordinator gave it"),
    "group_instance_id": (0, None, (str, type(None)), "static member id (KIP-345), or None"),
    "client_id": (0, "", (str,), "the client id it joined with"),
    "client_host": (0, "", (str,), "the host it joined from, if the caller knows it"),
    "session_timeout_ms": (0, _REQUIRED, (int,), "ms without heartbeat before eviction"),
    "rebalance_timeout_ms": (0, None, (int, type(None)),
                             "ms it may take to rejoin a rebalance (absent: the session timeout)"),
    "subscription": (0, b"", (bytes,),
                     "its metadata for the chosen protocol (for consumers: the subscription)"),
    "assignment": (0, b"", (bytes,), "what the leader assigned it in this generation"),
}


def member_value(member: Member, protocol: str) -> dict[str, Any]:
    return {
        "member_id": member.member_id,
        "group_instance_id": member.group_instance_id,
        "client_id": member.client_id,
        "client_host": member.client_host,
        "session_timeout_ms": member.session_timeout_ms,
        "rebalance_timeout_ms": member.rebalance_timeout_ms,
        "subscription": member.metadata(protocol),
        "assignment": member.assignment,
    }


def group_value(group: Group) -> dict[str, Any]:
    """The GROUP_METADATA value of ``group`` as it is now.

    Written when a generation becomes Stable (the leader's SyncGroup), when a static member is
    replaced in a Stable group, and when a rebalance ends Empty. Every field is written, even at
    its default: these records are rare, and a complete value reads better in dumps.
    """
    if group.members and group.protocol is None:
        raise ValueError(f"group {group.group_id!r} has members but no protocol")
    return {
        "protocol_type": group.protocol_type,
        "generation": group.generation,
        "protocol": group.protocol,
        "leader": group.leader,
        "current_state_timestamp": group.state_timestamp,
        "members": [member_value(m, group.protocol) for m in group.members.values()],
    }


def _read(fields: dict, value: dict, where: str) -> dict[str, Any]:
    out = {}
    for name, (_since, default, types, _doc) in fields.items():
        if name in value:
            v = value[name]
            if not isinstance(v, types) or (isinstance(v, bool) and int in types):
                raise InvalidGroupMetadataError(
                    f"{where}: field {name!r} is {type(v).__name__}, expected "
                    f"{' or '.join(t.__name__ for t in types)}")
            out[name] = v
        elif default is _REQUIRED:
            raise InvalidGroupMetadataError(f"{where}: required field {name!r} is missing")
        else:
            out[name] = list(default) if isinstance(default, list) else default
    return out


def load_group(group_id: str, value: dict) -> Group:
    """Rebuild ``group_id`` from its GROUP_METADATA value: Stable with the stored members and
    assignments, or Empty. Members support exactly the stored protocol with the stored
    subscription, as Kafka reloads them.

    :raises InvalidGroupMetadataError: a missing required field or a field of the wrong type
    """
    if not isinstance(value, dict):
        raise InvalidGroupMetadataError(f"group {group_id!r}: value is not a map")
    where = f"GROUP_METADATA of {group_id!r}"
    g = _read(GROUP_FIELDS, value, where)
    members = [_read(MEMBER_FIELDS, m if isinstance(m, dict) else {}, f"{where}, member {i}")
               for i, m in enumerate(g["members"])]
    if members and g["protocol"] is None:
        raise InvalidGroupMetadataError(f"{where}: members but no protocol")
    group = Group(group_id, state=STABLE if members else EMPTY,
                  state_timestamp=g["current_state_timestamp"], generation=g["generation"],
                  protocol_type=g["protocol_type"], protocol=g["protocol"], leader=g["leader"])
    for m in members:
        session = m["session_timeout_ms"]
        rebalance = m["rebalance_timeout_ms"]
        group.add(Member(m["member_id"], m["group_instance_id"], m["client_id"], m["client_host"],
                         session, session if rebalance is None else rebalance,
                         ((g["protocol"], m["subscription"]),), m["assignment"]))
    if group.leader is not None and group.leader not in group.members:
        raise InvalidGroupMetadataError(f"{where}: leader {group.leader!r} is not a member")
    return group
