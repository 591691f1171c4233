"""The Kafka errors of the consumer group protocol (KIP-848) that the classic coordinator never
answers. Each carries Kafka's numeric ``code``; the coordinator puts an instance in a response's
``error`` field rather than raising it."""

from __future__ import annotations

from offsetlog.errors import OffsetlogError


class InvalidRequestError(OffsetlogError):
    """The request breaks the API's rules (INVALID_REQUEST), e.g. a join without a subscription."""

    code = 42


class FencedMemberEpochError(OffsetlogError):
    """The member's epoch is not the coordinator's (FENCED_MEMBER_EPOCH): it must give up its
    partitions and join again with epoch 0."""

    code = 110


class UnreleasedInstanceIdError(OffsetlogError):
    """A static member joins with an instance id that another member still holds
    (UNRELEASED_INSTANCE_ID): the old one has not left with epoch -2."""

    code = 111


class UnsupportedAssignorError(OffsetlogError):
    """The member names a server assignor the coordinator does not have (UNSUPPORTED_ASSIGNOR)."""

    code = 112


class StaleMemberEpochError(OffsetlogError):
    """An offset commit or fetch names a member epoch that is not the member's current one
    (STALE_MEMBER_EPOCH)."""

    code = 113


class InvalidRegularExpressionError(OffsetlogError):
    """A member's SubscribedTopicRegex does not compile (INVALID_REGULAR_EXPRESSION)."""

    code = 128
