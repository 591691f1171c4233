"""SCRAM (RFC 5802, RFC 7677) as the server side of Kafka's SCRAM-SHA-256 and -512, and the
credentials it checks against.

A credential is what RFC 5802 has a server keep: the salt, the iteration count, StoredKey =
H(HMAC(SaltedPassword, "Client Key")) and ServerKey = HMAC(SaltedPassword, "Server Key");
never the password. ``ScramServer`` runs one exchange: the client's first message (user and
nonce), the server's (the nonce extended, salt, iterations), the client's final (the whole
nonce, the channel binding, the proof), checked with ``hmac.compare_digest``, and the server's
final (its signature, which proves to the client that the server holds the credential).

An unknown user is not told apart from a wrong password: the exchange goes on with a salt
derived from the name and a per-process secret, and fails at the proof like a wrong password.
"""

from __future__ import annotations

import base64
import hashlib
import hmac
import os
import secrets

HASHES = {"SCRAM-SHA-256": "sha256", "SCRAM-SHA-512": "sha512"}
#: the iterations a credential gets unless told (Kafka's kafka-configs default)
DEFAULT_ITERATIONS = 4096
#: a SCRAM message longer than this is refused (a client's messages are a few hundred bytes)
MAX_MESSAGE = 4096
#: the part of the nonce this server adds (bytes of randomness, base64 in the message)
NONCE_BYTES = 24
#: the secret the fake salts of unknown users are derived from (one per process)
_FAKE_SALT_KEY = os.urandom(32)


class ScramError(Exception):
    """The exchange failed: authentication fails and the connection is closed."""


def salted_password(mechanism: str, password: bytes, salt: bytes, iterations: int) -> bytes:
    """Hi(password, salt, i) of RFC 5802: PBKDF2 with HMAC of the mechanism's hash."""
    return hashlib.pbkdf2_hmac(HASHES[mechanism], password, salt, iterations)


def credential_from_salted(mechanism: str, salted: bytes, salt: bytes, iterations: int) -> dict:
    """The stored credential (``USER_SCRAM_CREDENTIAL``'s value) of a salted password."""
    name = HASHES[mechanism]
    client_key = hmac.digest(salted, b"Client Key", name)
    return {"salt": salt, "iterations": iterations,
            "stored_key": hashlib.new(name, client_key).digest(),
            "server_key": hmac.digest(salted, b"Server Key", name)}


def make_credential(mechanism: str, password: str, *, iterations: int = DEFAULT_ITERATIONS,
                    salt: bytes | None = None) -> dict:
    """A new credential for ``password``: a random salt of the hash's length (as Kafka's)."""
    if salt is None:
        salt = os.urandom(hashlib.new(HASHES[mechanism]).digest_size)
    # RFC 5802 asks for SASLprep of the password; Kafka's client and server use the UTF-8 of
    # the string as given, and so does this server, so that the same passwords work
    salted = salted_password(mechanism, password.encode(), salt, iterations)
    return credential_from_salted(mechanism, salted, salt, iterations)


def check_password(mechanism: str, credential: dict, password: bytes) -> bool:
    """Whether ``password`` is the one of ``credential`` (SASL/PLAIN's check), constant-time."""
    salted = salted_password(mechanism, password, credential["salt"], credential["iterations"])
    name = HASHES[mechanism]
    stored = hashlib.new(name, hmac.digest(salted, b"Client Key", name)).digest()
    return hmac.compare_digest(stored, credential["stored_key"])


def _attributes(message: str) -> list[tuple[str, str]]:
    out = []
    for part in message.split(","):
        if len(part) < 2 or part[1] != "=" or not part[0].isalpha():
            raise ScramError(f"malformed SCRAM attribute {part[:16]!r}")
        out.append((part[0], part[2:]))
    return out


def _saslname(text: str) -> str:
    """A ``saslname`` of RFC 5802 decoded: ``=2C`` is a comma and ``=3D`` an equals sign, and
    any other ``=`` is an error."""
    out, i = [], 0
    while i < len(text):
        if text[i] == "=":
            code = text[i + 1:i + 3]
            if code not in ("2C", "3D"):
                raise ScramError("malformed user name")
            out.append("," if code == "2C" else "=")
            i += 3
        else:
            out.append(text[i])
            i += 1
    if not out:
        raise ScramError("empty user name")
    return "".join(out)


class ScramServer:
    """One SCRAM exchange, server side: ``first(message)`` -> the server's first message,
    ``final(message)`` -> the server's final message; either raises ``ScramError``.

    :param lookup: user -> the credential of this mechanism, or None
    """

    def __init__(self, mechanism: str, lookup) -> None:
        self.mechanism = mechanism
        self.hash = HASHES[mechanism]
        self.lookup = lookup
        self.user: str | None = None
        self.state = "first"
        self.credential: dict | None = None
        self.known = False

    def first(self, data: bytes) -> bytes:
        if self.state != "first":
            raise ScramError("unexpected client-first message")
        self.state = "failed"
        text = _decode(data)
        # gs2-header: "n" (no channel binding), "y" (the client could but thinks the server
        # cannot) or "p=" (channel binding, which this server does not offer)
        cbind, sep, rest = text.partition(",")
        if not sep or cbind not in ("n", "y"):
            raise ScramError("channel binding is not supported")
        authzid, sep, bare = rest.partition(",")
        if not sep or (authzid and not authzid.startswith("a=")):
            raise ScramError("malformed gs2 header")
        attrs = _attributes(bare)
        if len(attrs) < 2 or attrs[0][0] != "n" or attrs[1][0] != "r":
            raise ScramError("client-first must start with n= and r=")
        user = _saslname(attrs[0][1])
        if authzid and _saslname(authzid[2:]) != user:
            raise ScramError("an authorization id other than the user is not supported")
        client_nonce = attrs[1][1]
        if not client_nonce or not all(0x21 <= ord(c) <= 0x7E and c != "," for c in client_nonce):
            raise ScramError("malformed client nonce")
        # extensions (Kafka's tokenauth for delegation tokens) are not offered: refused
        for name, value in attrs[2:]:
            if name == "t" or value.startswith("tokenauth"):
                raise ScramError("delegation tokens are not supported")
        credential = self.lookup(user)
        self.known = credential is not None
        if credential is None:
            salt = hmac.digest(_FAKE_SALT_KEY, f"{self.mechanism}/{user}".encode(), self.hash)
            credential = {"salt": salt, "iterations": DEFAULT_ITERATIONS,
                          "stored_key": os.urandom(len(salt)), "server_key": os.urandom(len(salt))}
        self.user = user
        self.credential = credential
        self.gs2_header = text[:len(text) - len(bare)]
        self.nonce = client_nonce + base64.b64encode(secrets.token_bytes(NONCE_BYTES)).decode()
        self.server_first = (f"r={self.nonce},s={base64.b64encode(credential['salt']).decode()}"
                             f",i={credential['iterations']}")
        self.client_first_bare = bare
        self.state = "final"
        return self.server_first.encode()

    def final(self, data: bytes) -> bytes:
        if self.state != "final":
            raise ScramError("unexpected client-final message")
        self.state = "failed"  # one try: a replayed or second final message fails
        text = _decode(data)
        without_proof, sep, proof_attr = text.rpartition(",p=")
        if not sep:
            raise ScramError("client-final without a proof")
        attrs = _attributes(without_proof)
        if len(attrs) < 2 or attrs[0][0] != "c" or attrs[1][0] != "r":
            raise ScramError("client-final must start with c= and r=")
        try:
            binding = base64.b64decode(attrs[0][1], validate=True)
            proof = base64.b64decode(proof_attr, validate=True)
        except ValueError:
            raise ScramError("malformed base64") from None
        if not hmac.compare_digest(binding, self.gs2_header.encode()):
            raise ScramError("channel binding does not match the gs2 header")
        if not hmac.compare_digest(attrs[1][1].encode(), self.nonce.encode()):
            raise ScramError("the nonce is not the server's")
        credential = self.credential
        auth_message = ",".join((self.client_first_bare, self.server_first,
                                 without_proof)).encode()
        signature = hmac.digest(credential["stored_key"], auth_message, self.hash)
        if len(proof) != len(signature):
            raise ScramError("invalid credentials")
        client_key = bytes(a ^ b for a, b in zip(proof, signature))
        stored = hashlib.new(self.hash, client_key).digest()
        if not hmac.compare_digest(stored, credential["stored_key"]) or not self.known:
            raise ScramError("invalid credentials")
        self.state = "done"
        server_signature = hmac.digest(credential["server_key"], auth_message, self.hash)
        return b"v=" + base64.b64encode(server_signature)


def _decode(data: bytes) -> str:
    if len(data) > MAX_MESSAGE:
        raise ScramError(f"a SCRAM message of {len(data)} bytes (limit {MAX_MESSAGE})")
    try:
        return bytes(data).decode("utf-8")
    except UnicodeDecodeError:
        raise ScramError("a SCRAM message that is not UTF-8") from None
