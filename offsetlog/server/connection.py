"""Sockets: accept connections, cut frames, decode them, and send the answers in request
order on each connection. Everything Kafka-specific is elsewhere: frames go to ``codec``
and ``apis.handle`` (plain functions), and the ``work.Reply`` they return is carried out
here (store futures, blocking store calls on worker threads, delays), so the event loop
never waits for an fsync.

The asyncio event loop reads: it watches the listening and the connected sockets
(``add_reader``), cuts frames, decodes them and runs the handlers. Each connection keeps a
FIFO of *slots*, one per request that is answered, in request order; an answer is sent as
soon as every answer ahead of it has been, by whichever thread made it, under the
connection's lock. A JoinGroup parked for a rebalance holds back the answers behind it on
its own connection only, as in Kafka.

Why commits look the way they do (bench/wire.py; measured on 2 cores, 32 connections):

* Under load a commit is ``store.commit_async`` (``Reply.queued``), and the loop's thread
  leads the store's async writer itself (``store.async_writer.drive_from_loop``): it frames
  each log partition's round, the kernel makes its DSYNC write through an io_uring ring
  (threads that run only the system call where there is none; writes to many partitions
  overlap), and when one is done the loop applies it and the future's done-callback makes
  and sends the answer, all on this thread. Committing on
  ``num.io.threads`` workers with ``commit_sync`` instead, each worker leading its
  partition's round and answering, spread a commit's Python over nine threads that queued
  for the GIL after every system call: this gets 1.08-1.23x as many through (medians of
  two sets of interleaved runs, bench/RESULTS.md).
* A lone commit runs on the loop's own thread (``Reply.inline``): ``commit_sync`` writes it
  at once, with no hand-off at all (a queued one would cost two: to a pool thread and back).
  It is lone when no other connection has committed in the last ``INLINE_ALONE_S``, no
  queued commit waits for its write and no worker is busy; if one ever takes longer than
  ``INLINE_STALL_S``, commits are queued only for ``INLINE_PAUSE_S``, so a slow disk cannot
  hold up heartbeats and reads commit after commit.
* The thread that made an answer sends it, under the connection's lock: the loop's for
  commits, a worker for the other blocking calls (transactions, deletions, topic creation).
* Plain sockets rather than asyncio transports, because transports may only be written
  from the loop's thread. A send that does not fit the socket buffer keeps the rest and
  asks the loop to finish it (``add_writer``).

Listening and accepting (and TLS, limits) are ``listeners.Acceptor``'s; each connection has a
``sasl.Session``: until it is authenticated its requests go to the session (ApiVersions and
the SASL APIs), and every request's ``Call`` carries its principal and listener.

A frame longer than ``socket.request.max.bytes`` or shorter than a header, one that does not
decode, an unknown API key or an unsupported version (except ApiVersions, answered with
UNSUPPORTED_VERSION and the supported versions) closes that connection after the answers
already queued; nothing of it reaches the store. A connection that sends nothing, and is
owed nothing, for ``connections.max.idle.ms`` is closed (a half frame cannot hold it open).
"""

from __future__ import annotations

import asyncio
import logging
import socket
import threading
import time
from collections import deque
from concurrent.futures import Future

from offsetlog.server import apis
from offsetlog.server import errors as E
from offsetlog.server.codec import (
    LENGTH_SIZE,
    FrameError,
    build,
    decode_request,
    encode_response,
    frame_length,
    peek_api,
    response_schema,
)
from offsetlog.server.context import Call, Context
from offsetlog.server.sasl import SASL_HANDSHAKE, Session
from offsetlog.server.work import Outcome, Reply
from offsetlog.server.workers import Workers

log = logging.getLogger("offsetlog.server")

#: answers a connection may have outstanding before the server stops reading from it
MAX_IN_FLIGHT = 128
#: unsent answer bytes of a connection (its client does not read) before the server stops
#: reading from it
MAX_UNSENT = 1 << 20
#: the shortest frame that can hold a request header (key, version, correlation id, client)
MIN_FRAME = 10
#: bytes asked of one recv, into the loop's one receive buffer: a recv() of this size would
#: allocate it afresh each time, and an allocation this large is an mmap and munmap (12 us
#: more a call than a recv of 64 KiB, measured), paid by every request
RECV_SIZE = 256 * 1024
#: a commit run on the loop's thread that takes longer than this (seconds) ...
INLINE_STALL_S = 0.02
#: ... sends every commit to the workers for this long (seconds)
INLINE_PAUSE_S = 10.0
#: a commit runs on the loop's thread only if no other connection's came this recently
INLINE_ALONE_S = 0.005
#: an answer that could not be made (the handler failed, logged): the connection is closed
#: after the answers ahead of it, since its client would wait for it forever
_FAILED = object()


class Slot:
    """One answer's place in its connection's order: ``data`` is None until it is made."""

    __slots__ = ("data",)

    def __init__(self, data=None) -> None:
        self.data = data


class Connections:
    """The listening sockets and the connections, and what they share: the context, the
    worker threads, the clock, the idle limit."""

    def __init__(self, ctx: Context, workers: Workers, clock, *,
                 monotonic=time.monotonic) -> None:
        self.ctx = ctx
        self.workers = workers
        self.clock = clock
        self.monotonic = monotonic  #: seconds, for the inline commits' guards
        self.loop = asyncio.get_running_loop()
        self.loop_thread = threading.get_ident()
        self.open: set[Connection] = set()
        #: the listening sockets (listeners.Acceptor opens them and accepts)
        self.listeners: list[socket.socket] = []
        #: (loop thread) called with each connection that closes (listeners.Acceptor's)
        self.on_close = lambda conn: None
        self.stopping = False
        self.idle_s = ctx.config.connections_max_idle_ms / 1000
        #: what each recv reads into (the loop's thread only): see RECV_SIZE
        self.recv_buffer = bytearray(RECV_SIZE)
        self.recv_view = memoryview(self.recv_buffer)
        #: (time.monotonic) commits run on the loop's thread again from then on
        self.inline_from = 0.0
        #: the connection of the last commit that asked to run inline, and when it asked
        self.last_inline: tuple[Connection | None, float] = (None, 0.0)
        #: the loop's thread is inside a commit it runs itself. That commit may lead a round
        #: holding other requests' group records, whose futures then resolve on this thread,
        #: inside the store call: their continuations wait for the loop instead of running
        #: nested in it.
        self.inline_running = False
        #: queued commits not yet answered (any thread ends one: ``queued_lock``)
        self.queued = 0
        self.queued_lock = threading.Lock()

    def may_inline(self, conn: Connection) -> bool:
        """(loop thread) Whether a commit of ``conn`` may run on the loop's thread now: no
        worker is busy, no queued commit is waiting for its write, and no other connection
        has committed in the last ``INLINE_ALONE_S`` (under load the loop must keep reading:
        a commit it ran itself would hold up every other connection's request for one
        fsync)."""
        now = self.monotonic()
        last, at = self.last_inline
        self.last_inline = (conn, now)
        return (self.workers.idle and not self.queued and now >= self.inline_from
                and (last is conn or now - at > INLINE_ALONE_S))

    def ran_inline(self, seconds: float) -> None:
        """(loop thread) A commit ran on the loop's thread for ``seconds``."""
        if seconds > INLINE_STALL_S:
            log.warning("a commit held the event loop for %.0f ms: commits go to worker "
                        "threads only for the next %.0f s", seconds * 1000, INLINE_PAUSE_S)
            self.inline_from = self.monotonic() + INLINE_PAUSE_S

    def call_in_loop(self, fn, *args) -> None:
        """``fn(*args)`` on the loop's thread: now if this is it (and it is not inside a
        commit it runs itself), else as soon as it can."""
        if threading.get_ident() == self.loop_thread and not self.inline_running:
            fn(*args)
        else:
            self.later(fn, *args)

    def later(self, fn, *args) -> None:
        """``fn(*args)`` on the loop's thread, never now (what a connection's lock holder
        asks for: ``fn`` may take that lock)."""
        try:
            if threading.get_ident() == self.loop_thread:
                self.loop.call_soon(fn, *args)
            else:
                self.loop.call_soon_threadsafe(fn, *args)
        except RuntimeError:
            pass  # the loop has closed: the server has stopped and nobody awaits the answer

    def stop_reading(self) -> None:
        """Accept nothing more and read no more requests: each connection closes once its
        answers are out."""
        self.stopping = True
        for sock in self.listeners:
            self.loop.remove_reader(sock.fileno())
            sock.close()
        self.listeners.clear()
        for conn in list(self.open):
            conn.close_when_answered()

    async def drain(self, timeout: float) -> None:
        """Wait (at most ``timeout`` seconds) for every connection's answers to go out, then
        close them all."""
        deadline = time.monotonic() + timeout
        while self.open and time.monotonic() < deadline:
            await asyncio.sleep(0.01)
        for conn in list(self.open):
            conn.close()


class Connection:
    def __init__(self, conns: Connections, sock, host: str, session: Session) -> None:
        """``sock``: a non-blocking socket, or a ``tls.TlsSocket`` over one."""
        self.conns = conns
        self.session = session  #: its listener, principal, authentication (sasl.py)
        self.ctx = conns.ctx
        self.loop = conns.loop
        self.sock = sock
        self.fd = sock.fileno()
        self.host = host
        self.limit = conns.ctx.config.socket_request_max_bytes
        self.buf = bytearray()  #: received bytes not yet cut into frames (loop thread only)
        #: guards everything below: answers are made and sent on several threads
        self.lock = threading.Lock()
        self.pending: deque[Slot] = deque()
        self.unsent = bytearray()  #: answer bytes the socket did not take yet
        self.closing = False  #: no more requests are read; closed once answers are out
        self.closed = False
        self.reading = False
        self.writing = False
        self.last_active = time.monotonic()
        self.idle_timer: asyncio.TimerHandle | None = None

    def start(self) -> None:
        self.conns.open.add(self)
        self._set_reading(True)
        self.idle_timer = self.loop.call_later(self.conns.idle_s, self._check_idle)

    # -- reading (the loop's thread) -----------------------------------------------------

    def _readable(self) -> None:
        conns = self.conns
        try:
            n = self.sock.recv_into(conns.recv_buffer)
        except (BlockingIOError, InterruptedError):
            return
        except OSError:
            n = 0
        data = conns.recv_view[:n].tobytes()
        if not data:  # the client has gone (or half-closed: it reads no more answers)
            self.close()
            return
        self.last_active = time.monotonic()
        if self.closing:
            return
        if self.buf:
            self.buf += data
            self._cut(self.buf)
        else:
            self._cut(data)

    def _cut(self, data) -> None:
        """Handle every whole frame of ``data`` (``self.buf`` or a fresh chunk) and keep the
        rest; stop early when the connection must stop reading."""
        pos, end = 0, len(data)
        while end - pos >= LENGTH_SIZE:
            if self.closing or not self.reading:
                break
            size = frame_length(data, pos)
            # (after SaslHandshake v0 a raw token may be shorter than any request)
            if not (MIN_FRAME <= size or self.session.raw) or size > self.limit:
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
        if answer.__class__ is bytes:
            # a failed authentication is answered connection.failed.authentication.delay.ms
            # later (a slot holds its place), then the connection is closed
            delay = self.session.failure_delay_s if self.session.close else 0
            with self.lock:
                if delay:
                    self.pending.append(slot := Slot())
                    self.loop.call_later(delay, self._answered, slot, answer)
                elif self.pending:
                    self.pending.append(Slot(answer))
                else:
                    self._send(answer)
            if self.session.close:  # authentication failed: closed once the answer is out
                self.close_when_answered()
            return
        call, reply = answer
        slot = Slot()
        with self.lock:
            self.pending.append(slot)
            full = len(self.pending) >= MAX_IN_FLIGHT
        if full:
            self._set_reading(False)
        self._start(reply, call, slot)

    def _dispatch(self, frame: bytes):
        """The encoded answer of ``frame``, ``(call, reply)`` for one that waits, or None
        (no answer: Produce with acks=0).

        :raises FrameError: the connection must be closed
        """
        session = self.session
        if session.raw:  # after SaslHandshake v0: a raw token, answered raw (sasl.py)
            answer = session.raw_token(frame)
            if answer is None:
                raise FrameError("SASL authentication failed")
            return answer
        if session.expires_at is not None and session.expired():  # connections.max.reauth.ms
            raise FrameError("its SASL session expired")
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
        call = Call(api_key, version, header, body, self.host, session.principal,
                    session.listener)
        try:
            if (not session.authenticated or session.reauthenticating  # (re-)authentication
                    or api_key == SASL_HANDSHAKE and session.wants(call)):
                result = session.handle(call, self._api_versions)
                if result is None:
                    raise FrameError("closed before authentication")
            else:
                result = apis.handle(self.ctx, call, self.conns.clock())
        except FrameError:
            raise
        except Exception:
            log.exception("%s: %s v%d failed", self.host, type(body).__name__, version)
            raise FrameError("internal error") from None
        if result is None:
            return None
        if isinstance(result, Reply):
            return call, result
        return encode_response(correlation_id, result)

    def _api_versions(self, call: Call):
        return apis.handle(self.ctx, call, self.conns.clock())

    # -- replies: delay, then store futures, then a blocking call, then finish ------------

    def _start(self, reply: Reply, call: Call, slot: Slot) -> None:
        """(loop thread)"""
        if reply.delay_ms:
            self.loop.call_later(reply.delay_ms / 1000, self._gather, reply, call, slot, [])
        else:
            self._gather(reply, call, slot, [])

    def _gather(self, reply: Reply, call: Call, slot: Slot, outcomes: list) -> None:
        """(loop thread)"""
        futures = reply.futures
        while len(outcomes) < len(futures):
            fut = futures[len(outcomes)]
            if not fut.done():
                # resolved on a store thread: carry on in the loop, not in the store's thread
                fut.add_done_callback(lambda f: self.conns.call_in_loop(
                    self._gather, reply, call, slot, outcomes))
                return
            outcomes.append(_outcome(fut))
        if reply.blocking is None:
            self._finish(reply, call, slot, outcomes)
            return
        conns = self.conns
        if reply.inline and threading.get_ident() == conns.loop_thread \
                and conns.may_inline(self):
            started = conns.monotonic()
            conns.inline_running = True
            try:
                self._run_blocking(reply, call, slot, outcomes)
            finally:
                conns.inline_running = False
            conns.ran_inline(conns.monotonic() - started)
            return
        if reply.queued is not None:
            try:
                fut = reply.queued()
            except Exception as e:  # refused before anything was queued (fencing, a bad call)
                outcomes.append(Outcome(error=e))
                self._finish(reply, call, slot, outcomes)
                return
            with conns.queued_lock:
                conns.queued += 1
            # the answer is made and sent by the thread that resolves the future
            fut.add_done_callback(lambda f: self._queued_done(reply, call, slot, outcomes, f))
            return
        try:
            conns.workers.submit(self._run_blocking, reply, call, slot, outcomes)
        except RuntimeError as e:  # the workers have stopped: the server is stopping
            outcomes.append(Outcome(error=e))
            self._finish(reply, call, slot, outcomes)

    def _queued_done(self, reply: Reply, call: Call, slot: Slot, outcomes: list,
                     fut: Future) -> None:
        """(the thread that resolved a queued commit's future)"""
        conns = self.conns
        with conns.queued_lock:
            conns.queued -= 1
        outcomes.append(_outcome(fut))
        self._finish(reply, call, slot, outcomes)

    def _run_blocking(self, reply: Reply, call: Call, slot: Slot, outcomes: list) -> None:
        """(a worker thread, or the loop's for an inline commit) The blocking call, then the
        answer, made and sent from here."""
        try:
            outcome = Outcome(reply.blocking())
        except Exception as e:
            outcome = Outcome(error=e)
        outcomes.append(outcome)
        self._finish(reply, call, slot, outcomes)

    def _finish(self, reply: Reply, call: Call, slot: Slot, outcomes: list) -> None:
        """(any thread) ``finish`` is a plain function of the outcomes (work.py)."""
        try:
            result = reply.finish(outcomes)
            if isinstance(result, Reply):
                self.conns.call_in_loop(self._start, result, call, slot)
                return
            data = encode_response(call.header.correlation_id, result)
        except Exception:
            log.exception("%s: %s v%d failed", self.host, type(call.body).__name__,
                          call.version)
            data = _FAILED
        self._answered(slot, data)

    # -- answers (any thread) ------------------------------------------------------------

    def _answered(self, slot: Slot, data) -> None:
        with self.lock:
            slot.data = data
            pending = self.pending
            if not pending or pending[0] is not slot:
                return  # an answer ahead of it is not made yet: it sends this one too
            while pending and pending[0].data is not None:
                data = pending.popleft().data
                if data is _FAILED:
                    pending.clear()
                    self.closing = True
                    break
                self._send(data)
            if self.closing:
                if not pending and not self.unsent:
                    self.conns.later(self.close)
            elif not self.reading and len(pending) < MAX_IN_FLIGHT // 2:
                self.conns.later(self._maybe_resume)

    def _send(self, data: bytes) -> None:
        """Send ``data`` after what is unsent (``self.lock`` held)."""
        if self.closed:
            return
        self.last_active = time.monotonic()
        if self.unsent:
            self.unsent += data
            if len(self.unsent) > MAX_UNSENT and self.reading:
                self.conns.later(self._maybe_resume)  # there: stops reading
            return
        try:
            n = self.sock.send(data)
        except (BlockingIOError, InterruptedError):
            n = 0
        except OSError:
            return  # the connection is broken: its reader sees it and closes it
        if n < len(data):
            self.unsent += data[n:]
            self.conns.later(self._set_writing, True)

    def _writable(self) -> None:
        """(loop thread) The socket takes more of what is unsent."""
        with self.lock:
            if self.closed:
                return
            try:
                n = self.sock.send(self.unsent)
            except (BlockingIOError, InterruptedError):
                return
            except OSError:
                self.unsent.clear()
                n = 0
            del self.unsent[:n]
            done = not self.unsent
            close = done and self.closing and not self.pending
        if done:
            self._set_writing(False)
            if close:
                self.close()
            else:
                self._maybe_resume()

    # -- state (the loop's thread) -------------------------------------------------------

    def _set_reading(self, on: bool) -> None:
        if self.closed or on == self.reading:
            return
        self.reading = on
        if on:
            self.loop.add_reader(self.fd, self._readable)
        else:
            self.loop.remove_reader(self.fd)

    def _set_writing(self, on: bool) -> None:
        if self.closed or on == self.writing:
            return
        self.writing = on
        if on:
            self.loop.add_writer(self.fd, self._writable)
        else:
            self.loop.remove_writer(self.fd)

    def _maybe_resume(self) -> None:
        """Read again if the answers owed and unsent allow it; stop if they do not."""
        with self.lock:
            ok = (len(self.pending) < MAX_IN_FLIGHT // 2 and len(self.unsent) <= MAX_UNSENT
                  and not self.closing)
        if ok != self.reading:
            self._set_reading(ok)
            if ok and self.buf:  # frames that arrived before the pause
                self._cut(self.buf)

    def close_when_answered(self) -> None:
        """Read no more requests; close once the answers already queued are out."""
        self.closing = True
        self.buf = bytearray()
        self._set_reading(False)
        with self.lock:
            done = not self.pending and not self.unsent
        if done:
            self.close()

    def close(self) -> None:
        # Work already started goes on (a queued commit is written whatever happens); its
        # answer has nowhere to go.
        with self.lock:
            if self.closed:
                return
            self._set_reading(False)
            self._set_writing(False)
            self.closed = self.closing = True
            self.pending.clear()
            self.unsent.clear()
            self.sock.close()
        self.conns.open.discard(self)
        if self.idle_timer is not None:
            self.idle_timer.cancel()
        self.conns.on_close(self)

    def _check_idle(self) -> None:
        """``connections.max.idle.ms``: close a connection that has sent nothing and been
        sent nothing for that long, unless it is still owed an answer (a JoinGroup may be
        parked for a whole rebalance timeout)."""
        if self.closed:
            return
        idle_s = self.conns.idle_s
        quiet = time.monotonic() - self.last_active
        with self.lock:
            owed = bool(self.pending)
        if quiet >= idle_s and not owed:
            log.info("%s: idle for %.0f ms: closing", self.host, quiet * 1000)
            self.close()
            return
        self.idle_timer = self.loop.call_later(idle_s if owed else max(idle_s - quiet, 0.001),
                                               self._check_idle)


def _outcome(fut: Future) -> Outcome:
    error = fut.exception()
    return Outcome(error=error) if error is not None else Outcome(fut.result())
