"""A connection's authentication state, and SASL: SaslHandshake (17) and SaslAuthenticate
(36) with SCRAM-SHA-256, SCRAM-SHA-512 and PLAIN (docs/SECURITY.md).

Each connection has a ``Session``: its listener, its principal (``User:ANONYMOUS`` until it
is authenticated, as Kafka's) and whether it is authenticated. On a SASL listener, until
the client has authenticated, ``Session.handle`` answers its requests: ApiVersions,
SaslHandshake (the mechanism, one of ``sasl.enabled.mechanisms``) and SaslAuthenticate (the
mechanism's tokens); any other request closes the connection unanswered, as Kafka's broker
does. After SaslHandshake v0 the tokens come raw, each a length-prefixed frame without
Kafka's request header, and are answered raw (``raw_token``); a failure there is not
answered, the connection is closed (Kafka 4.4 still serves v0 so, measured).

A failed authentication answers SASL_AUTHENTICATION_FAILED and closes the connection, both
``connection.failed.authentication.delay.ms`` after the failure (KIP-306: a client guessing
passwords gets one guess per delay and connection; the connection does the waiting).

Re-authentication (KIP-368): with ``connections.max.reauth.ms`` > 0 a session lasts that
long (SaslAuthenticate's ``session_lifetime_ms``); the client re-authenticates on the same
connection with SaslHandshake and SaslAuthenticate, as the same principal by the same
mechanism, and a connection whose session has expired is closed at its next request
(``expired``). At most one re-authentication a second begins; otherwise, and when
``connections.max.reauth.ms`` is 0, SaslHandshake and SaslAuthenticate after authentication
reach ``apis`` and answer ILLEGAL_SASL_STATE, as Kafka's broker answers.

SASL/PLAIN checks the password against the user's SCRAM credential (SCRAM-SHA-512's, else
SCRAM-SHA-256's: the server keeps no other), and is offered only on SASL_SSL listeners
unless ``sasl.plain.over.plaintext.enable=true``: it sends the password itself.
"""

from __future__ import annotations

import logging
import os
import struct
import time

from offsetlog.server import errors as E
from offsetlog.server.context import Call
from offsetlog.server.scram import ScramError, ScramServer, check_password, make_credential
from offsetlog.server.security_config import Listener, SecurityConfig
from offsetlog.server.tls import ANONYMOUS

log = logging.getLogger("offsetlog.server")

API_VERSIONS, SASL_HANDSHAKE, SASL_AUTHENTICATE = 18, 17, 36
#: a SASL token longer than this fails authentication (a SCRAM or PLAIN token is a few
#: hundred bytes; Kafka's broker caps tokens before authentication at 512 KiB)
MAX_TOKEN = 64 * 1024
#: Kafka begins at most one re-authentication of a connection a second
MIN_REAUTH_INTERVAL_S = 1.0
#: what PLAIN checks an unknown user's password against, so that it takes as long
_DUMMY = make_credential("SCRAM-SHA-512", os.urandom(16).hex())


class Session:
    """One connection's authentication (see the module's doc). ``clock``: monotonic
    seconds, for the session's lifetime."""

    def __init__(self, listener: Listener, security: SecurityConfig, store,
                 clock=time.monotonic) -> None:
        self.listener = listener.name
        self.principal = ANONYMOUS
        #: PLAINTEXT needs nothing; TLS its handshake (``tls_established``); SASL its exchange
        self.authenticated = not (listener.sasl or listener.tls)
        self.needs_sasl = listener.sasl
        self.store = store
        self.clock = clock
        self.mechanisms = [m for m in security.sasl_mechanisms
                           if m != "PLAIN" or listener.tls or security.plain_over_plaintext]
        self.mechanism: str | None = None
        self.exchange: ScramServer | None = None
        #: after SaslHandshake v0: the next frames are raw tokens
        self.raw = False
        #: the session's lifetime (connections.max.reauth.ms), and when it ends (monotonic s)
        self.reauth_ms = security.max_reauth_ms if listener.sasl else 0
        self.expires_at: float | None = None
        self.reauthenticating = False
        self._reauth_began: float | None = None
        self._mechanism_before: str | None = None
        #: connection.failed.authentication.delay.ms, in seconds
        self.failure_delay_s = security.failed_authentication_delay_ms / 1000
        #: the connection must be closed once the answer is sent
        self.close = False

    def tls_established(self, principal: str) -> None:
        """The TLS handshake is done: the client certificate's principal, if any, is the
        connection's unless SASL authenticates it."""
        self.principal = principal
        if not self.needs_sasl:
            self.authenticated = True

    def expired(self) -> bool:
        """The session has outlived connections.max.reauth.ms: close the connection."""
        return (self.expires_at is not None and not self.reauthenticating
                and self.clock() >= self.expires_at)

    def wants(self, call: Call) -> bool:
        """``call`` is the session's to answer (``handle``): a request before
        authentication or during a re-authentication, or the SaslHandshake that begins
        one (which this call begins)."""
        if not self.authenticated or self.reauthenticating:
            return True
        if call.api_key != SASL_HANDSHAKE or self.expires_at is None or call.version < 1:
            return False
        now = self.clock()
        if self._reauth_began is not None and now - self._reauth_began < MIN_REAUTH_INTERVAL_S:
            return False
        self._reauth_began = now
        self.reauthenticating = True
        self._mechanism_before, self.mechanism, self.exchange = self.mechanism, None, None
        return True

    def handle(self, call: Call, api_versions):
        """The answer to ``call`` before authentication, or None: close unanswered."""
        if call.api_key == API_VERSIONS and not self.reauthenticating:
            return api_versions(call)
        if call.api_key == SASL_HANDSHAKE and self.needs_sasl:
            return self._handshake(call)
        if call.api_key == SASL_AUTHENTICATE and self.needs_sasl:
            return self._authenticate(call)
        log.info("%s: %s v%d before authentication: closing", call.client_host,
                 type(call.body).__name__, call.version)
        self.close = True
        return None

    def _handshake(self, call: Call):
        mechanism = call.body.mechanism
        if self.mechanism is not None:
            self.close = True
            return call.respond(error_code=E.ILLEGAL_SASL_STATE, mechanisms=self.mechanisms)
        if mechanism not in self.mechanisms:
            self.close = True
            return call.respond(error_code=E.UNSUPPORTED_SASL_MECHANISM,
                                mechanisms=self.mechanisms)
        self.mechanism = mechanism
        self.raw = call.version == 0
        if mechanism != "PLAIN":
            self.exchange = ScramServer(
                mechanism, lambda user: self.store.registries.scram_credential(user, mechanism))
        return call.respond(error_code=E.NONE, mechanisms=self.mechanisms)

    def _authenticate(self, call: Call):
        if self.mechanism is None:
            self.close = True
            return call.respond(error_code=E.ILLEGAL_SASL_STATE,
                                error_message="SaslAuthenticate before SaslHandshake",
                                auth_bytes=b"")
        again = "re-authentication" if self.reauthenticating else "authentication"
        try:
            answer, user = self._step(bytes(call.body.auth_bytes))
        except ScramError as e:
            log.info("%s: %s %s failed: %s", call.client_host, self.mechanism, again, e)
            return self._failed(call, f"Authentication failed during {again} due to invalid "
                                      f"credentials with SASL mechanism {self.mechanism}")
        if user is None:  # SCRAM's first round
            return call.respond(error_code=E.NONE, error_message="", auth_bytes=answer)
        if self.reauthenticating:
            if self.mechanism != self._mechanism_before:  # Kafka closes, unanswered
                log.info("%s: re-authentication by another mechanism", call.client_host)
                self.close = True
                return None
            if f"User:{user}" != self.principal:
                return self._failed(call, "Cannot change principals during re-authentication "
                                          f"from {self.principal.replace(':', '.', 1)}: "
                                          f"User.{user}")
        self._authenticated(user)
        return call.respond(error_code=E.NONE, error_message="", auth_bytes=answer,
                            session_lifetime=self.reauth_ms)

    def _failed(self, call: Call, message: str):
        self.close = True
        return call.respond(error_code=E.SASL_AUTHENTICATION_FAILED, auth_bytes=b"",
                            error_message=message)

    def raw_token(self, token: bytes) -> bytes | None:
        """After SaslHandshake v0: the framed raw answer to ``token``, or None: close the
        connection unanswered (a failure, as Kafka's broker does)."""
        try:
            answer, user = self._step(token)
        except ScramError as e:
            log.info("%s authentication (SaslHandshake v0) failed: %s", self.mechanism, e)
            self.close = True
            return None
        if user is not None:
            self._authenticated(user)
        return struct.pack(">i", len(answer)) + answer

    def _step(self, token: bytes) -> tuple[bytes, str | None]:
        """One token of the exchange: (the answer, the user once authenticated).
        :raises ScramError: the exchange fails"""
        if len(token) > MAX_TOKEN:
            raise ScramError(f"a token of {len(token)} bytes")
        if self.exchange is None:
            return b"", self._plain(token)
        if self.exchange.state == "first":
            return self.exchange.first(token), None
        answer = self.exchange.final(token)
        return answer, self.exchange.user

    def _authenticated(self, user: str) -> None:
        self.authenticated = True
        self.reauthenticating = self.raw = False
        self.principal = f"User:{user}"
        self.expires_at = self.clock() + self.reauth_ms / 1000 if self.reauth_ms else None

    def _plain(self, token: bytes) -> str:
        """SASL/PLAIN (RFC 4616): ``authzid NUL user NUL password``; the user."""
        parts = token.split(b"\0")
        if len(parts) != 3 or not parts[1] or not parts[2]:
            raise ScramError("malformed PLAIN token")
        try:
            authzid, user = parts[0].decode(), parts[1].decode()
        except UnicodeDecodeError:
            raise ScramError("a PLAIN user that is not UTF-8") from None
        if authzid and authzid != user:
            raise ScramError("an authorization id other than the user is not supported")
        registries = self.store.registries
        for mechanism in ("SCRAM-SHA-512", "SCRAM-SHA-256"):
            credential = registries.scram_credential(user, mechanism)
            if credential is not None:
                if check_password(mechanism, credential, parts[2]):
                    return user
                break
        else:  # an unknown user costs what a wrong password does
            check_password("SCRAM-SHA-512", _DUMMY, parts[2])
        raise ScramError("invalid credentials")
