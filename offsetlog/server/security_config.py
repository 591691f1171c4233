"""The security settings of ``offsetlog serve``, by Kafka's property names: listeners and
their security protocols, TLS, SASL and connection limits (docs/SECURITY.md).

``SECURITY_PROPERTIES`` maps each property to a ``SecurityConfig`` field and its parser;
``config.ServerConfig.parse`` routes these keys here. Two settings are offsetlog's own, not
Kafka's: ``sasl.plain.over.plaintext.enable`` and ``authentication.timeout.ms``.
"""

from __future__ import annotations

import ipaddress
from dataclasses import dataclass, field

#: Kafka's security protocols
PROTOCOLS = ("PLAINTEXT", "SSL", "SASL_PLAINTEXT", "SASL_SSL")
#: the SASL mechanisms this server offers
SASL_MECHANISMS = ("SCRAM-SHA-256", "SCRAM-SHA-512", "PLAIN")
TLS_VERSIONS = ("TLSv1.2", "TLSv1.3")


@dataclass(frozen=True)
class Listener:
    """One listener: Kafka's ``NAME://HOST:PORT`` and the security protocol of its name."""

    name: str
    host: str
    port: int
    protocol: str

    @property
    def tls(self) -> bool:
        return self.protocol in ("SSL", "SASL_SSL")

    @property
    def sasl(self) -> bool:
        return self.protocol in ("SASL_PLAINTEXT", "SASL_SSL")

    @property
    def authenticated(self) -> bool:
        """Whether a client must prove who it is here (SASL, or a required client
        certificate: see ``SecurityConfig.authenticates``)."""
        return self.sasl


def _str(text: str) -> str:
    return text


def _list(text: str) -> tuple[str, ...]:
    return tuple(t.strip() for t in text.split(",") if t.strip())


def _choice(*allowed: str):
    def parse(text: str) -> str:
        if text.strip().lower() not in allowed:
            raise ValueError(f"expected one of {', '.join(allowed)}")
        return text.strip().lower()
    return parse


def _mechanisms(text: str) -> tuple[str, ...]:
    names = _list(text)
    unknown = [n for n in names if n not in SASL_MECHANISMS]
    if unknown:
        raise ValueError(f"unsupported SASL mechanisms {', '.join(unknown)}; this server "
                         f"offers {', '.join(SASL_MECHANISMS)}")
    return names


def _protocols(text: str) -> tuple[str, ...]:
    names = _list(text)
    bad = [n for n in names if n not in TLS_VERSIONS]
    if bad or not names:
        raise ValueError(f"supported: {', '.join(TLS_VERSIONS)}")
    return names


def _nonneg(text: str) -> int:
    v = int(text)
    if v < 0:
        raise ValueError(f"{v} is below 0")
    return v


def _positive(text: str) -> int:
    v = int(text)
    if v < 1:
        raise ValueError(f"{v} is below 1")
    return v


def _overrides(text: str) -> tuple[tuple[str, int], ...]:
    """``max.connections.per.ip.overrides``: ``host:count,host:count`` (Kafka's form)."""
    out = []
    for item in _list(text):
        host, sep, count = item.rpartition(":")
        if not sep or not host:
            raise ValueError(f"{item!r}: expected HOST:COUNT")
        out.append((host.strip("[]"), _nonneg(count)))
    return tuple(out)


def _bool(text: str) -> bool:
    if text.lower() not in ("true", "false"):
        raise ValueError(f"{text!r} is not true or false")
    return text.lower() == "true"


def _mapping_rules(text: str) -> str:
    from offsetlog.server.principal_mapping import parse_rules

    parse_rules(text)  # :raises ValueError: Kafka's "Invalid rule" message
    return text


#: Kafka property -> (SecurityConfig field, parser)
SECURITY_PROPERTIES = {
    "listeners": ("listeners", _str),
    "listener.security.protocol.map": ("protocol_map", _str),
    "advertised.listeners": ("advertised_listeners", _str),
    "sasl.enabled.mechanisms": ("sasl_mechanisms", _mechanisms),
    "ssl.keystore.type": ("keystore_type", _choice("pem", "pkcs12")),
    "ssl.keystore.location": ("keystore_location", _str),
    "ssl.keystore.password": ("keystore_password", _str),
    "ssl.key.password": ("key_password", _str),
    "ssl.truststore.type": ("truststore_type", _choice("pem", "pkcs12")),
    "ssl.truststore.location": ("truststore_location", _str),
    "ssl.truststore.password": ("truststore_password", _str),
    "ssl.client.auth": ("client_auth", _choice("required", "requested", "none")),
    "ssl.enabled.protocols": ("tls_protocols", _protocols),
    "ssl.cipher.suites": ("cipher_suites", _list),
    "ssl.principal.mapping.rules": ("principal_mapping_rules", _mapping_rules),
    "max.connections": ("max_connections", _nonneg),
    "max.connections.per.ip": ("max_connections_per_ip", _nonneg),
    "max.connections.per.ip.overrides": ("max_connections_per_ip_overrides", _overrides),
    "sasl.plain.over.plaintext.enable": ("plain_over_plaintext", _bool),
    "authentication.timeout.ms": ("authentication_timeout_ms", _positive),
    "connections.max.reauth.ms": ("max_reauth_ms", _nonneg),
    "connection.failed.authentication.delay.ms": ("failed_authentication_delay_ms", _nonneg),
}

#: Kafka's default map: each protocol's name is a listener name of that protocol
DEFAULT_PROTOCOL_MAP = {p: p for p in PROTOCOLS}


@dataclass(frozen=True)
class SecurityConfig:
    #: listeners: ``NAME://HOST:PORT,...``; empty: ``--listen``'s one PLAINTEXT listener
    listeners: str = ""
    #: listener.security.protocol.map: ``NAME:PROTOCOL,...`` (Kafka's default maps each
    #: protocol's own name to itself)
    protocol_map: str = ""
    #: advertised.listeners: ``NAME://HOST:PORT,...``, the address Metadata and
    #: FindCoordinator give the clients of listener NAME (default: the listener's own)
    advertised_listeners: str = ""
    #: sasl.enabled.mechanisms (Kafka's default is GSSAPI, which this server does not have)
    sasl_mechanisms: tuple[str, ...] = ("SCRAM-SHA-256", "SCRAM-SHA-512")
    keystore_type: str = "pkcs12"  #: Kafka's default (JKS is Java's own: not read here)
    keystore_location: str = ""
    keystore_password: str = ""
    key_password: str = ""
    truststore_type: str = "pkcs12"
    truststore_location: str = ""
    truststore_password: str = ""
    #: ssl.client.auth: none (Kafka's default), requested, required
    client_auth: str = "none"
    tls_protocols: tuple[str, ...] = TLS_VERSIONS
    #: ssl.cipher.suites: OpenSSL names for TLS 1.2 (TLS 1.3's suites are OpenSSL's
    #: defaults); empty: OpenSSL's defaults
    cipher_suites: tuple[str, ...] = ()
    #: ssl.principal.mapping.rules: a client certificate's name -> its principal's name
    #: (principal_mapping.py); Kafka's default, DEFAULT, keeps the distinguished name
    principal_mapping_rules: str = "DEFAULT"
    #: max.connections: 0 = unlimited (Kafka's default is Int.MaxValue)
    max_connections: int = 0
    #: max.connections.per.ip: 0 = unlimited
    max_connections_per_ip: int = 0
    max_connections_per_ip_overrides: tuple[tuple[str, int], ...] = ()
    #: SASL/PLAIN sends the password itself: only on SASL_SSL unless this is true
    plain_over_plaintext: bool = False
    #: a connection that has not authenticated this long after it was accepted is closed
    authentication_timeout_ms: int = 10_000
    #: connections.max.reauth.ms (KIP-368): a SASL session lasts this long, then the client
    #: re-authenticates on the same connection or it is closed; 0 (Kafka's default): forever
    max_reauth_ms: int = 0
    #: connection.failed.authentication.delay.ms (KIP-306): a failed authentication is
    #: answered, and its connection closed, this long after it failed (Kafka's default)
    failed_authentication_delay_ms: int = 100
    given: dict = field(default_factory=dict, compare=False)

    def parsed_listeners(self, listen: tuple[str, int] | None = None) -> list[Listener]:
        """The listeners, checked: ``listeners`` or, without it, one PLAINTEXT listener on
        ``listen``.

        :raises ValueError: a malformed listener, an unknown name, a duplicate
        """
        if not self.listeners:
            host, port = listen or ("127.0.0.1", 9092)
            return [Listener("PLAINTEXT", host, port, "PLAINTEXT")]
        mapping = dict(DEFAULT_PROTOCOL_MAP)
        if self.protocol_map:
            mapping = {}
            for item in _list(self.protocol_map):
                name, sep, proto = item.partition(":")
                if not sep or proto not in PROTOCOLS:
                    raise ValueError(f"listener.security.protocol.map {item!r}: expected "
                                     f"NAME:PROTOCOL, PROTOCOL one of {', '.join(PROTOCOLS)}")
                mapping[name.strip().upper()] = proto
        out: list[Listener] = []
        for item in _list(self.listeners):
            name, sep, rest = item.partition("://")
            host, colon, port = rest.rpartition(":")
            if not sep or not colon or not port.isdigit() or int(port) > 65535:
                raise ValueError(f"listeners {item!r}: expected NAME://HOST:PORT")
            name = name.upper()
            if name not in mapping:
                raise ValueError(f"listeners {item!r}: no security protocol for listener "
                                 f"{name} (listener.security.protocol.map)")
            if any(li.name == name for li in out):
                raise ValueError(f"listeners: {name} is named twice")
            out.append(Listener(name, host.strip("[]") or "0.0.0.0", int(port), mapping[name]))
        if not out:
            raise ValueError("listeners is empty")
        ports = [li.port for li in out if li.port]
        if len(ports) != len(set(ports)):
            raise ValueError("listeners: two listeners on one port")
        return out

    def check(self, listeners: list[Listener]) -> None:
        """What the listeners need is configured.

        :raises ValueError: with what is missing
        """
        if any(li.tls for li in listeners) and not self.keystore_location:
            raise ValueError("an SSL or SASL_SSL listener needs ssl.keystore.location")
        if self.client_auth != "none" and not self.truststore_location:
            raise ValueError(f"ssl.client.auth={self.client_auth} needs "
                             "ssl.truststore.location")
        if any(li.sasl for li in listeners) and not self.sasl_mechanisms:
            raise ValueError("a SASL listener needs sasl.enabled.mechanisms")
        self.advertised(listeners)

    def advertised(self, listeners: list[Listener]) -> dict[str, tuple[str, int]]:
        """advertised.listeners: listener name -> the (host, port) its clients are given.

        :raises ValueError: a malformed entry, a name not among the listeners, the
            wildcard address (Kafka's messages)
        """
        out: dict[str, tuple[str, int]] = {}
        names = [li.name for li in listeners]
        for item in _list(self.advertised_listeners):
            name, sep, rest = item.partition("://")
            host, colon, port = rest.rpartition(":")
            if not sep or not colon or not port.isdigit() or int(port) > 65535:
                raise ValueError(f"advertised.listeners {item!r}: expected NAME://HOST:PORT")
            name, host = name.upper(), host.strip("[]")
            if name not in names:
                raise ValueError("advertised.listeners listener names must be equal to or a "
                                 f"subset of the ones defined in listeners. Found {name}. The "
                                 "valid options based on currently configured listeners are "
                                 + ",".join(names))
            if host in ("0.0.0.0", "::"):
                raise ValueError("advertised.listeners cannot use the nonroutable "
                                 "meta-address 0.0.0.0. Use a routable IP address.")
            if name in out:
                raise ValueError(f"advertised.listeners: {name} is named twice")
            out[name] = (host, int(port))
        return out

    def authenticates(self, listener: Listener) -> bool:
        """Whether every client of ``listener`` is authenticated (SASL, or TLS with a
        required client certificate)."""
        return listener.sasl or (listener.tls and self.client_auth == "required")

    def per_ip_limit(self, host: str) -> int:
        """The connection limit of ``host`` (0 = none)."""
        for h, count in self.max_connections_per_ip_overrides:
            if h == host or _same_address(h, host):
                return count
        return self.max_connections_per_ip


def _same_address(a: str, b: str) -> bool:
    try:
        return ipaddress.ip_address(a) == ipaddress.ip_address(b)
    except ValueError:
        return False
