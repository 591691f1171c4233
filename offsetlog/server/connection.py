"""The asyncio side: accept connections, cut frames, decode them, and write the answers in
request order on each connection. Everything Kafka-specific is elsewhere: frames go to
``codec`` and ``apis.handle`` (plain functions), and the ``work.Reply`` they return is
waited for here (store futures through ``asyncio.wrap_future``, blocking store calls on a
worker thread), so the event loop never waits for an fsync.

Per connection, a reader task queues one item per request (the encoded answer, or a task
making it) and a writer task writes them in queue order: a JoinGroup parked for a rebalance
holds back the answers behind it on its own connection only, as in Kafka.

A frame longer than ``socket.request.max.bytes`` or shorter than a header, one that does not
decode, an unknown API key or an unsupported version (except ApiVersions, answered with
UNSUPPORTED_VERSION and the supported versions) closes that connection after the answers
already queued; nothing of it reaches the store.
"""

from __future__ import annotations

import asyncio
import logging
from concurrent.futures import Executor

from offsetlog.server import apis
from offsetlog.server import errors as E
from offsetlog.server.codec import (
    FrameError,
    build,
    decode_request,
    encode_response,
    frame_length,
    peek_api,
    response_schema,
)
from offsetlog.server.context import Call, Context
from offsetlog.server.work import Outcome, Reply

log = logging.getLogger("offsetlog.server")

#: answers a connection may have outstanding before the server stops reading from it
MAX_IN_FLIGHT = 128
#: the shortest frame that can hold a request header (key, version, correlation id, client)
MIN_FRAME = 10
_CLOSE = object()


class Connections:
    def __init__(self, ctx: Context, executor: Executor, clock) -> None:
        self.ctx = ctx
        self.executor = executor
        self.clock = clock
        self.open: set[asyncio.Task] = set()
        self.stopping = False

    async def serve(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        peer = writer.get_extra_info("peername") or ("", 0)
        host = str(peer[0])
        queue: asyncio.Queue = asyncio.Queue(MAX_IN_FLIGHT)
        out = asyncio.create_task(self._write(queue, writer))
        limit = self.ctx.config.socket_request_max_bytes
        try:
            while not self.stopping:
                prefix = await reader.readexactly(4)
                size = frame_length(prefix)
                if not MIN_FRAME <= size <= limit:
                    log.warning("%s: frame of %d bytes (limit %d): closing", host, size, limit)
                    break
                frame = await reader.readexactly(size)
                try:
                    item = self._dispatch(frame, host)
                except FrameError as e:
                    log.warning("%s: %s: closing", host, e)
                    break
                if item is not None:
                    await queue.put(item)
        except (asyncio.IncompleteReadError, ConnectionError):
            pass  # the client went away, possibly mid-frame: nothing of that frame was used
        finally:
            await queue.put(_CLOSE)
            try:
                await out
            finally:
                writer.close()

    async def _write(self, queue: asyncio.Queue, writer: asyncio.StreamWriter) -> None:
        broken = False
        while True:
            item = await queue.get()
            if item is _CLOSE:
                return
            if not isinstance(item, bytes):
                item = await item  # a task: wait for this answer, keeping the order
            if broken:
                continue
            if item is None:  # a handler failed (logged): the client would wait forever
                broken = True
                writer.close()
                continue
            try:
                writer.write(item)
                await writer.drain()
            except ConnectionError:
                broken = True  # keep draining the queue so every task is awaited

    def _dispatch(self, frame: bytes, host: str):
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
        call = Call(api_key, version, header, body, host)
        try:
            result = apis.handle(self.ctx, call, self.clock())
        except Exception:
            log.exception("%s: %s v%d failed", host, type(body).__name__, version)
            raise FrameError("internal error") from None
        if result is None:
            return None
        if isinstance(result, Reply):
            return asyncio.ensure_future(self._complete(result, call))
        return encode_response(correlation_id, result)

    async def _complete(self, reply: Reply, call: Call) -> bytes | None:
        loop = asyncio.get_running_loop()
        try:
            while isinstance(reply, Reply):
                if reply.delay_ms:
                    await asyncio.sleep(reply.delay_ms / 1000)
                outcomes = []
                for fut in reply.futures:
                    try:
                        outcomes.append(Outcome(await asyncio.wrap_future(fut)))
                    except Exception as e:
                        outcomes.append(Outcome(error=e))
                if reply.blocking is not None:
                    try:
                        outcomes.append(Outcome(await loop.run_in_executor(self.executor,
                                                                           reply.blocking)))
                    except Exception as e:
                        outcomes.append(Outcome(error=e))
                reply = reply.finish(outcomes)
            return encode_response(call.header.correlation_id, reply)
        except Exception:
            log.exception("%s v%d failed", type(call.body).__name__, call.version)
            return None
