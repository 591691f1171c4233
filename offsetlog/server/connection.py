"""Connections: each served by its own thread, a plain request loop. Everything
Kafka-specific is elsewhere: frames go to ``codec`` and ``apis.handle`` (plain functions),
and the ``work.Reply`` they return is carried out here, on the connection's thread.

A connection's thread reads a frame, answers it and only then reads the next, as Kafka's
broker handles one request of a connection at a time: answers go out in request order with
no bookkeeping, a JoinGroup parked for a rebalance holds back its own connection only, and
a commit waits for its fsync on the thread of the connection that asked for it, so one slow
write holds up nobody else. Requests a client sends ahead wait in the socket's buffer.

Why threads (bench/wire.py; docs/PROTOCOL.md has the figures): the event loop that served
every connection before spent more CPU handing commits between itself, worker threads and
the store's writer than the commits cost, and each hand-off was a thread wake-up and a wait
for the GIL. A thread per connection calls the store's ``commit_sync`` itself, as the
embedded API's callers do, and waits for nothing else. The asyncio loop only accepts
connections and keeps the listeners' timers (``listeners.Acceptor``).

Each connection has a ``sasl.Session``: until it is authenticated its requests go to the
session (ApiVersions and the SASL APIs), and every request's ``Call`` carries its principal
and listener. TLS connections read and write through ``tls.TlsSocket``.

A frame longer than ``socket.request.max.bytes`` or shorter than a header, one that does not
decode, an unknown API key or an unsupported version (except ApiVersions, answered with
UNSUPPORTED_VERSION and the supported versions) closes that connection after the answers
already sent; nothing of it reaches the store. A connection that sends nothing, and is
owed nothing, for ``connections.max.idle.ms`` is closed (a half frame cannot hold it open),
as is one whose client stops reading its answers for that long.
"""

from __future__ import annotations

import asyncio
import logging
import os
import socket
import threading
import time
from concurrent.futures import Future

from offsetlog.log import _native
from offsetlog.server import apis
from offsetlog.server import errors as E
from offsetlog.server.apis_keys import HEARTBEAT, OFFSET_COMMIT, OFFSET_FETCH, TXN_OFFSET_COMMIT
from offsetlog.server.codec import (
    LENGTH_SIZE,
    FrameError,
    Header,
    build,
    decode_request,
    encode_response,
    frame_length,
    peek_api,
    response_schema,
)
from offsetlog.server.context import Call, Context
from offsetlog.server.groups import HeartbeatFields, heartbeat_code
from offsetlog.server.offset_fetch import OffsetFetchFields
from offsetlog.server.offsets import (
    NATIVE_ARRAY_CODECS,
    OffsetCommitFields,
    commit_error_code,
    commit_fields,
)
from offsetlog.server.sasl import SASL_HANDSHAKE, Session
from offsetlog.server.txn import TxnOffsetCommitFields, txn_commit_code
from offsetlog.server.work import Outcome, Reply

log = logging.getLogger("offsetlog.server")

#: the shortest frame that can hold a request header (key, version, correlation id, client)
MIN_FRAME = 10
#: bytes asked of one recv: one allocation under malloc's mmap threshold (an mmap and munmap
#: a call cost 12 us more, measured), more than a commit's frame, and what a TLS
#: connection's ciphertext read (``tls.RAW_READ``) decrypts into at most
RECV_SIZE = 64 * 1024


class Connections:
    """The open connections and what they share: the context, the clock, the idle limit,
    the listening sockets (``listeners.Acceptor`` opens them and accepts on the loop)."""

    def __init__(self, ctx: Context, clock) -> None:
        self.ctx = ctx
        self.clock = clock
        self.loop = asyncio.get_running_loop()
        self.open: set[Connection] = set()
        self.open_lock = threading.Lock()
        #: the listening sockets (listeners.Acceptor opens them and accepts)
        self.listeners: list[socket.socket] = []
        #: (loop thread) called with each connection that closes (listeners.Acceptor's)
        self.on_close = lambda conn: None
        self.stopping = False
        self.idle_s = ctx.config.connections_max_idle_ms / 1000
        #: calls ``later`` queued for the loop's thread, and whether it is woken for them
        self._later: list = []
        self._later_lock = threading.Lock()
        self._later_woken = False

    def later(self, fn, *args) -> None:
        """``fn(*args)`` on the loop's thread, soon.

        Calls are batched: the loop is woken once for all that queue before it runs them.
        Each wake-up is a byte in the loop's self-pipe, which is also where a signal's
        wake-up goes: a thousand connections closing at once (a wake-up each) filled it,
        and the SIGTERM that came next was dropped with its byte, so the server never
        stopped (seen in the bench's idle case)."""
        with self._later_lock:
            self._later.append((fn, args))
            if self._later_woken:
                return
            self._later_woken = True
        try:
            self.loop.call_soon_threadsafe(self._run_later)
        except RuntimeError:
            pass  # the loop has closed: the server has stopped

    def _run_later(self) -> None:
        """(loop thread) The calls ``later`` queued, in order."""
        with self._later_lock:
            calls, self._later = self._later, []
            self._later_woken = False
        for fn, args in calls:
            try:
                fn(*args)
            except Exception:
                log.exception("a call on the loop's thread failed: %r", fn)

    def stop_reading(self) -> None:
        """(loop thread) Accept nothing more and read no more requests: each connection
        closes once the answer it is making is out."""
        self.stopping = True
        for sock in self.listeners:
            self.loop.remove_reader(sock.fileno())
            sock.close()
        self.listeners.clear()
        with self.open_lock:
            conns = list(self.open)
        for conn in conns:
            conn.close_when_answered()

    async def drain(self, timeout: float) -> None:
        """Wait (at most ``timeout`` seconds) for every connection's answer to go out, then
        close them all."""
        deadline = time.monotonic() + timeout
        while self.open and time.monotonic() < deadline:
            await asyncio.sleep(0.01)
        with self.open_lock:
            conns = list(self.open)
        for conn in conns:
            conn.close()


def no_wakeup_preemption() -> None:
    """Run the calling thread (a connection's) under Linux's ``SCHED_BATCH`` policy: same
    priority and share of the CPU, but a thread woken from its socket or its write no
    longer preempts the thread running on its CPU.

    The connections' threads take turns at the GIL. Woken (its fsync done, its next request
    in), a thread used to preempt whichever was running, often the GIL's holder, and then
    found the GIL held and slept on it at once: the holder's few microseconds of Python
    became hundreds while it waited to run again, and every thread queued behind it (the
    GIL convoy). Measured at 32 committing connections: a request waited ~0.4 ms for the
    GIL after its read and again after its write; with this policy the server commits
    ~20 % more per second with a quarter less CPU per commit (bench/RESULTS.md). A woken
    thread still runs at once on an idle CPU. Where the policy is missing or refused, the
    thread keeps the default one."""
    try:
        os.sched_setscheduler(0, os.SCHED_BATCH, os.sched_param(0))
    except (AttributeError, OSError):
        pass


class Connection:
    def __init__(self, conns: Connections, sock, host: str, session: Session) -> None:
        """``sock``: a socket with a timeout (the idle limit), or a ``tls.TlsSocket`` over
        one."""
        self.conns = conns
        self.session = session  #: its listener, principal, authentication (sasl.py)
        self.ctx = conns.ctx
        self.sock = sock
        self.raw = getattr(sock, "sock", sock)  #: the socket itself, under TLS too
        self.host = host
        self.limit = conns.ctx.config.socket_request_max_bytes
        self.buf = bytearray()  #: received bytes not yet cut into frames
        self.lock = threading.Lock()  #: guards ``closed``
        self.closing = False  #: no more requests are read; closed once the answer is out
        self.closed = False
        self.last_active = time.monotonic()
        #: set when the connection closes: ends a pause (a delayed answer) early
        self.wake = threading.Event()
        self.recv = (sock.recv if sock is self.raw else self._recv_tls)
        #: what a TLS connection's plaintext is read into (``tls.RAW_READ`` fits it)
        self._tls_buffer = None if sock is self.raw else bytearray(RECV_SIZE)

    def start(self) -> None:
        with self.conns.open_lock:
            self.conns.open.add(self)
        threading.Thread(target=self._serve, name=f"offsetlog-conn {self.host}",
                         daemon=True).start()

    # -- the request loop (the connection's thread) ----------------------------------------

    def _serve(self) -> None:
        no_wakeup_preemption()
        try:
            if self.sock is self.raw and self.session.authenticated:
                self._serve_natively()
            else:
                while not self.closing:
                    frame = self._next_frame()
                    if frame is None or not self._request(frame):
                        break
        except Exception:
            log.exception("%s: connection failed", self.host)
        finally:
            self.close()
            try:
                self.raw.close()
            except OSError:
                pass

    def _serve_natively(self) -> None:
        """A plaintext connection with nothing to authenticate: the native request loop
        reads, answers OffsetCommit itself (with ``offset_commit``'s checks and commit)
        and hands every other frame to ``answer`` (without an authorizer: with one, every
        request goes to ``answer``, whose checks need the whole request)."""
        hot = self.ctx.acl is None and NATIVE_ARRAY_CODECS
        # (hot: plain commits go straight to the store's native entry, no Python call)
        plain = (self.ctx.store._commit_router, self.ctx.topics) if hot else (None, None)
        why = _native.serve_connection(self.raw.fileno(), int(self.conns.idle_s * 1000),
                                       self.limit, self, hot, *plain)
        if why == "idle":
            log.info("%s: idle for %.0f ms: closing", self.host, self.conns.idle_s * 1000)
        elif why.startswith("frame "):
            log.warning("%s: frame of %s bytes (limit %d): closing", self.host, why[6:],
                        self.limit)

    def answer(self, frame: bytes):
        """(the native request loop) The answer to ``frame``: its bytes, None (none is
        sent) or False (close the connection)."""
        try:
            answer = self._dispatch(frame)
        except FrameError as e:
            log.warning("%s: %s: closing", self.host, e)
            return False
        if answer is not None and answer.__class__ is not bytes:
            answer = self._carry_out(*answer)
            if answer is None:
                return False
        return answer

    def offset_commit(self, version: int, group_id: str, generation: int, member_id: str,
                      instance: str | None, topics, retention_time_ms: int):
        """(the native request loop) An OffsetCommit's fields, checked and committed
        (``offsets.commit_fields``)."""
        return commit_fields(self.ctx, version, group_id, generation, member_id, instance,
                             topics, retention_time_ms=retention_time_ms)

    def commit_error(self, version: int, group_id: str, error: Exception) -> int:
        """(the native request loop) The code of a plain commit the store refused
        (``offsets.commit_error_code``)."""
        return commit_error_code(self.ctx, version, group_id, error)

    def txn_commit_error(self, version: int, error: Exception) -> int:
        """(the native request loop) The code of a plain TxnOffsetCommit the store refused
        (``txn.txn_commit_code``)."""
        return txn_commit_code(version, error)

    def heartbeat(self, group_id: str, generation: int, member_id: str,
                  instance: str | None) -> int:
        """(the native request loop) A Heartbeat's error code (``groups.heartbeat_code``)."""
        return heartbeat_code(self.ctx, HeartbeatFields(group_id, generation, member_id,
                                                        instance))

    def _next_frame(self) -> bytes | None:
        """The next request frame, or None: the connection is to be closed (the client
        went, sent a frame of a size no request has, or was idle too long)."""
        buf = self.buf
        while True:
            if len(buf) >= LENGTH_SIZE:
                size = frame_length(buf)
                # (after SaslHandshake v0 a raw token may be shorter than any request)
                if not (MIN_FRAME <= size or self.session.raw) or size > self.limit:
                    log.warning("%s: frame of %d bytes (limit %d): closing", self.host, size,
                                self.limit)
                    return None
                end = LENGTH_SIZE + size
                if len(buf) >= end:
                    frame = bytes(buf[LENGTH_SIZE:end])
                    del buf[:end]
                    return frame
            data = self._receive()
            if not data:
                return None
            buf += data

    def _receive(self) -> bytes:
        """What the client sends next (empty: the connection is to be closed)."""
        while not self.closing:
            left = self.conns.idle_s - (time.monotonic() - self.last_active)
            if left <= 0:
                log.info("%s: idle for %.0f ms: closing", self.host, self.conns.idle_s * 1000)
                return b""
            self.raw.settimeout(left)
            try:
                data = self.recv(RECV_SIZE)
            except (BlockingIOError, InterruptedError, TimeoutError):
                continue  # (TLS: ciphertext with no whole record of plaintext yet)
            except OSError:
                return b""
            if data:
                self.last_active = time.monotonic()
            return data
        return b""

    def _recv_tls(self, size: int) -> bytes:
        n = self.sock.recv_into(self._tls_buffer)
        return bytes(self._tls_buffer[:n])

    def _request(self, frame: bytes) -> bool:
        """Answer ``frame``; False when the connection is to be closed."""
        try:
            answer = self._dispatch(frame)
        except FrameError as e:
            log.warning("%s: %s: closing", self.host, e)
            return False
        if answer is None:
            return True
        if answer.__class__ is not bytes:
            answer = self._carry_out(*answer)
            if answer is None:
                return False  # no answer could be made: its client would wait forever
        if self.session.close:
            # a failed authentication is answered connection.failed.authentication.delay.ms
            # later, then the connection is closed
            self.wake.wait(self.session.failure_delay_s)
            self._send(answer)
            return False
        return self._send(answer)

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
        native = _NATIVE_CODECS.get(api_key)  # one codec a message: the native one
        if native is not None:
            decode, body_type = native
            fields = decode(frame)
            if fields is None:
                raise FrameError(f"bad request: API {api_key} v{version}")
            correlation_id, client_id, version, *rest = fields
            body = body_type(*rest)
            header = Header(api_key, version, correlation_id, client_id, 0)
        else:
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

    def _carry_out(self, call: Call, reply: Reply) -> bytes | None:
        """The answer a reply makes (work.py): its pause, then the futures it waits for,
        then its blocking call, all on this thread; None if it failed (logged)."""
        while True:
            if reply.delay_ms:
                self.wake.wait(reply.delay_ms / 1000)
            outcomes = [_outcome(fut) for fut in reply.futures]
            if reply.blocking is not None:
                try:
                    outcomes.append(Outcome(reply.blocking()))
                except Exception as e:
                    outcomes.append(Outcome(error=e))
            try:
                result = reply.finish(outcomes)
                if isinstance(result, Reply):
                    reply = result
                    continue
                return encode_response(call.header.correlation_id, result)
            except Exception:
                log.exception("%s: %s v%d failed", self.host, type(call.body).__name__,
                              call.version)
                return None

    def _send(self, data: bytes) -> bool:
        """Send all of ``data``; False if the connection broke or its client did not read
        for ``connections.max.idle.ms``."""
        try:
            self.raw.settimeout(self.conns.idle_s)
            self.sock.sendall(data)
        except OSError:
            return False
        self.last_active = time.monotonic()
        return True

    # -- closing (any thread) ------------------------------------------------------------

    def close_when_answered(self) -> None:
        """Read no more requests; close once the answer being made is out."""
        self.closing = True
        try:
            self.raw.shutdown(socket.SHUT_RD)  # a thread waiting for a request sees the end
        except OSError:
            pass

    def close(self) -> None:
        """Close now: the connection's thread stops at its next step (work it started goes
        on: a commit is written whatever happens; its answer has nowhere to go)."""
        with self.lock:
            if self.closed:
                return
            self.closed = self.closing = True
        self.wake.set()
        try:
            self.raw.shutdown(socket.SHUT_RDWR)  # wakes its thread if it waits on the socket
        except OSError:
            pass
        with self.conns.open_lock:
            self.conns.open.discard(self)
        self.conns.later(self.conns.on_close, self)


#: the messages the native core decodes (and answers) on every connection: API key -> (its
#: decoder, giving ``(correlation id, client id, version, *fields)`` or None, and the type
#: the fields make the ``Call``'s body)
_NATIVE_CODECS = {HEARTBEAT: (_native.decode_heartbeat, HeartbeatFields)}
if NATIVE_ARRAY_CODECS:  # (messages with arrays: huge_alloc must hold here)
    _NATIVE_CODECS[OFFSET_COMMIT] = (_native.decode_offset_commit, OffsetCommitFields)
    _NATIVE_CODECS[TXN_OFFSET_COMMIT] = (_native.decode_txn_offset_commit, TxnOffsetCommitFields)
    _NATIVE_CODECS[OFFSET_FETCH] = (_native.decode_offset_fetch, OffsetFetchFields)


def _outcome(fut: Future) -> Outcome:
    error = fut.exception()  # waits for it
    return Outcome(error=error) if error is not None else Outcome(fut.result())
