"""offsetlog: an embedded, crash-safe consumer-offset store modelled on Kafka's __consumer_offsets.

Start at :class:`OffsetStore`; README.md shows the layers and docs/DESIGN.md follows a commit
through them. Every exception offsetlog raises is an :class:`OffsetlogError` and imports from
here.
"""

from importlib.metadata import PackageNotFoundError, version

from offsetlog.assignors.errors import (
    AssignorArgumentError,
    InconsistentGroupProtocolError,
    InvalidAssignmentError,
    UnknownAssignorError,
)
from offsetlog.errors import (
    CommitTimeoutError,
    CoordinatorLoadInProgressError,
    CorruptLogError,
    FencedInstanceIdError,
    IllegalGenerationError,
    InvalidCommitError,
    InvalidGroupIdError,
    InvalidTopicError,
    InvalidTxnStateError,
    OffsetlogError,
    OffsetMetadataTooLargeError,
    ProducerFencedError,
    RebalanceInProgressError,
    SnapshotError,
    SparkCompactionError,
    StoreClosedError,
    StoreConfigError,
    StoreFailedError,
    StoreLockedError,
    StoreNotFoundError,
    TopicAlreadyExistsError,
    TransactionError,
    TransactionTimeoutError,
    UnknownMemberIdError,
    UnstableOffsetCommitError,
    UnsupportedVersionError,
)
from offsetlog.group.errors import (
    CoordinatorNotAvailableError,
    GroupIdNotFoundError,
    GroupMaxSizeReachedError,
    GroupSubscribedToTopicError,
    IllegalGroupTransitionError,
    InvalidGroupMetadataError,
    InvalidSessionTimeoutError,
    MemberIdRequiredError,
    NonEmptyGroupError,
)
from offsetlog.member.errors import MemberClosedError, NotSubscribedError, PartitionNotAssignedError
from offsetlog.store import OffsetStore, StoreConfig, Transaction
from offsetlog.types import OffsetAndMetadata, TopicPartition

try:
    __version__ = version("offsetlog")  # pyproject.toml holds the one version number
except PackageNotFoundError:  # pragma: no cover - a source tree that was never installed
    __version__ = "0+unknown"

__all__ = [
    # the store and its value types
    "OffsetAndMetadata", "OffsetStore", "StoreConfig", "TopicPartition", "Transaction",
    # every error, under one root
    "OffsetlogError",
    "AssignorArgumentError", "CommitTimeoutError", "CoordinatorLoadInProgressError",
    "CoordinatorNotAvailableError", "CorruptLogError", "FencedInstanceIdError",
    "GroupIdNotFoundError", "GroupMaxSizeReachedError", "GroupSubscribedToTopicError",
    "IllegalGenerationError", "IllegalGroupTransitionError", "InconsistentGroupProtocolError",
    "InvalidAssignmentError", "InvalidCommitError", "InvalidGroupIdError",
    "InvalidGroupMetadataError", "InvalidSessionTimeoutError", "InvalidTopicError",
    "InvalidTxnStateError", "MemberClosedError", "MemberIdRequiredError", "NonEmptyGroupError",
    "NotSubscribedError", "OffsetMetadataTooLargeError", "PartitionNotAssignedError",
    "ProducerFencedError", "RebalanceInProgressError", "SnapshotError", "SparkCompactionError",
    "StoreClosedError", "StoreConfigError", "StoreFailedError", "StoreLockedError", "StoreNotFoundError",
    "TopicAlreadyExistsError", "TransactionError", "TransactionTimeoutError",
    "UnknownAssignorError", "UnknownMemberIdError", "UnstableOffsetCommitError",
    "UnsupportedVersionError",
]
