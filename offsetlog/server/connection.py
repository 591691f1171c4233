"""The asyncio side: accept connections, cut frames, decode them, and write the answers in
request order on each connection. Everything Kafka-specific is elsewhere: frames go to
``codec`` and ``apis.handle`` (plain functions), and the ``work.Reply`` they return is
carried out here (store futures, blocking store calls on a worker thread, delays), so the
event loop never waits for an fsync.

Each connection is an ``asyncio.Protocol`` (not streams: a request costs no task, no queue
and no stream future) with a FIFO of *slots*, one per request that is answered, in request
order. An answer made at once is written at once when nothing is ahead of it; one that waits
(a JoinGroup parked for a rebalance, a commit waiting for its fsync) holds back the answers
behind it on its own connection only, as in Kafka.

A commit is ``store.commit_sync`` on a worker thread (``work.run_blocking``): each worker
leads its log partition's group commit or joins the round being written, as the threads of
an embedded service do, so commits from many connections share fsyncs and different log
partitions are written in parallel. (The store's ``commit_async`` was the first choice: it
queues without a thread hop, but one background writer then syncs every log partition in
turn, and 32 connections committing to 32 groups got 0.15x of 32 embedded threads.) The
worker hands the outcome back with ``call_soon_threadsafe``; a store future that is already
resolved when the handler returns (a heartbeat, a fenced commit) costs no hop at all.

A frame longer than ``socket.request.max.bytes`` or shorter than a header, one that does not
decode, an unknown API key or an unsupported version (except ApiVersions, answered with
UNSUPPORTED_VERSION and the supported versions) closes that connection after the answers
already queued; nothing of it reaches the store. A connection that sends nothing, and is
owed nothing, for ``connections.max.idle.ms`` is closed (a half frame cannot hold it open).
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections import deque
from concurrent.futures import Executor, Future

from offsetlog.server import apis
from offsetlog.server import errors as E
from offsetlog.server.codec import (LENGTH_SIZE, FrameError, build, decode_request,
                                    encode_response, frame_length, peek_api, response_schema)
from offsetlog.server.context import Call, Context
from offsetlog.server.work import Outcome, Reply

log = logging.getLogger("offsetlog.server")

#: answers a connection may have outstanding before the server stops reading from it
MAX_IN_FLIGHT = 128
#: the shortest frame that can hold a request header (key, version, correlation id, client)
MIN_FRAME = 10
#: an answer that could not be made (the handler failed, logged): the connection is closed
#: after the answers ahead of it, since its client would wait for it forever
_FAILED = object()


class Slot:
    """One answer's place in its connection's order: ``data`` is None until it is made."""

    __slots__ = ("data",)

    def __init__(self, data=None) -> None:
        self.data = data


class Connections:
    """The server's connections and what they share: the context, the worker threads for
    blocking store calls, the clock, the idle limit."""

    def __init__(self, ctx: Context, executor: Executor, clock) -> None:
        self.ctx = ctx
        self.executor = executor
        self.clock = clock
        self.open: set[Connection] = set()
        self.stopping = False
        self.idle_s = ctx.config.connections_max_idle_ms / 1000

    def protocol(self) -> "Connection":
        return Connection(self)

    def stop_reading(self) -> None:
        """Take no more requests: each connection closes once its answers are out."""
        self.stopping = True
        for conn in list(self.open):
            conn.close_when_answered()

    async def drain(self, timeout: float) -> None:
        """Wait (at most ``timeout`` seconds) for every connection's answers to go out, then
        close them all."""
        deadline = time.monotonic() + timeout
        while any(c.pending for c in self.open) and time.monotonic() < deadline:
            await asyncio.sleep(0.01)
        for conn in list(self.open):
            conn.transport.close()
        # let the transports flush and call connection_lost
        for _ in range(100):
            if not self.open:
                break
            await asyncio.sleep(0.01)


class Connection(asyncio.Protocol):
    def __init__(self, conns: Connections) -> None:
        self.conns = conns
        self.ctx = conns.ctx
        self.limit = conns.ctx.config.socket_request_max_bytes
        self.loop = asyncio.get_event_loop()
        self.transport: asyncio.Transport | None = None
        self.host = ""
        self.buf = bytearray()
        self.pending: deque[Slot] = deque()
        self.closing = False  #: no more requests are read; closed once answers are out
        self.closed = False
        self.reading_paused = False
        self.writing_paused = False
        self.last_active = time.monotonic()
        self.idle_timer: asyncio.TimerHandle | None = None

    # -- asyncio's callbacks -------------------------------------------------------------

    def connection_made(self, transport) -> None:
        self.transport = transport
        peer = transport.get_extra_info("peername") or ("", 0)
        self.host = str(peer[0])
        self.conns.open.add(self)
        self.idle_timer = self.loop.call_later(self.conns.idle_s, self._check_idle)
        if self.conns.stopping:
            self.close_when_answered()

    def connection_lost(self, exc) -> None:
        # Work already started goes on (a queued commit is written whatever happens); its
        # answer has nowhere to go.
        self.closed = self.closing = True
        self.pending.clear()
        self.conns.open.discard(self)
        if self.idle_timer is not None:
            self.idle_timer.cancel()

    def data_received(self, data: bytes) -> None:
        self.last_active = time.monotonic()
        if self.closing:
            return
        if self.buf:
            self.buf += data
            self._cut(self.buf)
        else:
            self._cut(data)

    def eof_received(self) -> bool:
        return False  # the client is done sending: close (answers already queued are lost)

    def pause_writing(self) -> None:
        # The client does not read its answers: stop reading its requests until it does.
        self.writing_paused = True
        self._pause()

    def resume_writing(self) -> None:
        self.writing_paused = False
        self._maybe_resume()

    # -- requests ------------------------------------------------------------------------

    def _cut(self, data) -> None:
        """Handle every whole frame of ``data`` (``self.buf`` or a fresh chunk) and keep the
        rest; stop early when the connection must stop reading."""
        pos, end = 0, len(data)
        while end - pos >= LENGTH_SIZE:
            if self.reading_paused or self.closing:
                break
            size = frame_length(data, pos)
            if not MIN_FRAME <= size <= self.limit:
                log.warning("%s: frame of %d bytes (limit %d): closing", self.host, size,
                            self.limit)
                self.close_when_answered()
                return
            if end - pos - LENGTH_SIZE < size:
                break
            start = pos + LENGTH_SIZE
            pos = start + size
            self._request(bytes(data[start:pos]))
        if self.closing:
            return  # close_when_answered dropped what was buffered
        if data is self.buf:
            del self.buf[:pos]
        elif pos < end:
            self.buf += data[pos:]

    def _request(self, frame: bytes) -> None:
        try:
            answer = self._dispatch(frame)
        except FrameError as e:
            log.warning("%s: %s: closing", self.host, e)
            self.close_when_answered()
            return
        if answer is None:
            return
        pending = self.pending
        if answer.__class__ is bytes:
            if pending:
                pending.append(Slot(answer))
            else:
                self._write(answer)
            return
        call, reply = answer
        slot = Slot()
        pending.append(slot)
        if len(pending) >= MAX_IN_FLIGHT:
            self._pause()
        self._start(reply, call, slot)

    def _dispatch(self, frame: bytes):
        """The encoded answer of ``frame``, ``(call, reply)`` for one that waits, or None
        (no answer: Produce with acks=0).

        :raises FrameError: the connection must be closed
        """
        api_key, version, correlation_id = peek_api(frame)
        if not apis.supported(api_key, version):
            if api_key == apis.API_VERSIONS:
                # Kafka answers an ApiVersions it cannot read with v0: UNSUPPORTED_VERSION
                # and the versions it has, so the client can pick one
                return encode_response(correlation_id, build(
                    response_schema(apis.API_VERSIONS, 0), error_code=E.UNSUPPORTED_VERSION,
                    api_keys=apis.version_list()))
            raise FrameError(f"API {api_key} version {version} is not supported")
        header, body = decode_request(frame, api_key, version)
        call = Call(api_key, version, header, body, self.host)
        try:
            result = apis.handle(self.ctx, call, self.conns.clock())
        except Exception:
            log.exception("%s: %s v%d failed", self.host, type(body).__name__, version)
            raise FrameError("internal error") from None
        if result is None:
            return None
        if isinstance(result, Reply):
            return call, result
        return encode_response(correlation_id, result)

    # -- replies: delay, then store futures, then a blocking call, then finish ------------

    def _start(self, reply: Reply, call: Call, slot: Slot) -> None:
        if reply.delay_ms:
            self.loop.call_later(reply.delay_ms / 1000, self._gather, reply, call, slot, [])
        else:
            self._gather(reply, call, slot, [])

    def _gather(self, reply: Reply, call: Call, slot: Slot, outcomes: list) -> None:
        futures = reply.futures
        while len(outcomes) < len(futures):
            fut = futures[len(outcomes)]
            if not fut.done():
                fut.add_done_callback(lambda f: self._from_thread(
                    self._gather, reply, call, slot, outcomes))
                return
            outcomes.append(_outcome(fut))
        if reply.blocking is None:
            self._finish(reply, call, slot, outcomes)
            return
        try:
            self.conns.executor.submit(self._run_blocking, reply, call, slot, outcomes)
        except RuntimeError as e:  # the executor has shut down: the server is stopping
            outcomes.append(Outcome(error=e))
            self._finish(reply, call, slot, outcomes)

    def _run_blocking(self, reply: Reply, call: Call, slot: Slot, outcomes: list) -> None:
        """On a worker thread."""
        try:
            outcome = Outcome(reply.blocking())
        except Exception as e:
            outcome = Outcome(error=e)
        outcomes.append(outcome)
        self._from_thread(self._finish, reply, call, slot, outcomes)

    def _from_thread(self, fn, *args) -> None:
        try:
            self.loop.call_soon_threadsafe(fn, *args)
        except RuntimeError:
            pass  # the loop has closed: the server has stopped and nobody awaits the answer

    def _finish(self, reply: Reply, call: Call, slot: Slot, outcomes: list) -> None:
        try:
            result = reply.finish(outcomes)
            if isinstance(result, Reply):
                self._start(result, call, slot)
                return
            slot.data = encode_response(call.header.correlation_id, result)
        except Exception:
            log.exception("%s: %s v%d failed", self.host, type(call.body).__name__,
                          call.version)
            slot.data = _FAILED
        self._flush()

    # -- answers -------------------------------------------------------------------------

    def _write(self, data: bytes) -> None:
        if not self.closed:
            self.last_active = time.monotonic()
            self.transport.write(data)

    def _flush(self) -> None:
        """Write the answers that are ready at the head of the order."""
        pending = self.pending
        while pending and pending[0].data is not None:
            data = pending.popleft().data
            if data is _FAILED:
                self.closing = True
                pending.clear()
                self.transport.close()
                return
            self._write(data)
        if self.closing:
            if not pending and not self.closed:
                self.transport.close()
        elif self.reading_paused:
            self._maybe_resume()

    def close_when_answered(self) -> None:
        """Read no more requests; close once the answers already queued are out."""
        self.closing = True
        self.buf = bytearray()
        if not self.pending and not self.closed:
            self.transport.close()

    def _pause(self) -> None:
        if not self.reading_paused and not self.closed:
            self.reading_paused = True
            self.transport.pause_reading()

    def _maybe_resume(self) -> None:
        if (self.reading_paused and not self.writing_paused and not self.closing
                and len(self.pending) < MAX_IN_FLIGHT // 2):
            self.reading_paused = False
            self.transport.resume_reading()
            if self.buf:  # frames that arrived before the pause
                self._cut(self.buf)

    def _check_idle(self) -> None:
        """``connections.max.idle.ms``: close a connection that has sent nothing and been
        answered nothing for that long, unless it is still owed an answer (a JoinGroup may
        be parked for a whole rebalance timeout)."""
        if self.closed:
            return
        idle_s = self.conns.idle_s
        quiet = time.monotonic() - self.last_active
        if quiet >= idle_s and not self.pending:
            log.info("%s: idle for %.0f ms: closing", self.host, quiet * 1000)
            self.closing = True
            self.transport.close()
            return
        self.idle_timer = self.loop.call_later(max(idle_s - quiet, 0.001) if not self.pending
                                               else idle_s, self._check_idle)


def _outcome(fut: Future) -> Outcome:
    error = fut.exception()
    return Outcome(error=error) if error is not None else Outcome(fut.result())
