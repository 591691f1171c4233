"""A raw Kafka client for protocol-level checks: kio encodes requests and decodes answers
(the tests never write Kafka's byte layouts by hand either)."""

from __future__ import annotations

import io
import socket
import struct

from kio.index import load_request_schema, load_response_schema
from kio.serial import entity_reader, entity_writer

from offsetlog.bench.wire_floors import exactly
from offsetlog.server.codec import build


def frame(api_key: int, version: int, correlation_id: int = 1, **body) -> bytes:
    schema = load_request_schema(api_key, version)
    header_schema = schema.__header_schema__
    buf = io.BytesIO()
    entity_writer(header_schema)(buf, header_schema(
        request_api_key=api_key, request_api_version=version, correlation_id=correlation_id,
        client_id="raw-test"))
    entity_writer(schema)(buf, build(schema, **body))
    data = buf.getvalue()
    return struct.pack(">i", len(data)) + data


def read_answer(sock: socket.socket, api_key: int, version: int):
    """(correlation id, response) of the next answer."""
    size = struct.unpack(">i", exactly(sock, 4))[0]
    data = exactly(sock, size)
    schema = load_response_schema(api_key, version)
    header, at = entity_reader(schema.__header_schema__)(data, 0)
    body, _ = entity_reader(schema)(data, at)
    return header.correlation_id, body


def call(sock: socket.socket, api_key: int, version: int, **body):
    sock.sendall(frame(api_key, version, **body))
    return read_answer(sock, api_key, version)[1]
