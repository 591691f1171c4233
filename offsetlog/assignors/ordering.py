"""The orders Kafka's assignors sort by, reproduced exactly.

Kafka sorts member ids, instance ids and topic names with Java's ``String.compareTo``, which
compares UTF-16 code units; Python compares code points. The two disagree only when a string
holds a character above U+FFFF next to one in U+E000..U+FFFF, but "exactly Kafka's assignment"
should not depend on that, so every string sort in this package goes through :func:`java_order`.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import TYPE_CHECKING

if TYPE_CHECKING:  # pragma: no cover
    from offsetlog.assignors.base import Subscription


def java_order(s: str) -> bytes:
    """Sort key that orders strings as Java's ``String.compareTo`` does.

    Big-endian UTF-16 compares byte-wise exactly as its code units compare, and a proper prefix
    sorts first in both. ``surrogatepass`` keeps lone surrogates (legal in Java strings) sortable.
    """
    return s.encode("utf-16-be", "surrogatepass")


def sorted_java(strings: Iterable[str]) -> list[str]:
    """``strings`` sorted in Java's order."""
    return sorted(strings, key=java_order)


def member_order(subscriptions: Mapping[str, Subscription]) -> list[str]:
    """Member ids in the order range and roundrobin lay members out (Kafka's ``MemberInfo``).

    Static members (those with a ``group_instance_id``) come first, ordered by instance id, so a
    static member keeps its place across restarts that change its member id; dynamic members
    follow, ordered by member id. Two members claiming one instance id cannot happen in a live
    group; should it, the member id breaks the tie so the order is still total.
    """

    def key(member_id: str) -> tuple[int, bytes, bytes]:
        instance_id = subscriptions[member_id].group_instance_id
        if instance_id is not None:
            return (0, java_order(instance_id), java_order(member_id))
        return (1, java_order(member_id), b"")

    return sorted(subscriptions, key=key)
