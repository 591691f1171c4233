"""TLS for the SSL and SASL_SSL listeners, with Python's ssl module (docs/SECURITY.md).

``server_context(security)`` builds the one ``ssl.SSLContext`` from Kafka's ``ssl.*``
properties: the keystore (PEM: the key and its certificate chain in one file, the key
encrypted with ``ssl.key.password`` or not; PKCS12, read with ``cryptography``), the
truststore for client certificates, ``ssl.client.auth``, ``ssl.enabled.protocols`` and
``ssl.cipher.suites``.

``TlsSocket`` puts TLS between a connection and its socket (one with a timeout) with memory
BIOs (``SSLContext.wrap_bio``), so the connection reads and writes as it does without TLS:
it offers the socket's ``recv_into``, ``sendall`` and ``fileno``. ``recv_into`` reads
ciphertext, drives the handshake and returns plaintext (``BlockingIOError`` when there is
none yet: a partial record, a handshake message); ``sendall`` encrypts and sends it all. A
client that does not speak TLS (a plaintext Kafka request) fails the handshake: the
connection is closed and nothing it sent is read as a request.
"""

from __future__ import annotations

import os
import ssl
import tempfile
import threading

from offsetlog.server.security_config import SecurityConfig

#: ciphertext read from the socket at once: well under the connection's receive buffer,
#: so the plaintext of one read always fits it
RAW_READ = 64 * 1024
_VERSIONS = {"TLSv1.2": ssl.TLSVersion.TLSv1_2, "TLSv1.3": ssl.TLSVersion.TLSv1_3}
ANONYMOUS = "User:ANONYMOUS"


class TlsConfigError(ValueError):
    """The keystore or truststore cannot be used."""


def _pkcs12(path: str, password: str):
    from cryptography.hazmat.primitives.serialization import pkcs12

    with open(path, "rb") as f:
        data = f.read()
    try:
        return pkcs12.load_key_and_certificates(data, password.encode() if password else None)
    except ValueError as e:
        raise TlsConfigError(f"{path}: not a PKCS12 store this password opens ({e})") from None


def _pem_of(key, cert, chain) -> bytes:
    from cryptography.hazmat.primitives import serialization

    out = key.private_bytes(serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8,
                            serialization.NoEncryption())
    for c in [cert, *chain]:
        if c is not None:
            out += c.public_bytes(serialization.Encoding.PEM)
    return out


def server_context(security: SecurityConfig) -> ssl.SSLContext:
    """The server's TLS context.

    :raises TlsConfigError: a store that does not open, a bad cipher list
    """
    ctx = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    versions = sorted(_VERSIONS[v] for v in security.tls_protocols)
    ctx.minimum_version, ctx.maximum_version = versions[0], versions[-1]
    if security.cipher_suites:
        try:
            ctx.set_ciphers(":".join(security.cipher_suites))
        except ssl.SSLError:
            raise TlsConfigError(f"ssl.cipher.suites: no cipher of "
                                 f"{','.join(security.cipher_suites)} is available (OpenSSL's "
                                 "names, e.g. ECDHE-RSA-AES256-GCM-SHA384)") from None
    location = security.keystore_location
    try:
        if security.keystore_type == "pem":
            ctx.load_cert_chain(location, password=security.key_password or None)
        else:
            key, cert, chain = _pkcs12(location, security.keystore_password)
            if key is None or cert is None:
                raise TlsConfigError(f"{location}: the PKCS12 keystore holds no key and "
                                     "certificate")
            # ssl loads a chain only from a file: a private one, removed at once
            with tempfile.TemporaryDirectory(prefix="offsetlog-tls-") as d:
                path = os.path.join(d, "keystore.pem")
                fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
                with os.fdopen(fd, "wb") as f:
                    f.write(_pem_of(key, cert, chain))
                ctx.load_cert_chain(path)
    except (OSError, ssl.SSLError) as e:
        raise TlsConfigError(f"ssl.keystore.location {location}: {e}") from None
    if security.truststore_location:
        try:
            if security.truststore_type == "pem":
                ctx.load_verify_locations(cafile=security.truststore_location)
            else:
                from cryptography.hazmat.primitives import serialization

                _, cert, chain = _pkcs12(security.truststore_location,
                                         security.truststore_password)
                certs = [c for c in [cert, *chain] if c is not None]
                if not certs:
                    raise TlsConfigError(f"{security.truststore_location}: no certificate")
                ctx.load_verify_locations(cadata="".join(
                    c.public_bytes(serialization.Encoding.PEM).decode() for c in certs))
        except (OSError, ssl.SSLError) as e:
            raise TlsConfigError(f"ssl.truststore.location {security.truststore_location}: "
                                 f"{e}") from None
    ctx.verify_mode = {"required": ssl.CERT_REQUIRED, "requested": ssl.CERT_OPTIONAL,
                       "none": ssl.CERT_NONE}[security.client_auth]
    return ctx


def principal_of(der: bytes | None, rules=None) -> str:
    """Kafka's default principal of a client certificate: ``User:`` and its subject's
    distinguished name as RFC 2253 renders it (Java's ``X500Principal.getName()``:
    most specific first, ``CN=client,OU=eng,O=org``), as ``ssl.principal.mapping.rules``
    (parsed: principal_mapping.py; None: DEFAULT) map it; ``User:ANONYMOUS`` without one.

    :raises OSError: no rule applies to the name (the connection is closed, as Kafka's)"""
    if not der:
        return ANONYMOUS
    from cryptography import x509

    name = x509.load_der_x509_certificate(der).subject.rfc4514_string()
    if rules is not None:
        from offsetlog.server.principal_mapping import map_name

        try:
            mapped = map_name(rules, name)
        except ValueError as e:  # a replacement naming a group its pattern lacks
            raise OSError(f"ssl.principal.mapping.rules: {e}") from None
        if mapped is None:
            raise OSError(f"ssl.principal.mapping.rules: no rule applies to {name}")
        name = mapped
    return "User:" + name


class TlsSocket:
    """A server-side TLS connection over a socket (see the module's doc)."""

    def __init__(self, sock, context: ssl.SSLContext, on_handshake) -> None:
        self.sock = sock
        self.incoming = ssl.MemoryBIO()
        self.outgoing = ssl.MemoryBIO()
        self.obj = context.wrap_bio(self.incoming, self.outgoing, server_side=True)
        #: (the client certificate, DER, or None) -> None, once; may raise OSError: close
        self.on_handshake = on_handshake
        self.handshaken = False
        self.lock = threading.Lock()  # reads and writes share obj

    def fileno(self) -> int:
        return self.sock.fileno()

    def close(self) -> None:
        self.sock.close()

    def recv_into(self, buffer) -> int:
        data = self.sock.recv(RAW_READ)  # BlockingIOError and OSError go to the caller
        if not data:
            return 0
        with self.lock:
            self.incoming.write(data)
            if not self.handshaken:
                try:
                    self.obj.do_handshake()
                except ssl.SSLWantReadError:
                    self._flush()
                    raise BlockingIOError from None
                except ssl.SSLError as e:
                    self._flush()  # the alert, if any
                    raise OSError(f"TLS handshake failed: {e}") from None
                self.handshaken = True
                self.on_handshake(self.obj.getpeercert(binary_form=True))
            view = memoryview(buffer)
            n = 0
            while n < len(view):
                try:
                    k = self.obj.read(len(view) - n, view[n:])
                except ssl.SSLWantReadError:
                    break
                except ssl.SSLZeroReturnError:  # the client closed its TLS session
                    if n:
                        break
                    return 0
                except ssl.SSLError as e:
                    raise OSError(f"TLS: {e}") from None
                if not k:
                    break
                n += k
            self._flush()  # TLS 1.3 session tickets, key updates
        if not n:
            raise BlockingIOError
        return n

    def sendall(self, data) -> None:
        """Encrypt ``data`` and send it all (OSError: the socket failed or timed out)."""
        with self.lock:
            try:
                self.obj.write(data)
            except ssl.SSLError as e:
                raise OSError(f"TLS: {e}") from None
            self._flush()

    def _flush(self) -> None:
        """Send the ciphertext made so far (``self.lock`` held); OSError goes to the caller,
        which closes the connection."""
        pending = self.outgoing.read()
        if pending:
            self.sock.sendall(pending)
