"""Group commit: many committers, one write and one fsync per log partition per round.

Each log partition has a FIFO queue. A committer appends its batch and then, as in LevelDB's
``DBImpl::Write``, either waits or becomes the *leader*: the first waiter that finds no leader
takes every queued batch (up to ``max_group_commit_bytes``), gives them consecutive log
offsets, frames its back-to-back commit calls as one batch (``commit_queue.frame_round``), writes them with one
system call that also syncs under ``fsync="always"``
(``pwritev`` with ``RWF_DSYNC``; ``write`` then ``fdatasync`` where the flag is refused), then
applies them to the table in queue order and wakes everyone whose batch it carried (one after
another: each woken committer wakes the next). A lone committer is its own leader, so a single
thread pays no hand-off to another thread; a ``commit_sync`` that finds a lone committer
writing, with nothing queued, writes beside it and takes the leadership over from it
(``lone_commit``: a *follower*), so two writes are then in flight in one partition. Work
left queued after a round goes to a background writer thread, which then leads round after
round while committers keep coming (they wait for it rather than lead); ``commit_async``
calls are led by it, and back-to-back ones join one batch with one future (``AsyncRun``).

Why this order gives the guarantees:

* per-key call order: offsets are given in queue order, and the queue is in call order;
* visibility only once durable: the table is changed after the write (and, under
  ``fsync="always"``, the sync) returned;
* atomicity: a call lands whole in one batch with one CRC (with the other commit calls of
  its round), so recovery loads all of it or none;
* a failed write or sync (or any error while a round is framed, written or applied) fails
  every batch of that round and poisons the writer: no later round runs, so nothing after an
  unknown state is ever acknowledged.

Work that must see the table exactly as of its place in the queue (expiry, ``delete_group``)
is queued as a *deferred* item: the leader computes its records when it reaches the head of
the queue, alone in its round, after everything before it has been applied.
"""

from __future__ import annotations

import contextlib
import logging
import threading
import time
from concurrent.futures import Future
from threading import get_ident
from typing import Any, Callable

from offsetlog.errors import CommitTimeoutError, StoreClosedError, StoreFailedError
from offsetlog.log import _native
from offsetlog.log.format import Attribute
from offsetlog.log.framing import encode_payload
from offsetlog.store.async_writer import AsyncWriter
from offsetlog.store.callbacks import CallbackRunner
from offsetlog.store.commit_queue import (
    Commit,
    PartitionWriter,
    QueueItem,
    Round,
    chained_waiter,
    complete,
    new_waiter,
    round_bytes,
    write_round,
)
from offsetlog.store.write_pool import WRITE_THREADS

log = logging.getLogger("offsetlog.store.group_commit")

#: a commit_async caller gives up the GIL briefly after every this many calls it queued behind a
#: busy writer (see _native.submit_async, native/src/async_commit.rs). bench/RESULTS.md has the
#: sweeps that chose it: 1,024 when a call cost about 3 us, 4,096 (about one 5 ms switch
#: interval of calls) since the native entry halved that
YIELD_AT = 4096


class GroupCommitter(_native.WriterState):
    """Runs the leader protocol over a store's partitions; owns the background threads.

    ``closing``, ``failure``, ``fsync_always`` and ``max_bytes`` live in the native base
    (``_native.WriterState``), where every commit's lock hold reads them without the
    interpreter; they are plain attributes here."""

    def __init__(self, partitions: list[PartitionWriter], *, fsync: str, fsync_interval_ms: int,
                 max_group_commit_bytes: int, write_threads: int = WRITE_THREADS) -> None:
        self.partitions = partitions
        self.fsync_always = fsync == "always"
        self.fsync_interval_ms = fsync_interval_ms if fsync == "interval" else None
        self.max_bytes = max_group_commit_bytes
        self.failure: BaseException | None = None
        self.closing = False  # set by the store's close(), before the final drain
        #: committers in this thread may be interrupted by a signal while they sleep
        self._main_thread = threading.main_thread().ident
        self._threads: list[threading.Thread] = []
        #: leads what nobody else does (see offsetlog.store.async_writer)
        self.async_writer = AsyncWriter(self, write_threads=write_threads,
                                        helper=self.help_until)
        #: users' commit callbacks, run on a thread of their own in completion order
        self.callbacks = CallbackRunner()
        if self.fsync_interval_ms is not None:
            self._sync_stop = threading.Event()
            self._start("offsetlog-interval-sync", self._interval_sync_loop)

    def _start(self, name: str, target) -> None:
        t = threading.Thread(target=target, name=name, daemon=True)
        t.start()
        self._threads.append(t)

    # -- submitting ------------------------------------------------------------------------

    def check_usable(self) -> None:
        """Called under the partition lock by everything that queues work."""
        if self.closing:
            # Checked where items are queued, under the lock that drain() also takes: an item
            # either lands before the final drain and is written, or is refused here, so
            # nothing is written after close() has released the directory.
            raise StoreClosedError("the store is closed")
        if self.failure is not None:
            raise StoreFailedError(
                f"the store failed earlier ({self.failure!r}) and must be reopened",
                cause=self.failure)

    def submit_sync(self, part: PartitionWriter, item: QueueItem, timeout: float | None,
                    precheck: Callable[[], None] | None = None) -> Any:
        """Queue ``item`` and return once it is applied (durable per the fsync policy).

        :param precheck: runs under the partition lock just before queueing; an exception
            from it rejects the item (group fencing: no generation change can slip between
            the check and the commit's place in the log)
        """
        deadline = None if timeout is None else time.monotonic() + timeout
        with part.lock:
            if self.closing or self.failure is not None:
                self.check_usable()
            if precheck is not None:
                precheck()
            lead, group, waiter = self._enqueue(part, item, deadline)
        return self._await(part, item, deadline, timeout, lead, group, waiter)

    def _queue_sync(self, part: PartitionWriter, fields: tuple, nbytes: int, timestamp: int,
                    timeout: float | None, producer: tuple[int, int] | None = None) -> tuple:
        """Queue a ``commit_sync`` call that found its partition busy (``part.lock`` held,
        its checks passed; called by ``lone_commit.commit_lone``, which found it busy):
        ``_await``'s arguments after ``part``. With ``producer`` (its id and epoch), the
        offsets of that producer's open transaction (the wire's TxnOffsetCommit)."""
        deadline = None if timeout is None else time.monotonic() + timeout
        item = Commit(fields, nbytes, timestamp)
        if producer is not None:
            item.attributes = Attribute.TRANSACTIONAL
            item.producer_id, item.producer_epoch = producer
        lead, group, waiter = self._enqueue(part, item, deadline)
        return item, deadline, timeout, lead, group, waiter

    def _enqueue(self, part: PartitionWriter, item: QueueItem, deadline: float | None):
        """Queue ``item`` (``part.lock`` held, its checks passed) and lead at once if no one
        leads: ``(lead, the round led or None, the committer's wake-up lock or None)``."""
        part.queue.append(item)
        # The async writer thread, once told to lead what is queued (async_scheduled), is
        # left to do it: a committer that led instead made the thread's wake-up wasted and
        # passed leadership back and forth between rounds, which is slower. It always takes
        # the partition, or leaves it to the leader it finds, whose round end hands on what
        # is queued (hand_on), so nothing waits for nobody.
        if part.leader_active or part.exclusive_waiting or part.async_scheduled:
            return False, None, self._enlist(item, deadline)
        # Lead in the same lock hold that queued the item: a committer alone in its partition
        # takes the lock twice per commit, not three times.
        return True, self._lead(part), None

    def _await(self, part: PartitionWriter, item: QueueItem, deadline: float | None,
               timeout: float | None, lead: bool, group, waiter) -> Any:
        """Lead or sleep until ``item`` (queued by ``_enqueue``) is done; its result."""
        while True:
            if lead:
                if group is None:
                    with part.lock:
                        if item.done:
                            break
                        if part.leader_active or part.exclusive_waiting:
                            # taken meanwhile (async thread), or a swap is waiting its turn
                            waiter, lead = self._enlist(item, deadline), False
                        else:
                            group = self._lead(part)
                if lead:
                    self.complete(group)
                    group = None
                    if item.done:
                        break
                    if deadline is not None and time.monotonic() >= deadline:
                        raise self._timeout(timeout)
                    continue  # the round was full before our batch: lead the next one
            # Sleep on a lock until our batch is done: the leader wakes us, or the committer
            # before us in the round does (see complete). Queued work left after a round
            # goes to the async writer thread (see hand_on), never to a sleeping committer.
            if threading.get_ident() == self.async_writer.ident:
                # ... unless we are that thread (a future's done-callback committing): it
                # would wait for itself, so it waits for the partition and leads instead.
                self._lead_until_done(part, item, deadline, timeout)
                break
            if deadline is None:
                waiter.acquire()
                nxt = item.chain  # linked before we were woken (see complete)
                if nxt is not None:
                    nxt.release()
            else:
                waiter.acquire(timeout=max(0.0, deadline - time.monotonic()))
            if item.done:
                # ``done`` was set before we were released: no need to take the partition
                # lock again just to look (one contended hand-off less per commit).
                break
            with part.lock:  # only a timeout wakes us before our batch is done
                item.waiter = None
                if item.done:
                    break
                if deadline is not None and time.monotonic() >= deadline:
                    raise self._timeout(timeout)
                waiter = self._enlist(item, deadline)
        if item.error is not None:
            raise item.error
        return item.result

    def _lead_until_done(self, part: PartitionWriter, item: QueueItem, deadline: float | None,
                         timeout: float | None) -> None:
        """Wait, as ``drain`` does, until no one leads ``part``, then lead rounds until
        ``item`` is done (for the async writer thread, which nobody hands work to)."""
        self.async_writer.settle()
        with part.lock:
            item.waiter = None
            while not item.done:
                if deadline is not None and time.monotonic() >= deadline:
                    raise self._timeout(timeout)
                if part.leader_active or part.exclusive_waiting:
                    part.wait_idle(None if deadline is None
                                   else max(0.0, deadline - time.monotonic()))
                    continue
                self._lead_once(part)

    def _lead_once(self, part: PartitionWriter) -> None:
        """Lead one round (``part.lock`` held on entry and on return) and complete it outside
        the lock."""
        group = self._lead(part)
        part.lock.release()
        try:
            self.complete(group)
        finally:
            part.lock.acquire()

    def _enlist(self, item: QueueItem, deadline: float | None):
        """Give a synchronous committer its wake-up lock (``part.lock`` held); ``complete``
        releases it, or has the committer before it in the round release it (``chained``:
        only a sleep that nothing but that release can end)."""
        if deadline is None:
            me = get_ident()
            # The async writer thread does not sleep on the lock (see _lead_until_done).
            if me != self._main_thread and me != self.async_writer.ident:
                item.chained = True
                item.waiter = waiter = chained_waiter()
                return waiter
        item.waiter = waiter = new_waiter()
        return waiter

    @staticmethod
    def _timeout(timeout: float | None) -> CommitTimeoutError:
        return CommitTimeoutError(f"commit not durable after {timeout}s; it stays queued and "
                                  "may still be applied")

    def submit_computed(self, part: PartitionWriter, compute: Callable[[], tuple[list, Any]],
                        timestamp: int, on_done: Callable[[QueueItem], None]) -> None:
        """Run ``compute()`` under the partition lock and queue the records it returns in the
        same lock hold, so the log order is the order in which ``compute`` ran (the group
        coordinator's calls). ``on_done(item)`` runs once they are durable (or failed), with
        ``item.result`` set to compute's second value.

        A call that returns no records in an idle partition (nothing queued, no round being
        written, the async writer not scheduled) is done at once, in this thread: nothing
        before it is still on its way to the disk, so there is nothing for its answer to
        wait for (a steady member's heartbeat, classic or KIP-848). Kafka's coordinator
        answers such a call at once too. Handing it to the async writer instead put two
        thread wake-ups between a heartbeat and its answer."""
        with part.lock:
            self.check_usable()
            records, result = compute()
            item = QueueItem(tuple(records) or None, timestamp)
            item.result = result
            item.on_done = on_done
            idle = part.nothing_pending()
            if item.records is None and idle:
                item.done = True
            else:
                part.queue.append(item)
                if not idle:
                    return
                part.async_scheduled = True
        if item.done:
            self.complete([item])  # (outside the lock, as a round's end completes its items)
            return
        self._wake_async(part)

    def _wake_async(self, part: PartitionWriter) -> None:
        self.async_writer.wake(part)

    # -- the leader ------------------------------------------------------------------------

    def _lead(self, part: PartitionWriter) -> list[QueueItem]:
        """One round. Called, and returns, with ``part.lock`` held; releases it for I/O."""
        rnd = self.take_round(part)
        if not rnd.done:
            part.lock.release()
            try:
                write_round(part, rnd, round_bytes(rnd))
            finally:
                part.lock.acquire()
        return self.end_round(part, rnd)

    def take_round(self, part: PartitionWriter) -> Round:
        """A round's first part (``part.lock`` held): take the partition's leadership and
        the round's items, and give them offsets. A round that comes back ``done`` has
        nothing to write (a poisoned store, a failed deferred item); ``end_round`` ends it."""
        part.leader_active = True
        group: list[QueueItem] = []
        rnd = Round(group)
        try:
            q = part.queue
            if self.failure is not None:
                # Poisoned: nothing queued can be written any more.
                failed = StoreFailedError(
                    f"the store failed earlier ({self.failure!r}) and must be reopened",
                    cause=self.failure)
                while q:
                    item = q.popleft()
                    item.error, item.done = failed, True
                    group.append(item)
                rnd.done = True
                return rnd
            if q[0].deferred is not None:
                item = q.popleft()
                group.append(item)
                try:
                    records = item.deferred(part.table)
                except BaseException as e:  # a bug in the producer fails only its caller
                    item.error, item.done = e, True
                    rnd.done = True
                    return rnd
                item.records = records or None
                item.payload = encode_payload(records) if records else b""
            else:
                size = 0
                max_bytes = self.max_bytes
                while q and q[0].deferred is None:
                    n = q[0].nbytes
                    if group and size + n > max_bytes:
                        break
                    group.append(q.popleft())
                    size += n
            # Offsets are given under the lock; framing (CRCs) waits until it is released so
            # committers queueing meanwhile are not held up by it.
            base = part.log.next_offset
            for item in group:
                if item.force_sync:
                    rnd.sync = True
                fields = item.fields
                if fields is not None:  # commit calls: their records are built below
                    item.base_offset = base
                    base += len(fields) // 3
                    if item is part.open_run:
                        part.open_run = None  # taken: keep its offsets no longer than the round
                    continue
                records = item.records
                if records:
                    item.base_offset = base
                    base += records[-1][0] + 1
            rnd.base = base
            if self.fsync_always:
                rnd.sync = True
            return rnd
        except BaseException:
            part.leader_active = False
            self.hand_on(part)
            raise

    def end_round(self, part: PartitionWriter, rnd: Round) -> list[QueueItem]:
        """A round's last part (``part.lock`` held): apply what was written, mark the items
        done (failed, with the store poisoned, if anything went wrong), give up the
        leadership. Returns the round's items for ``complete``."""
        group = rnd.group
        try:
            if rnd.done:
                return group
            error, what = rnd.error, "write to"
            if error is None:
                try:
                    part.table.apply_round(rnd.batches)
                except Exception as e:  # durable, but the table no longer follows the log
                    error, what = e, "applying a round of"
            if error is not None:
                # Never strand a round: every item gets the failure, and the store is poisoned
                # (a reopen replays the log into a fresh table).
                self.poison(error)
                failed = StoreFailedError(f"{what} log partition {part.index} failed: {error!r}",
                                          cause=error)
                for item in group:
                    item.error = failed
            for item in group:
                item.done = True
            return group
        finally:
            part.leader_active = False
            self.hand_on(part)

    def hand_on(self, part: PartitionWriter) -> None:
        """Leadership was just given up (``part.lock`` held): give queued work to the writer
        thread.

        Under contention the async writer thread leads round after round without sleeping,
        like a dedicated log writer; waking a sleeping committer to lead instead puts a thread
        wake-up and a GIL hand-off between every two fsyncs. An idle committer still leads
        itself, so a single thread pays no hand-off at all.
        """
        if part.idle_waiters:  # drain/exclusive waiters only: committers sleep on their own
            part.cond.notify_all()
        if part.queue and not part.async_scheduled:
            # Lock order is always partition lock, then the async writer's cv.
            part.async_scheduled = True
            self._wake_async(part)

    def poison(self, error: BaseException) -> None:
        # Later leaders see ``failure`` and fail whatever is queued (see _lead).
        if self.failure is None:
            self.failure = error
            log.error("store poisoned by a failed write or sync: %r", error)

    def complete(self, group: list[QueueItem]) -> None:
        """Wake the committers, resolve the futures and queue the callbacks of a finished
        round (outside any lock; ``commit_queue.complete``)."""
        complete(group, self.callbacks)

    # -- background threads ----------------------------------------------------------------

    def help_until(self, fut: Future, timeout: float | None) -> float | None:
        """The async writer thread waits for ``fut`` (from a done-callback it runs): lead
        every partition's queued rounds until ``fut`` is done or ``timeout`` passes.

        :return: the part of ``timeout`` left (None for no timeout)
        """
        deadline = None if timeout is None else time.monotonic() + timeout
        self.async_writer.settle()
        while not fut.done():
            if deadline is not None and time.monotonic() >= deadline:
                break
            led = False
            for part in self.partitions:
                with part.lock:
                    if not part.queue or part.leader_active or part.exclusive_waiting:
                        continue
                    group = self._lead(part)
                self.complete(group)
                led = True
            if not led:
                # Others lead what is queued (or nothing is, yet): look again shortly.
                time.sleep(0.001)
        return None if deadline is None else max(0.0, deadline - time.monotonic())

    def _interval_sync_loop(self) -> None:
        interval = self.fsync_interval_ms / 1000.0
        while not self._sync_stop.wait(interval):
            self.sync_all()

    def sync_all(self) -> None:
        """fsync every partition written since its last sync, taking each one's leadership."""
        for part in self.partitions:
            if not part.log.dirty or self.failure is not None:
                continue
            with self.exclusive(part):  # hands queued work on when it ends, like a leader
                try:
                    part.log.sync()
                except OSError as e:
                    self.poison(e)

    @contextlib.contextmanager
    def exclusive(self, part: PartitionWriter):
        """Hold ``part``'s leadership: no commit is written to it until the block exits.

        For work that changes the partition's files under the writer (the cleaner's swap);
        committers queue meanwhile and are led as soon as it ends.
        """
        with part.lock:
            part.exclusive_waiting += 1
            try:
                while part.leader_active:
                    part.wait_idle()
            except BaseException:
                part.exclusive_waiting -= 1
                self.hand_on(part)  # what queued behind us must not wait for nobody
                raise
            part.exclusive_waiting -= 1
            part.leader_active = True
        try:
            yield
        finally:
            with part.lock:
                part.leader_active = False
                self.hand_on(part)

    @property
    def threads(self) -> list[threading.Thread]:
        """The writer's own threads (the async writer, its write pool, interval sync, the
        callback thread)."""
        return [*self.async_writer.threads, *self._threads, self.callbacks.thread]

    def drain(self) -> None:
        """Wait until every partition's queue is empty and no leader is active (on the async
        writer's leading thread, after ending its own rounds in flight: see settle)."""
        self.async_writer.settle()
        for part in self.partitions:
            with part.lock:
                while part.queue or part.leader_active:
                    if not part.leader_active:
                        self._lead_once(part)
                        continue
                    part.wait_idle()

    def stop(self) -> None:
        """Stop the background threads (after ``drain``); runs queued callbacks first."""
        if self.fsync_interval_ms is not None:
            self._sync_stop.set()
        me = threading.current_thread()
        # The writer threads first: one may have finished a round (so drain() returned) and
        # still be resolving it, queueing callbacks that must run before the callback thread
        # is told to stop.
        self.async_writer.stop()
        for t in self._threads:
            if t is not me:
                t.join()
        self.callbacks.stop()
