"""Every setting of a store in one place, with its unit and Kafka's name where one exists."""

from __future__ import annotations

import dataclasses
import inspect
from dataclasses import dataclass, field
from typing import Callable

from offsetlog.errors import StoreConfigError
from offsetlog.log._native import clock_ms
from offsetlog.log.format import HEADER_SIZE, MAX_BATCH_BYTES

FSYNC_POLICIES = ("always", "interval", "never")

#: the most ``max_group_commit_bytes`` may be: the commit calls of one round share a batch,
#: which a reader refuses beyond MAX_BATCH_BYTES
MAX_GROUP_COMMIT_BYTES = MAX_BATCH_BYTES - HEADER_SIZE


#: wall-clock epoch milliseconds (``time.time_ns() // 1_000_000``): the default ``clock``,
#: native so that the commit path's native entry reads it without a call (native/src/route.rs)
system_clock_ms: Callable[[], int] = clock_ms


@dataclass(frozen=True)
class StoreConfig:
    #: log partitions; fixed when a store is created (offsets.topic.num.partitions)
    partitions: int = 50
    #: "always": fsync before a commit is acknowledged; "interval": acknowledge after write and
    #: fsync at most every fsync_interval_ms; "never": leave it to the OS page cache
    fsync: str = "always"
    #: ms between background fsyncs under fsync="interval", and (any policy) between
    #: checkpoints of the recovery points (RECOVERY-POINTS: docs/FORMAT.md)
    fsync_interval_ms: int = 1000
    #: under fsync="always", make the usual commit durable in the store's WRITE-AHEAD file,
    #: one write for the waiting commits of every log partition, its batch written into its
    #: segment unsynced (docs/FORMAT.md, "WRITE-AHEAD"); False syncs each batch in its
    #: segment, as before the file existed (an older engine then opens the store even after
    #: a crash)
    write_ahead: bool = True
    #: ms an offset is kept after its last commit (offsets.retention.minutes = 7 days)
    retention_ms: int = 7 * 24 * 3600 * 1000
    #: ms between background retention passes; 0 turns the background pass off
    #: (offsets.retention.check.interval.ms)
    retention_check_interval_ms: int = 600_000
    #: bytes after which the active segment rolls (offsets.topic.segment.bytes = 100 MiB)
    segment_bytes: int = 100 * 1024 * 1024
    #: bytes one group-commit write may carry; LevelDB caps its merged batches the same way so
    #: one huge write cannot stall small committers behind it. Commit calls are counted by an
    #: upper bound of their records' size (their records are built by the leader), and the
    #: back-to-back ones of a round share one batch (at most MAX_GROUP_COMMIT_BYTES).
    max_group_commit_bytes: int = 4 * 1024 * 1024
    #: ms a tombstone is kept after the cleaner first sees it (log.cleaner.delete.retention.ms)
    delete_retention_ms: int = 24 * 3600 * 1000
    #: dirty bytes / all bytes above which the background cleaner cleans a partition
    #: (log.cleaner.min.cleanable.ratio)
    min_cleanable_dirty_ratio: float = 0.5
    #: ms between the background cleaner's checks; 0 turns it off (log.cleaner.backoff.ms)
    cleaner_backoff_ms: int = 15_000
    #: ms a transaction may stay open (not prepared) before the store aborts it
    #: (transaction.timeout.ms)
    transaction_timeout_ms: int = 60_000
    #: ms between the store's looks for timed-out transactions; 0 turns the timer off
    #: (transaction.abort.timed.out.transaction.cleanup.interval.ms)
    transaction_check_interval_ms: int = 10_000
    #: keep LMDB snapshots of the tables in <store>/snapshots and load them on open; False
    #: discards any snapshots found there (they would go stale while this store writes)
    snapshots: bool = True
    #: records a log partition takes between background snapshots of it; 0: never by count
    snapshot_interval_records: int = 100_000
    #: ms after which a log partition that changed is snapshotted in the background; 0: never
    #: by time (measured with ``clock``)
    snapshot_interval_ms: int = 60_000
    #: snapshot every log partition that changed since its last snapshot on a clean close()
    snapshot_on_close: bool = True
    #: longest metadata string, in UTF-16 code units (offset.metadata.max.bytes)
    metadata_max_bytes: int = 4096
    #: take negative offsets (any int64), as Kafka's coordinator does: it stores what a
    #: client commits and leaves the checks to clients, some of which commit -1 and -2 as
    #: markers (kafkajs's resetOffsets). The wire server opens its store with True; False
    #: (embedded use) refuses them as the bad input they usually are
    negative_offsets: bool = False
    #: a transaction the store aborts for its timeout also bumps its producer's epoch, as
    #: Kafka's coordinator does, so the fence is in the log: the old handle (and, after a
    #: reopen, any request with the old epoch) gets ``ProducerFencedError``, and the producer
    #: starts over with ``init_transactions``. The wire server opens its store with True;
    #: False (embedded use) keeps the handle, which raises ``TransactionTimeoutError`` until
    #: ``abort()`` acknowledges the timeout
    fence_on_transaction_timeout: bool = False
    #: callable returning epoch ms; every timestamp the store writes comes from it
    clock: Callable[[], int] = field(default=system_clock_ms, compare=False)

    def __post_init__(self) -> None:
        def positive_int(name: str, value, minimum: int = 1) -> None:
            if not isinstance(value, int) or isinstance(value, bool) or value < minimum:
                raise StoreConfigError(f"{name} must be an int >= {minimum}, not {value!r}")

        positive_int("partitions", self.partitions)
        if self.fsync not in FSYNC_POLICIES:
            raise StoreConfigError(f"fsync must be one of {FSYNC_POLICIES}, not {self.fsync!r}")
        positive_int("fsync_interval_ms", self.fsync_interval_ms)
        positive_int("retention_ms", self.retention_ms)
        positive_int("retention_check_interval_ms", self.retention_check_interval_ms, 0)
        positive_int("segment_bytes", self.segment_bytes, 1024)
        positive_int("max_group_commit_bytes", self.max_group_commit_bytes, 1024)
        if self.max_group_commit_bytes > MAX_GROUP_COMMIT_BYTES:
            raise StoreConfigError(f"max_group_commit_bytes must be <= {MAX_GROUP_COMMIT_BYTES} "
                                   f"(one round's commits share one batch), not "
                                   f"{self.max_group_commit_bytes!r}")
        positive_int("metadata_max_bytes", self.metadata_max_bytes, 0)
        for name in ("negative_offsets", "fence_on_transaction_timeout", "write_ahead"):
            if not isinstance(getattr(self, name), bool):
                raise StoreConfigError(f"{name} must be a bool, not {getattr(self, name)!r}")
        positive_int("delete_retention_ms", self.delete_retention_ms, 0)
        positive_int("cleaner_backoff_ms", self.cleaner_backoff_ms, 0)
        positive_int("transaction_timeout_ms", self.transaction_timeout_ms)
        positive_int("transaction_check_interval_ms", self.transaction_check_interval_ms, 0)
        positive_int("snapshot_interval_records", self.snapshot_interval_records, 0)
        positive_int("snapshot_interval_ms", self.snapshot_interval_ms, 0)
        if not isinstance(self.min_cleanable_dirty_ratio, (int, float)) or not (
                0.0 <= self.min_cleanable_dirty_ratio <= 1.0):
            raise StoreConfigError("min_cleanable_dirty_ratio must be within [0, 1]")
        if not callable(self.clock):
            raise StoreConfigError("clock must be a callable returning epoch milliseconds")
        # Asked once, here: batch headers pack its value as an int64, and a leader that fails
        # to frame a batch (a float, say time.time() * 1000) would strand the whole round.
        now = self.clock()
        if not isinstance(now, int) or isinstance(now, bool) or not 0 <= now < 1 << 63:
            raise StoreConfigError(f"clock must return epoch milliseconds as an int, not "
                                   f"{now!r}")


def open_signature(open_function) -> inspect.Signature:
    """``open_function``'s signature with its ``**settings`` spelled out: every field of
    ``StoreConfig`` it does not name itself, as a keyword with its default (written once,
    above), for ``help()`` and editors."""
    P = inspect.Parameter
    signature = inspect.signature(open_function)
    own = list(signature.parameters.values())
    named = {p.name for p in own}
    settings = [P(f.name, P.KEYWORD_ONLY, default=f.default, annotation=f.type)
                for f in dataclasses.fields(StoreConfig) if f.name not in named]
    return signature.replace(parameters=[p for p in own if p.kind is not P.VAR_KEYWORD]
                             + settings)
