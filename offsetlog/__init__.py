"""offsetlog: an embedded, crash-safe consumer-offset store modelled on Kafka's __consumer_offsets.

Start at :class:`OffsetStore` (``offsetlog.store``); docs/DESIGN.md maps the modules.
"""

import importlib
from typing import TYPE_CHECKING, Any

from offsetlog.types import OffsetAndMetadata, TopicPartition

# -- every error class is importable from here (tests/test_public_api.py checks the list) ----
# offsetlog.errors is imported now; the groups', assignors' and member's errors on first use
# (their packages import the engine, which imports this package).
from offsetlog.errors import (CommitTimeoutError, CoordinatorLoadInProgressError,
                              CorruptLogError, FencedInstanceIdError, IllegalGenerationError,
                              InvalidCommitError, InvalidGroupIdError, InvalidTopicError,
                              InvalidTxnStateError, OffsetlogError, OffsetMetadataTooLargeError,
                              ProducerFencedError, RebalanceInProgressError, SnapshotError,
                              StoreClosedError, StoreConfigError, StoreFailedError,
                              StoreLockedError, StoreNotFoundError, TransactionError,
                              TransactionTimeoutError, UnknownMemberIdError,
                              UnstableOffsetCommitError, UnsupportedVersionError)

_LAZY = {
    "offsetlog.group.errors": (
        "CoordinatorNotAvailableError", "GroupIdNotFoundError", "GroupMaxSizeReachedError",
        "GroupSubscribedToTopicError", "IllegalGroupTransitionError", "InvalidGroupMetadataError",
        "InvalidSessionTimeoutError", "MemberIdRequiredError", "NonEmptyGroupError"),
    "offsetlog.assignors.errors": (
        "AssignorArgumentError", "InconsistentGroupProtocolError", "InvalidAssignmentError",
        "UnknownAssignorError"),
    "offsetlog.member.errors": (
        "MemberClosedError", "NotSubscribedError", "PartitionNotAssignedError"),
}

if TYPE_CHECKING:  # the lazy names, for type checkers
    from offsetlog.assignors.errors import (AssignorArgumentError, InconsistentGroupProtocolError,
                                            InvalidAssignmentError, UnknownAssignorError)
    from offsetlog.group.errors import (CoordinatorNotAvailableError, GroupIdNotFoundError,
                                        GroupMaxSizeReachedError, GroupSubscribedToTopicError,
                                        IllegalGroupTransitionError, InvalidGroupMetadataError,
                                        InvalidSessionTimeoutError, MemberIdRequiredError,
                                        NonEmptyGroupError)
    from offsetlog.member.errors import (MemberClosedError, NotSubscribedError,
                                         PartitionNotAssignedError)
    from offsetlog.store import OffsetStore

__all__ = [
    "OffsetAndMetadata", "OffsetStore", "TopicPartition",
    # offsetlog.errors
    "CommitTimeoutError", "CoordinatorLoadInProgressError", "CorruptLogError",
    "FencedInstanceIdError", "IllegalGenerationError", "InvalidCommitError",
    "InvalidGroupIdError", "InvalidTopicError", "InvalidTxnStateError", "OffsetlogError",
    "OffsetMetadataTooLargeError", "ProducerFencedError", "RebalanceInProgressError",
    "SnapshotError", "StoreClosedError", "StoreConfigError", "StoreFailedError",
    "StoreLockedError", "StoreNotFoundError", "TransactionError", "TransactionTimeoutError",
    "UnknownMemberIdError", "UnstableOffsetCommitError", "UnsupportedVersionError",
    # offsetlog.group.errors, offsetlog.assignors.errors, offsetlog.member.errors
    "CoordinatorNotAvailableError", "GroupIdNotFoundError", "GroupMaxSizeReachedError",
    "GroupSubscribedToTopicError", "IllegalGroupTransitionError", "InvalidGroupMetadataError",
    "InvalidSessionTimeoutError", "MemberIdRequiredError", "NonEmptyGroupError",
    "AssignorArgumentError", "InconsistentGroupProtocolError", "InvalidAssignmentError",
    "UnknownAssignorError", "MemberClosedError", "NotSubscribedError",
    "PartitionNotAssignedError",
]
__version__ = "0.1.0"


def __getattr__(name: str) -> Any:
    # OffsetStore is imported on first use: the store wires recovery and compaction, which
    # import the format layer from this package, so an eager import here would be circular.
    if name == "OffsetStore":
        from offsetlog.store import OffsetStore
        return OffsetStore
    for module, names in _LAZY.items():
        if name in names:
            return getattr(importlib.import_module(module), name)
    raise AttributeError(f"module 'offsetlog' has no attribute {name!r}")
