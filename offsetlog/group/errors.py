"""Errors of the group coordinator that :mod:`offsetlog.errors` does not already define.

Each mirrors a Kafka protocol error and carries its numeric ``code``. The coordinator does not
raise them at callers of ``join_group`` and friends: it puts an instance in the response's
``error`` field, as a broker puts an error code in a response (see ``offsetlog.group.responses``).
``InconsistentGroupProtocolError`` is the assignors' class (one class per Kafka error), re-exported
here so ``from offsetlog.group.errors import ...`` finds every error a response can carry.
"""

from __future__ import annotations

from offsetlog.assignors.errors import InconsistentGroupProtocolError
from offsetlog.errors import (
    CoordinatorLoadInProgressError,
    FencedInstanceIdError,
    IllegalGenerationError,
    InvalidGroupIdError,
    OffsetlogError,
    RebalanceInProgressError,
    UnknownMemberIdError,
)

__all__ = [
    "CoordinatorLoadInProgressError", "CoordinatorNotAvailableError", "FencedInstanceIdError",
    "GroupIdNotFoundError", "GroupMaxSizeReachedError", "GroupSubscribedToTopicError",
    "IllegalGenerationError",
    "IllegalGroupTransitionError", "InconsistentGroupProtocolError", "InvalidGroupIdError",
    "InvalidGroupMetadataError", "InvalidSessionTimeoutError", "MemberIdRequiredError",
    "NonEmptyGroupError", "RebalanceInProgressError", "UnknownMemberIdError",
]


class CoordinatorNotAvailableError(OffsetlogError):
    """The group is being unloaded or deleted (Kafka answers this for a Dead group); retry."""

    code = 15


class InvalidSessionTimeoutError(OffsetlogError):
    """``session_timeout_ms`` is outside ``[min_session_timeout_ms, max_session_timeout_ms]``.

    :ivar session_timeout_ms: what the member asked for
    :ivar minimum: the configured lower bound (ms)
    :ivar maximum: the configured upper bound (ms)
    """

    code = 26

    def __init__(self, message: str, *, session_timeout_ms: int, minimum: int,
                 maximum: int) -> None:
        super().__init__(message)
        self.session_timeout_ms = session_timeout_ms
        self.minimum = minimum
        self.maximum = maximum


class NonEmptyGroupError(OffsetlogError):
    """A group with members cannot be deleted."""

    code = 68


class GroupSubscribedToTopicError(OffsetlogError):
    """Offsets of a topic that members of the group subscribe to cannot be deleted
    (OffsetDelete, KIP-496): the members would commit them again, or restart from the reset
    policy under a running consumer.

    :ivar partitions: the requested partitions whose topics are subscribed, sorted
    """

    code = 86

    def __init__(self, message: str, *, partitions) -> None:
        super().__init__(message)
        self.partitions = partitions


class GroupIdNotFoundError(OffsetlogError):
    """The group does not exist (answer to deleting an unknown group)."""

    code = 69


class MemberIdRequiredError(OffsetlogError):
    """KIP-394: a new dynamic member must join again with the member id this response carries.

    The id is in the response's ``member_id`` (as in Kafka, not in the error).
    """

    code = 79


class GroupMaxSizeReachedError(OffsetlogError):
    """The group already has ``max_size`` members."""

    code = 81


class IllegalGroupTransitionError(OffsetlogError):
    """A state change that the transition table forbids: a coordinator bug, never a client error.

    The group keeps its state. :ivar source: the current state :ivar target: the refused one
    """

    def __init__(self, message: str, *, source: str, target: str) -> None:
        super().__init__(message)
        self.source = source
        self.target = target


class InvalidGroupMetadataError(OffsetlogError, ValueError):
    """A GROUP_METADATA value lacks a required field or has one of the wrong type."""
