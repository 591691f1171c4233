"""The group coordinator's argument checks: a programming error (a wrong type, a string no
record could hold) raises at once, before any state changes; a protocol error (an unknown
member, a stale generation) is not one of these and goes in the call's response."""

from __future__ import annotations

from collections.abc import Mapping

from offsetlog.group.member import Protocol
from offsetlog.validation import check_encodable


def check_str(name: str, v) -> None:
    if not isinstance(v, str):
        raise TypeError(f"{name} must be a str, not {type(v).__name__}")
    # Before the state changes: a change whose records cannot be written would live in
    # memory alone (and fail every later write of the group's metadata).
    check_encodable(name, v, ValueError)


def check_optional_str(name: str, v) -> None:
    if v is not None:
        check_str(name, v)


def check_int(name: str, v) -> None:
    if not isinstance(v, int) or isinstance(v, bool):
        raise TypeError(f"{name} must be an int, not {v!r}")


def check_protocols(protocols) -> tuple[Protocol, ...]:
    if isinstance(protocols, (str, bytes)):
        raise TypeError("protocols must be a list of (name, metadata) pairs")
    out = []
    for entry in protocols:
        if not (isinstance(entry, tuple | list) and len(entry) == 2):
            raise TypeError(f"protocols must hold (name, metadata) pairs, not {entry!r}")
        name, metadata = entry
        check_str("protocol name", name)
        if not isinstance(metadata, (bytes, bytearray, memoryview)):
            raise TypeError(f"protocol metadata must be bytes, not {type(metadata).__name__}")
        out.append((name, bytes(metadata)))
    return tuple(out)


def check_assignments(assignments) -> dict[str, bytes]:
    if assignments is None:
        return {}
    if not isinstance(assignments, Mapping):
        raise TypeError("assignments must map member id -> bytes")
    out = {}
    for mid, data in assignments.items():
        check_str("assignment member id", mid)
        if not isinstance(data, (bytes, bytearray, memoryview)):
            raise TypeError(f"assignment of {mid!r} must be bytes, not {type(data).__name__}")
        out[mid] = bytes(data)
    return out
