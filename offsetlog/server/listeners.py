"""Listening and accepting: the listeners' sockets, each accepted connection's TLS and
authentication state, and the connection limits (docs/SECURITY.md).

* ``max.connections.per.ip`` (and its overrides): a connection from a host that has that
  many already is closed as soon as it is accepted, as Kafka's broker does.
* ``max.connections``: at the limit, the server accepts nothing more until a connection
  closes (Kafka's broker waits for a slot the same way) — except that a connection still
  authenticating gives way: the oldest such one is closed to make room. So connections
  that never authenticate cannot keep out ones that do.
* ``authentication.timeout.ms``: a connection on a TLS or SASL listener that has
  not finished its handshake and authentication that long after it was accepted is closed.
"""

from __future__ import annotations

import logging
import socket
from collections import Counter

from offsetlog.server.connection import Connection, Connections
from offsetlog.server.principal_mapping import parse_rules
from offsetlog.server.sasl import Session
from offsetlog.server.security_config import Listener, SecurityConfig
from offsetlog.server.tls import TlsSocket, principal_of, server_context

log = logging.getLogger("offsetlog.server")

#: connections one wake-up of a listening socket accepts at most
ACCEPT_BATCH = 64


class Acceptor:
    """The listening sockets of ``conns`` and what each accepted connection is given."""

    def __init__(self, conns: Connections, security: SecurityConfig,
                 listeners: list[Listener]) -> None:
        self.conns = conns
        self.loop = conns.loop
        self.security = security
        self.tls = server_context(security) if any(li.tls for li in listeners) else None
        rules = security.principal_mapping_rules
        #: ssl.principal.mapping.rules, parsed (None: DEFAULT, the name as it is)
        self.mapping_rules = None if rules.strip() == "DEFAULT" else parse_rules(rules)
        self.timeout_s = security.authentication_timeout_ms / 1000
        self.per_host: Counter[str] = Counter()
        #: connections not yet authenticated, oldest first (entries are dropped lazily)
        self.pending: dict[Connection, None] = {}
        #: the listening sockets, with their listeners
        self.sockets: list[tuple[socket.socket, Listener]] = []
        self.paused = False
        conns.on_close = self._closed

    def listen(self, listener: Listener) -> tuple[str, int]:
        """Listen on every address of the listener's host (one port for all, also when its
        port is 0); the first address bound.

        :raises OSError: nothing could be bound
        """
        infos = socket.getaddrinfo(listener.host or None, listener.port,
                                   type=socket.SOCK_STREAM, flags=socket.AI_PASSIVE)
        first = None
        for family, kind, proto, _, addr in dict.fromkeys(infos):
            if first is not None:
                addr = (addr[0], first[1], *addr[2:])
            sock = socket.socket(family, kind, proto)
            try:
                sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
                if family == socket.AF_INET6:
                    sock.setsockopt(socket.IPPROTO_IPV6, socket.IPV6_V6ONLY, 1)
                sock.bind(addr)
                sock.listen(128)
            except OSError:
                sock.close()
                if first is None:
                    raise
                log.warning("could not also listen on %s", addr[0])
                continue
            sock.setblocking(False)
            self.conns.listeners.append(sock)
            self.sockets.append((sock, listener))
            self.loop.add_reader(sock.fileno(), self._accept, sock, listener)
            if first is None:
                first = sock.getsockname()[:2]
        return first

    def _full(self) -> bool:
        """(``max.connections``) No room for one more: make room by closing the oldest
        connection still authenticating, if there is one."""
        limit = self.security.max_connections
        if not limit or len(self.conns.open) < limit:
            return False
        for conn in list(self.pending):
            del self.pending[conn]
            if not conn.closed and not conn.session.authenticated:
                log.warning("%s: max.connections (%d) reached: closing this connection, "
                            "not yet authenticated, to make room", conn.host, limit)
                conn.close()
                return False
        return True

    def _accept(self, listener_sock: socket.socket, listener: Listener) -> None:
        conns = self.conns
        for _ in range(ACCEPT_BATCH):
            if not conns.stopping and self._full():
                self._pause()
                return
            try:
                sock, peer = listener_sock.accept()
            except (BlockingIOError, InterruptedError):
                return
            except OSError as e:  # out of file descriptors, or the like: try again later
                log.warning("accept failed: %s", e)
                return
            if conns.stopping:
                sock.close()
                continue
            ip = peer[0] if peer else ""
            limit = self.security.per_ip_limit(ip)
            if limit and self.per_host[ip] >= limit:
                log.warning("%s: max.connections.per.ip (%d) reached: closing", ip, limit)
                sock.close()
                continue
            sock.settimeout(conns.idle_s)  # its thread's reads and writes wait so long
            try:
                sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
            except OSError:
                pass
            self._start(sock, ip, listener)

    def _start(self, sock: socket.socket, ip: str, listener: Listener) -> None:
        session = Session(listener, self.security, self.conns.ctx.store)
        wrapped = sock
        if listener.tls:
            wrapped = TlsSocket(sock, self.tls, lambda der: session.tls_established(
                principal_of(der, self.mapping_rules)))
        # the client's host as Kafka shows it (Java's InetAddress.toString: "/1.2.3.4")
        conn = Connection(self.conns, wrapped, f"/{ip}" if ip else "", session)
        conn.ip = ip
        self.per_host[ip] += 1
        if not session.authenticated:
            self.pending[conn] = None
            self.loop.call_later(self.timeout_s, self._deadline, conn)
        conn.start()

    def _deadline(self, conn: Connection) -> None:
        self.pending.pop(conn, None)
        if not conn.closed and not conn.session.authenticated:
            log.warning("%s: not authenticated within %d ms: closing", conn.host,
                        self.security.authentication_timeout_ms)
            conn.close()

    def _closed(self, conn: Connection) -> None:
        ip = getattr(conn, "ip", "")
        self.per_host[ip] -= 1
        if self.per_host[ip] <= 0:
            del self.per_host[ip]
        self.pending.pop(conn, None)
        if self.paused:
            self._resume()

    def _pause(self) -> None:
        if not self.paused:
            self.paused = True
            for sock, _ in self.sockets:
                self.loop.remove_reader(sock.fileno())

    def _resume(self) -> None:
        if self.conns.stopping:
            return
        self.paused = False
        for sock, listener in self.sockets:
            self.loop.add_reader(sock.fileno(), self._accept, sock, listener)
