"""SASL on a raw connection (support/wire_raw.py's ``call``): SaslHandshake v1 and
SaslAuthenticate with SCRAM (kafka-python's client side of the exchange, which checks the
server's signature) or PLAIN. Works against Kafka and ``offsetlog serve`` alike."""

from __future__ import annotations

import socket

from kafka.net.sasl.scram import ScramClient

from support.wire_raw import call

HANDSHAKE, AUTHENTICATE = 17, 36


class SaslFailed(ConnectionError):
    """The server refused the handshake or the credentials."""


def scram_login(sock: socket.socket, user: str, password: str,
                mechanism: str = "SCRAM-SHA-512") -> None:
    """Authenticate ``sock`` as ``user``. :raises SaslFailed: refused"""
    shake = call(sock, HANDSHAKE, 1, mechanism=mechanism)
    if shake.error_code.value != 0:
        raise SaslFailed(f"SaslHandshake: {shake.error_code.name}")
    client = ScramClient(user, password, mechanism)
    first = call(sock, AUTHENTICATE, 2, auth_bytes=client.first_message())
    if first.error_code.value != 0:
        raise SaslFailed(f"SaslAuthenticate: {first.error_code.name} {first.error_message}")
    client.process_server_first_message(first.auth_bytes)
    final = call(sock, AUTHENTICATE, 2, auth_bytes=client.final_message())
    if final.error_code.value != 0:
        raise SaslFailed(f"SaslAuthenticate: {final.error_code.name} {final.error_message}")
    client.process_server_final_message(final.auth_bytes)  # raises unless the server proved it


def plain_login(sock: socket.socket, user: str, password: str) -> None:
    """Authenticate ``sock`` as ``user`` with PLAIN. :raises SaslFailed: refused"""
    shake = call(sock, HANDSHAKE, 1, mechanism="PLAIN")
    if shake.error_code.value != 0:
        raise SaslFailed(f"SaslHandshake: {shake.error_code.name}")
    auth = call(sock, AUTHENTICATE, 2, auth_bytes=f"\0{user}\0{password}".encode())
    if auth.error_code.value != 0:
        raise SaslFailed(f"SaslAuthenticate: {auth.error_code.name} {auth.error_message}")
