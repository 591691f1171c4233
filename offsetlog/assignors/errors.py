"""Errors raised by the assignors, the registry and the protocol vote.

They live here rather than in :mod:`offsetlog.errors` because only this package raises them;
all of them are :class:`~offsetlog.errors.OffsetlogError` so one ``except`` still catches
everything offsetlog raises.
"""

from __future__ import annotations

from offsetlog.errors import OffsetlogError


class AssignorArgumentError(OffsetlogError, ValueError):
    """An argument is of the right type but unusable: a negative partition count, a name already
    registered, a group with no members, assignors with no rebalance protocol in common."""


class UnknownAssignorError(OffsetlogError, KeyError):
    """``get_assignor(name)`` found nothing registered under ``name``.

    Also a ``KeyError``: the registry behaves like a mapping.

    :ivar name: the name asked for
    :ivar known: the names that are registered
    """

    def __init__(self, name: str, known: list[str]) -> None:
        super().__init__(name)
        self.name = name
        self.known = known

    def __str__(self) -> str:  # KeyError would print only repr(name)
        return f"no partition assignor named {self.name!r} (known: {', '.join(self.known)})"


class InconsistentGroupProtocolError(OffsetlogError, ValueError):
    """The members of a group share no protocol (Kafka's INCONSISTENT_GROUP_PROTOCOL).

    :ivar member_protocols: each member's protocols, as given to the vote
    """

    code = 23

    def __init__(self, message: str, *, member_protocols: dict[str, tuple[str, ...]]) -> None:
        super().__init__(message)
        self.member_protocols = member_protocols


class InvalidAssignmentError(OffsetlogError, ValueError):
    """An assignor returned something that cannot be handed to members: a partition given to two
    members, to an unknown member, a partition that does not exist, or (under the cooperative
    protocol) a partition given to one member while another still owns it."""
