"""A connection's authentication state, and SASL: SaslHandshake (17) and SaslAuthenticate
(36) with SCRAM-SHA-256, SCRAM-SHA-512 and PLAIN (docs/SECURITY.md).

Each connection has a ``Session``: its listener, its principal (``User:ANONYMOUS`` until it
is authenticated, as Kafka's) and whether it is authenticated. On a SASL listener, until
the client has authenticated, ``Session.handle`` answers its requests: ApiVersions,
SaslHandshake (the mechanism, one of ``sasl.enabled.mechanisms``) and SaslAuthenticate (the
mechanism's tokens); any other request closes the connection unanswered, as Kafka's broker
does. A failed authentication answers SASL_AUTHENTICATION_FAILED and closes the connection.
After authentication, SaslHandshake and SaslAuthenticate reach ``apis`` and answer
ILLEGAL_SASL_STATE (no re-authentication: ``connections.max.reauth.ms`` is Kafka's 0).

SASL/PLAIN checks the password against the user's SCRAM credential (SCRAM-SHA-512's, else
SCRAM-SHA-256's: the server keeps no other), and is offered only on SASL_SSL listeners
unless ``sasl.plain.over.plaintext.enable=true``: it sends the password itself.
"""

from __future__ import annotations

import logging
import os

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
#: what PLAIN checks an unknown user's password against, so that it takes as long
_DUMMY = make_credential("SCRAM-SHA-512", os.urandom(16).hex())


class Session:
    """One connection's authentication (see the module's doc)."""

    def __init__(self, listener: Listener, security: SecurityConfig, store) -> None:
        self.listener = listener.name
        self.principal = ANONYMOUS
        #: PLAINTEXT needs nothing; TLS its handshake (``tls_established``); SASL its exchange
        self.authenticated = not (listener.sasl or listener.tls)
        self.needs_sasl = listener.sasl
        self.store = store
        self.mechanisms = [m for m in security.sasl_mechanisms
                           if m != "PLAIN" or listener.tls or security.plain_over_plaintext]
        self.mechanism: str | None = None
        self.exchange: ScramServer | None = None
        #: the connection must be closed once the answer is sent
        self.close = False

    def tls_established(self, principal: str) -> None:
        """The TLS handshake is done: the client certificate's principal, if any, is the
        connection's unless SASL authenticates it."""
        self.principal = principal
        if not self.needs_sasl:
            self.authenticated = True

    def handle(self, call: Call, api_versions):
        """The answer to ``call`` before authentication, or None: close unanswered."""
        if call.api_key == API_VERSIONS:
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
        token = bytes(call.body.auth_bytes)
        try:
            if len(token) > MAX_TOKEN:
                raise ScramError(f"a token of {len(token)} bytes")
            if self.exchange is None:
                user = self._plain(token)
                answer = b""
            elif self.exchange.state == "first":
                return call.respond(error_code=E.NONE, error_message=None,
                                    auth_bytes=self.exchange.first(token))
            else:
                answer = self.exchange.final(token)
                user = self.exchange.user
        except ScramError as e:
            log.info("%s: %s authentication failed: %s", call.client_host, self.mechanism, e)
            self.close = True
            return call.respond(
                error_code=E.SASL_AUTHENTICATION_FAILED, auth_bytes=b"",
                error_message="Authentication failed during authentication due to invalid "
                              f"credentials with SASL mechanism {self.mechanism}")
        self.authenticated = True
        self.principal = f"User:{user}"
        return call.respond(error_code=E.NONE, error_message=None, auth_bytes=answer,
                            session_lifetime=0)

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
