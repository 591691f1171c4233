"""Exceptions, named after Kafka's error codes, under one root.

Every exception offsetlog raises on purpose is an :class:`OffsetlogError`. Those that
mirror a Kafka protocol error carry its numeric ``code`` so tooling can map them back.
"""

from __future__ import annotations


class OffsetlogError(Exception):
    """Root of every offsetlog error."""

    code: int | None = None  # Kafka's error code, where one exists


class InvalidCommitError(OffsetlogError, ValueError):
    """A commit (or delete) request is malformed: wrong types, negative offsets, ...

    Also a ``ValueError`` so generic input-checking code catches it.
    """


class InvalidArgumentError(OffsetlogError, ValueError):
    """An argument of a store call other than a commit's offsets is invalid (``now_ms``,
    ``timeout``, a list of log partitions): refused before anything happens. Also a
    ``ValueError``."""


class InvalidGroupIdError(InvalidCommitError):
    code = 24


class InvalidTopicError(InvalidCommitError):
    code = 17


class TopicAlreadyExistsError(OffsetlogError):
    """``create_topic`` of a topic the registry already holds (Kafka's TOPIC_ALREADY_EXISTS)."""

    code = 36


class OffsetMetadataTooLargeError(InvalidCommitError):
    code = 12

    def __init__(self, message: str, *, length: int, limit: int) -> None:
        super().__init__(message)
        self.length = length
        self.limit = limit


class IllegalGenerationError(OffsetlogError):
    code = 22


class UnknownMemberIdError(OffsetlogError):
    code = 25


class RebalanceInProgressError(OffsetlogError):
    code = 27


class FencedInstanceIdError(OffsetlogError):
    code = 82


class CoordinatorLoadInProgressError(OffsetlogError):
    code = 14


class StoreClosedError(OffsetlogError):
    """The store was closed; open it again to use it."""


class StoreLockedError(OffsetlogError):
    """The store directory is already open (in this process or another one)."""

    def __init__(self, message: str, *, path: str) -> None:
        super().__init__(message)
        self.path = path


class StoreNotFoundError(OffsetlogError):
    """``OffsetStore.open(path, create=False)`` (and every tool but the ones that create a
    store) found no store at ``path``: no such directory, or one without ``meta.json``."""

    def __init__(self, message: str, *, path: str) -> None:
        super().__init__(message)
        self.path = path


class StoreFailedError(OffsetlogError):
    """A write or fsync failed earlier; the store refuses every commit until it is reopened.

    After a failed fsync the kernel may have dropped the dirty pages, so what is on disk is
    unknown: only a reopen (which re-reads and repairs the log) can tell.
    """

    def __init__(self, message: str, *, cause: BaseException | None = None) -> None:
        super().__init__(message)
        self.cause = cause


class StoreConfigError(OffsetlogError, ValueError):
    """The options given to ``OffsetStore.open`` are invalid or contradict the directory."""


class CorruptLogError(OffsetlogError):
    """A record batch before the tail of a log failed its checks.

    :ivar path: the segment file
    :ivar position: byte position of the bad batch within that file
    :ivar reason: a stable reason string (``"checksum mismatch"``, ``"bad length"``, ...)
    """

    code = 2  # CORRUPT_MESSAGE

    def __init__(self, path: str, position: int, reason: str) -> None:
        super().__init__(f"{path}: corrupt record batch at byte {position}: {reason}")
        self.path = path
        self.position = position
        self.reason = reason


class UnsupportedVersionError(OffsetlogError):
    """A record or file is of a format version newer than this code understands; or (the
    wire server's) a request of a version its sender may not use, as Kafka's
    UNSUPPORTED_VERSION answers a consumer-protocol member's OffsetCommit below v9."""

    code = 35


class CommitTimeoutError(OffsetlogError, TimeoutError):
    """``commit_sync(timeout=...)`` ran out before the commit became durable.

    The commit may still complete later: it stays queued and is applied in order.
    """


# -- transactions (docs/TRANSACTIONS.md) ----------------------------------------------------

class TransactionError(OffsetlogError):
    """Root of the transactional errors."""


class ProducerFencedError(TransactionError):
    """A newer ``init_transactions`` for the same transactional id bumped the epoch: this
    handle is a zombie and every later call of it fails (Kafka's PRODUCER_FENCED)."""

    code = 90

    def __init__(self, message: str, *, transactional_id: str, producer_epoch: int,
                 current_epoch: int | None) -> None:
        super().__init__(message)
        self.transactional_id = transactional_id
        self.producer_epoch = producer_epoch
        self.current_epoch = current_epoch


class InvalidTxnStateError(TransactionError):
    """The call is not allowed in the transaction's current state (e.g. ``commit()`` with
    no transaction begun, ``commit_offsets`` after ``prepare()``)."""

    code = 48


class TransactionTimeoutError(InvalidTxnStateError):
    """The store aborted this handle's transaction because it stayed open longer than its
    ``transaction_timeout_ms``. Call ``abort()`` to acknowledge it, then ``begin()`` again."""

    def __init__(self, message: str, *, transactional_id: str, timeout_ms: int) -> None:
        super().__init__(message)
        self.transactional_id = transactional_id
        self.timeout_ms = timeout_ms


class UnstableOffsetCommitError(TransactionError):
    """``fetch(..., require_stable=True)`` asked for partitions that have transactional
    offsets still pending (KIP-447); retry once the transaction has completed.

    :ivar partitions: the ``TopicPartition``s with pending offsets
    """

    code = 88

    def __init__(self, message: str, *, group_id: str, partitions: list) -> None:
        super().__init__(message)
        self.group_id = group_id
        self.partitions = partitions


class SnapshotError(OffsetlogError):
    """Taking (or discarding) an LMDB snapshot failed. Snapshots are a cache: the log is never
    touched by such a failure, and commits go on.

    :ivar failures: partition -> the exception, for ``store.snapshot()``
    """

    def __init__(self, message: str, *, failures: dict | None = None) -> None:
        super().__init__(message)
        self.failures = failures or {}


class SparkCompactionError(OffsetlogError):
    """A Spark compaction job failed; every store is as recovery will leave it (see the
    cause)."""
# -- the store's files on disk (docs/FORMAT.md, docs/RECOVERY.md) ----------------------------

class StoreFileError(OffsetlogError):
    """A file or directory of a store is not what the store expects, or cannot be used.

    :ivar path: the file or directory
    """

    def __init__(self, message: str, *, path: str) -> None:
        super().__init__(message)
        self.path = path


class SymlinkError(StoreFileError):
    """A symbolic link where the store expects a file or directory of its own. The store never
    opens anything through a link: whoever can plant one could make it truncate or overwrite
    any file the process may write."""


class StoreIOError(StoreFileError, OSError):
    """The operating system refused an operation on a store file while the store was being
    opened or recovered (permission denied, a read-only file system, an I/O error).

    Also an ``OSError``: ``errno`` and ``filename`` are set.
    """

    def __init__(self, message: str, *, path: str, errno: int | None = None) -> None:
        super().__init__(message, path=path)
        self.message = message
        self.errno = errno
        self.filename = path

    def __str__(self) -> str:  # OSError's would print "[Errno n] None"
        return self.message


class MetaFileError(StoreConfigError):
    """``meta.json`` is unreadable, malformed or fails its checksum.

    :ivar path: the file
    """

    def __init__(self, message: str, *, path: str) -> None:
        super().__init__(message)
        self.path = path


class PartitionMismatchError(CorruptLogError):
    """A log partition holds records of a group (or transactional id) that hashes to another
    partition: the partition count in ``meta.json`` is not the one the log was written with,
    or segments were moved between partitions. Never silently re-hashed."""


class BatchTooLargeError(InvalidCommitError):
    """A commit call whose records would not fit in one record batch (the format's limit,
    ``offsetlog.log.format.MAX_BATCH_BYTES``). Nothing was written.

    :ivar size: an upper bound of the call's encoded records, in bytes
    :ivar limit: the most bytes a call may take
    """

    code = 10  # MESSAGE_TOO_LARGE

    def __init__(self, message: str, *, size: int, limit: int) -> None:
        super().__init__(message)
        self.size = size
        self.limit = limit
