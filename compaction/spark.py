"""Distributed compaction: the local cleaner's code, one Spark task per (store, log partition).

Keys never cross log partitions, so nothing is shuffled: the driver lists the log partitions
of every store, and each task, on a worker that sees the same file system, does for its
partition exactly what ``offsetlog compact`` does for it locally:

1. recovery's repair (``recover_partition``): finish or discard an interrupted swap, truncate
   a torn tail, refuse corruption with file and position;
2. ``offsetlog.compaction.cleaner.clean_partition`` over the closed segments (all but the last), with
   the same ``now_ms``, ``delete_retention_ms`` and ``segment_bytes`` for every task, through
   the same crash-safe ``.cleaned`` -> ``.swap`` protocol.

So the rules are the local cleaner's by construction, and a failed, killed or retried task
leaves its partition in a state recovery finishes or discards, as after a local crash.

Locking: the driver holds every store's ``LOCK`` (as ``OffsetStore.open`` does) for the whole
job, so an open store is refused and no store can be opened while it is being compacted. Each
task also holds an ``flock`` on its partition directory while it works, and before the driver
releases a store's lock it takes each of those in turn: a task that Spark is still cancelling
after a failure is waited for instead of racing a writer that opens the store next. A task
that only reaches its lock after that (launched, not yet started, when the job failed) must
not start either: the driver creates a job file in each store (``spark-job.<id>``, which the
store ignores) before the job and deletes it before the wait, and a task that holds its lock
and finds its job file gone does nothing. (Seen in a test: such a task's repair deleted
segments under the recovery of the store's next open.)
"""

from __future__ import annotations

import contextlib
import fcntl
import os
import signal
import time
from dataclasses import asdict, dataclass

from offsetlog.compaction.cleaner import CleanResult, clean_partition
from offsetlog.errors import OffsetlogError, SparkCompactionError  # noqa: F401 - raised here
from offsetlog.log import dirlock, naming
from offsetlog.recovery.replay import recover_partition
from offsetlog.recovery.snapshot import tombstone_floors
from offsetlog.spark.segments import find_stores, store_partitions
from offsetlog.store.config import StoreConfig

_DEFAULTS = StoreConfig()


@dataclass(frozen=True)
class PartitionTask:
    store: str
    partition: int
    directory: str
    now_ms: int
    delete_retention_ms: int
    segment_bytes: int
    #: tests: a cleaner step (offsetlog.compaction.cleaner.STEPS) at which the task raises, or
    #: "kill:<step>" at which its worker process is killed with SIGKILL
    fail_at: str | None = None
    #: the offset of the partition's LMDB snapshot, if it has one: tombstones and markers at
    #: or above it are kept (a reopen from the snapshot replays them; docs/DESIGN.md)
    keep_tombstones_from: int | None = None
    #: exists while the job may change the store (see the module's "Locking"); None: no
    #: check (a direct call)
    job_file: str | None = None


#: the job files' names in a store's directory: JOB_FILE_PREFIX + a random id
JOB_FILE_PREFIX = "spark-job."


@contextlib.contextmanager
def _directory_lock(directory: str):
    fd = os.open(directory, os.O_RDONLY | os.O_DIRECTORY)
    try:
        fcntl.flock(fd, fcntl.LOCK_EX)
        yield
    finally:
        os.close(fd)  # closing the only descriptor releases the lock


def _fault_hook(step_to_fail: str | None):
    if step_to_fail is None:
        return None

    kill = step_to_fail.startswith("kill:")
    step_to_fail = step_to_fail.removeprefix("kill:")

    def hook(step: str) -> None:
        if step != step_to_fail:
            return
        if kill:  # the worker process dies mid-swap, as in a machine or executor crash
            os.kill(os.getpid(), signal.SIGKILL)
        raise RuntimeError(f"injected failure at cleaner step {step!r}")
    return hook


def compact_partition(task: PartitionTask) -> dict:
    """What one Spark task runs (also callable directly): repair, then clean, one partition.

    The result carries the task's own wall and CPU seconds (``task_s``, ``task_cpu_s``), so a
    job's time can be split into work and Spark's overhead."""
    started, cpu_started = time.perf_counter(), time.process_time()
    with _directory_lock(task.directory):
        if task.job_file is not None and not os.path.exists(task.job_file):
            raise SparkCompactionError(f"{task.directory}: the job is over (its driver gave "
                                       "the store back): nothing done")
        recovered = recover_partition(task.directory, task.partition, repair=True)
        segments = recovered.segments
        if len(segments) < 2:  # only an active segment (or none): nothing closed to clean
            result = CleanResult(task.partition)
        else:
            result = clean_partition(
                task.directory, task.partition, active_base=segments[-1][0],
                now_ms=task.now_ms, delete_retention_ms=task.delete_retention_ms,
                segment_bytes=task.segment_bytes, fault_hook=_fault_hook(task.fail_at),
                keep_tombstones_from=task.keep_tombstones_from)
    out = asdict(result)
    out["store"] = task.store
    out["cleaned"] = len(segments) >= 2
    out["task_s"] = time.perf_counter() - started
    out["task_cpu_s"] = time.process_time() - cpu_started
    return out


def compact(spark, path: str, *, now_ms: int | None = None,
            delete_retention_ms: int = _DEFAULTS.delete_retention_ms,
            segment_bytes: int = _DEFAULTS.segment_bytes,
            _fail_at: str | None = None) -> list[dict]:
    """Compact every store at or below ``path`` with one Spark task per log partition.

    The settings are the store's (``OffsetStore.open`` keywords of the same names; a store
    does not record them on disk, so pass the ones its service uses).

    :param now_ms: the cleaning time every task uses (tombstone horizons); default: now
    :return: one dict per log partition (``CleanResult`` fields, plus ``store`` and
        ``cleaned``: whether it had closed segments), sorted by store and partition
    :raises StoreLockedError: a store is open (nothing was compacted)
    :raises SparkCompactionError: a task failed; the job's other tasks may have finished
    """
    now = int(time.time() * 1000) if now_ms is None else now_ms
    stores = find_stores(path)
    tasks: list[PartitionTask] = []
    job_files: list[str] = []
    with contextlib.ExitStack() as locks:
        for store in stores:
            locks.enter_context(dirlock.held(store))
        for store in stores:
            # read under the store's lock: no snapshot can be taken while the job runs
            floors = tombstone_floors(naming.snapshot_dir(store))
            job_file = _new_job_file(store)
            job_files.append(job_file)
            for p, directory in store_partitions(store):
                tasks.append(PartitionTask(store, p, directory, now, delete_retention_ms,
                                           segment_bytes, _fail_at, floors.get(p), job_file))
        try:
            if not tasks:
                return []
            rdd = spark.sparkContext.parallelize(tasks, len(tasks))
            try:
                results = rdd.map(compact_partition).collect()
            except Exception as e:
                raise SparkCompactionError(f"Spark compaction of {path} failed: "
                                           f"{_root_cause(e)}") from e
        finally:
            for f in job_files:  # a task not started yet never starts now
                with contextlib.suppress(FileNotFoundError):
                    os.unlink(f)
            for t in tasks:  # wait out any task Spark is still cancelling
                with _directory_lock(t.directory):
                    pass
    results.sort(key=lambda r: (r["store"], r["partition"]))
    return results


def _new_job_file(store: str) -> str:
    """A fresh job file in ``store`` (its lock held), after removing any a killed driver
    left: no task of theirs may start any more."""
    for name in os.listdir(store):
        if name.startswith(JOB_FILE_PREFIX):
            with contextlib.suppress(FileNotFoundError):
                os.unlink(os.path.join(store, name))
    path = os.path.join(store, JOB_FILE_PREFIX + os.urandom(8).hex())
    with open(path, "x"):
        pass
    return path


def _root_cause(e: BaseException) -> str:
    """The Python exception line of a failed task, out of Spark's long error text."""
    text = str(e)
    for line in reversed(text.splitlines()):
        line = line.strip()
        if "Error:" in line or "Exception:" in line:
            return line[:500]
    return text.splitlines()[0][:500] if text else type(e).__name__
