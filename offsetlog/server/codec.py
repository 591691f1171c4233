"""Kafka's framing and message encoding, through ``kio`` (Kafka's own schemas, generated).

Nothing here writes a byte layout of Kafka's by hand: kio reads and writes the request and
response headers and every message. This module adds the 4-byte length prefix, the choice
of header version (kio's schemas name it: ``__header_schema__``) and :func:`build`, which
makes a response of any version from one set of named values (fields a version lacks are
dropped; milliseconds, error codes and topic ids are converted to kio's types), so one
handler serves every version of an API.
"""

from __future__ import annotations

import dataclasses
import datetime
import functools
import io
import typing
import uuid
from typing import Any

from kio.index import load_request_schema, load_response_schema
from kio.schema.errors import ErrorCode
from kio.schema.request_header.v1.header import RequestHeader as RequestHeaderV1
from kio.schema.request_header.v2.header import RequestHeader as RequestHeaderV2
from kio.serial import entity_reader, entity_writer
from kio.serial.readers import read_int16, read_int32
from kio.serial.writers import write_int32
from kio.static.primitive import i32Timedelta, i64Timedelta

#: bytes of the length prefix of every request and response
LENGTH_SIZE = 4


class FrameError(Exception):
    """A frame that cannot be a request: the connection is closed (Kafka does the same)."""


@dataclasses.dataclass(frozen=True)
class Header:
    api_key: int
    api_version: int
    correlation_id: int
    client_id: str | None
    body_at: int  #: where the request body starts in the frame


def frame_length(data, offset: int = 0) -> int:
    """The length the 4-byte prefix at ``offset`` of ``data`` announces."""
    if data.__class__ is bytearray:
        # a connection's buffer of a frame that came in several reads: kio (1.x) reads only
        # read-only buffers, and a writable one raised ValueError in the event loop, leaving
        # the connection unanswered
        data = memoryview(data).toreadonly()
    return read_int32(data, offset)[0]


def read_header(frame: bytes, *, flexible: bool) -> Header:
    """The request header of ``frame`` (v2, with tagged fields, for flexible versions).

    :raises FrameError: the frame is too short or malformed
    """
    schema = RequestHeaderV2 if flexible else RequestHeaderV1
    try:
        h, size = entity_reader(schema)(frame, 0)
    except Exception as e:  # kio raises several types for garbage
        raise FrameError(f"bad request header: {type(e).__name__}: {e}") from None
    return Header(int(h.request_api_key), int(h.request_api_version), int(h.correlation_id),
                  h.client_id, size)


def peek_api(frame: bytes) -> tuple[int, int, int]:
    """``(api_key, api_version, correlation_id)``: the fields every header version starts
    with (int16, int16, int32: RequestHeader.json), read with kio's readers for those types;
    enough to pick the schema, or to answer an unsupported ApiVersions.

    :raises FrameError: the frame is too short
    """
    try:
        return read_int16(frame, 0)[0], read_int16(frame, 2)[0], read_int32(frame, 4)[0]
    except Exception as e:
        raise FrameError(f"bad request header: {type(e).__name__}: {e}") from None


@functools.cache
def request_schema(api_key: int, version: int):
    return load_request_schema(api_key, version)


@functools.cache
def response_schema(api_key: int, version: int):
    return load_response_schema(api_key, version)


def decode_request(frame: bytes, api_key: int, version: int) -> tuple[Header, Any]:
    """The header and body of a request of a supported ``(api_key, version)``.

    :raises FrameError: it does not decode
    """
    schema = request_schema(api_key, version)
    header = read_header(frame, flexible=schema.__header_schema__ is RequestHeaderV2)
    try:
        body, size = entity_reader(schema)(frame, header.body_at)
    except Exception as e:
        raise FrameError(f"bad {schema.__name__} v{version}: {type(e).__name__}: {e}") from None
    return header, body


@dataclasses.dataclass(frozen=True)
class Encoded:
    """A response encoded ahead (its header version and body), for answers a handler keeps
    and sends again (``offsets.offset_commit``); see :func:`encoded`."""

    header_schema: type
    body: bytes


def encoded(response: Any) -> Encoded:
    return Encoded(type(response).__header_schema__, _encode(response))


def encode_response(correlation_id: int, response: Any) -> bytes:
    """The length-prefixed response frame (header version as the response's schema says:
    v0 for non-flexible versions and for ApiVersions, v1 otherwise); ``response`` is a kio
    message or an :class:`Encoded` one, or the whole frame already (``bytes``: an answer the
    native codec encoded)."""
    if response.__class__ is bytes:
        return response
    if response.__class__ is Encoded:
        header_schema, body = response.header_schema, response.body
    else:
        header_schema, body = type(response).__header_schema__, encode_body(response)
    rest = _header_rest(header_schema)
    buf = io.BytesIO()
    write_int32(buf, ID_SIZE + len(rest) + len(body))
    write_int32(buf, correlation_id)
    buf.write(rest)
    buf.write(body)
    return buf.getvalue()


#: bytes of a response header's correlation id (int32)
ID_SIZE = 4


@functools.cache
def _header_rest(header_schema) -> bytes:
    """What a response header of this version holds after the correlation id, as kio
    writes it (v1: its empty tagged fields). The correlation id is every response header's
    first field (ResponseHeader.json); a probe checks that kio's bytes start with it, so
    only the id (kio's int32) is written per answer, not a header entity (4 us a frame)."""
    probe = 0x0102_0304
    whole, first = io.BytesIO(), io.BytesIO()
    entity_writer(header_schema)(whole, header_schema(correlation_id=probe))
    write_int32(first, probe)
    data, prefix = whole.getvalue(), first.getvalue()
    if not data.startswith(prefix) or len(prefix) != ID_SIZE:
        raise AssertionError(f"{header_schema.__name__} does not start with its correlation id")
    return data[ID_SIZE:]


#: how many encoded response bodies ``encode_body`` keeps
BODY_CACHE_SIZE = 512
_bodies: dict[Any, bytes] = {}


def encode_body(response: Any) -> bytes:
    """The bytes of a response message (no header).

    kio's writers are Python, a call per field: 25 us for a one-partition OffsetCommit
    answer, most of a commit's CPU time on the server. Answers repeat (a consumer commits
    the same partitions again and again and gets the same answer; heartbeats, fetches), and
    kio's messages are frozen dataclasses, equal and hashable by value, so the bytes of
    recent ones are kept. The hash and compare cost 2-3 us; a message with an unhashable
    field is encoded every time.
    """
    try:
        data = _bodies.get(response)
    except TypeError:  # an unhashable field
        return _encode(response)
    if data is None:
        data = _encode(response)
        if len(_bodies) >= BODY_CACHE_SIZE:
            _bodies.clear()  # simpler than LRU order, and answers that repeat come back at once
        _bodies[response] = data
    return data


def _encode(response: Any) -> bytes:
    buf = io.BytesIO()
    entity_writer(type(response))(buf, response)
    return buf.getvalue()


# -- building responses ------------------------------------------------------------------

def ms(value: datetime.timedelta | int | None) -> int | None:
    """Milliseconds of a kio duration."""
    if value is None or isinstance(value, int):
        return value
    return round(value.total_seconds() * 1000)


_PLAIN, _ENTITY, _ENTITIES, _DURATION, _ERROR, _UUID = range(6)


@functools.cache
def _plan(cls) -> tuple[tuple[str, int, Any], ...]:
    hints = typing.get_type_hints(cls)
    out = []
    for f in dataclasses.fields(cls):
        t = hints[f.name]
        args = [a for a in typing.get_args(t) if a is not type(None)]
        if t in (i32Timedelta, i64Timedelta):
            out.append((f.name, _DURATION, None))
        elif t is ErrorCode:
            out.append((f.name, _ERROR, None))
        elif t is uuid.UUID or uuid.UUID in args:
            out.append((f.name, _UUID, None))
        elif dataclasses.is_dataclass(t):
            out.append((f.name, _ENTITY, t))
        else:
            inner = None
            for a in [t, *args]:
                sub = [x for x in typing.get_args(a) if x is not Ellipsis]
                if typing.get_origin(a) is tuple and sub and dataclasses.is_dataclass(sub[0]):
                    inner = sub[0]
            out.append((f.name, _ENTITIES, inner) if inner else (f.name, _PLAIN, None))
    return tuple(out)


def build(cls, **values) -> Any:
    """An instance of the kio class ``cls`` from named values; names the class (this
    version) lacks are ignored, missing ones take the schema's default. Nested entities are
    given as dicts (or lists of dicts), durations as ms, error codes as ints, topic ids as
    16 bytes or ``uuid.UUID``."""
    kwargs = {}
    for name, kind, inner in _plan(cls):
        if name not in values:
            continue
        v = values[name]
        if kind == _DURATION:
            v = datetime.timedelta(milliseconds=v)
        elif kind == _ERROR:
            v = ErrorCode(int(v))
        elif kind == _UUID:
            v = uuid.UUID(bytes=bytes(v)) if isinstance(v, (bytes, bytearray)) else v
        elif kind == _ENTITY and isinstance(v, dict):
            v = build(kind and inner, **v)
        elif kind == _ENTITIES and v is not None:
            v = tuple(build(inner, **x) if isinstance(x, dict) else x for x in v)
        kwargs[name] = v
    return cls(**kwargs)


def has_field(cls_or_obj, name: str) -> bool:
    """Whether this version of a message has field ``name``."""
    cls = cls_or_obj if isinstance(cls_or_obj, type) else type(cls_or_obj)
    return any(f[0] == name for f in _plan(cls))
