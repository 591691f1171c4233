"""Test certificates, made at test time with ``cryptography`` (no key is committed): a CA,
a server certificate for 127.0.0.1 and localhost signed by it, a client certificate signed
by it, and a second CA nobody trusts, written as PEM files (and the server's also as a
PKCS12 keystore) into a directory."""

from __future__ import annotations

import datetime
import ipaddress
from dataclasses import dataclass
from pathlib import Path

from cryptography import x509
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import ec
from cryptography.hazmat.primitives.serialization import pkcs12
from cryptography.x509.oid import NameOID

#: the client certificate's subject; Kafka's principal of it is ``User:`` + CLIENT_DN
CLIENT_DN = "CN=client-1,OU=payments,O=offsetlog tests,C=NL"
KEYSTORE_PASSWORD = "keystore-secret"
KEY_PASSWORD = "key-secret"


@dataclass
class Certs:
    ca: Path  #: the CA's certificate (clients' and the server's truststore)
    server_pem: Path  #: the server's key (unencrypted) and certificate chain
    server_pem_encrypted: Path  #: the same, the key encrypted with KEY_PASSWORD
    server_p12: Path  #: PKCS12 keystore, KEYSTORE_PASSWORD
    client_cert: Path
    client_key: Path
    other_ca: Path  #: a CA that signed nothing of the server's
    other_client_cert: Path  #: a client certificate the other CA signed
    other_client_key: Path


def _key():
    return ec.generate_private_key(ec.SECP256R1())


def _name(text: str) -> x509.Name:
    oids = {"CN": NameOID.COMMON_NAME, "OU": NameOID.ORGANIZATIONAL_UNIT_NAME,
            "O": NameOID.ORGANIZATION_NAME, "C": NameOID.COUNTRY_NAME}
    # text is RFC 2253 order (most specific first); a certificate's Name is the reverse
    parts = [p.split("=", 1) for p in text.split(",")]
    return x509.Name([x509.NameAttribute(oids[k], v) for k, v in reversed(parts)])


def _cert(subject: x509.Name, key, issuer: x509.Name, issuer_key, *, ca: bool = False,
          sans: list | None = None, client: bool = False) -> x509.Certificate:
    now = datetime.datetime.now(datetime.timezone.utc)
    b = (x509.CertificateBuilder().subject_name(subject).issuer_name(issuer)
         .public_key(key.public_key()).serial_number(x509.random_serial_number())
         .not_valid_before(now - datetime.timedelta(minutes=5))
         .not_valid_after(now + datetime.timedelta(days=2))
         .add_extension(x509.BasicConstraints(ca=ca, path_length=None), critical=True))
    if ca:
        b = b.add_extension(x509.KeyUsage(
            digital_signature=True, content_commitment=False, key_encipherment=False,
            data_encipherment=False, key_agreement=False, key_cert_sign=True, crl_sign=True,
            encipher_only=False, decipher_only=False), critical=True)
    else:
        b = b.add_extension(x509.ExtendedKeyUsage(
            [x509.oid.ExtendedKeyUsageOID.CLIENT_AUTH if client
             else x509.oid.ExtendedKeyUsageOID.SERVER_AUTH]), critical=False)
    if sans:
        b = b.add_extension(x509.SubjectAlternativeName(sans), critical=False)
    return b.sign(issuer_key, hashes.SHA256())


def _pem(cert) -> bytes:
    return cert.public_bytes(serialization.Encoding.PEM)


def _key_pem(key, password: str | None = None) -> bytes:
    enc = (serialization.BestAvailableEncryption(password.encode()) if password
           else serialization.NoEncryption())
    return key.private_bytes(serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8, enc)


def make_certs(directory: Path) -> Certs:
    directory.mkdir(parents=True, exist_ok=True)
    ca_key, other_key = _key(), _key()
    ca_name, other_name = _name("CN=offsetlog test CA"), _name("CN=someone else's CA")
    ca = _cert(ca_name, ca_key, ca_name, ca_key, ca=True)
    other = _cert(other_name, other_key, other_name, other_key, ca=True)
    server_key = _key()
    server = _cert(_name("CN=localhost"), server_key, ca_name, ca_key,
                   sans=[x509.DNSName("localhost"),
                         x509.IPAddress(ipaddress.ip_address("127.0.0.1"))])
    client_key = _key()
    client = _cert(_name(CLIENT_DN), client_key, ca_name, ca_key, client=True)
    stranger_key = _key()
    stranger = _cert(_name("CN=stranger"), stranger_key, other_name, other_key, client=True)
    files = {
        "ca.pem": _pem(ca), "other-ca.pem": _pem(other),
        "server.pem": _key_pem(server_key) + _pem(server) + _pem(ca),
        "server-encrypted.pem": _key_pem(server_key, KEY_PASSWORD) + _pem(server) + _pem(ca),
        "server.p12": pkcs12.serialize_key_and_certificates(
            b"server", server_key, server, [ca],
            serialization.BestAvailableEncryption(KEYSTORE_PASSWORD.encode())),
        "client.pem": _pem(client), "client.key": _key_pem(client_key),
        "stranger.pem": _pem(stranger), "stranger.key": _key_pem(stranger_key),
    }
    for name, data in files.items():
        (directory / name).write_bytes(data)
    d = directory
    return Certs(ca=d / "ca.pem", server_pem=d / "server.pem",
                 server_pem_encrypted=d / "server-encrypted.pem", server_p12=d / "server.p12",
                 client_cert=d / "client.pem", client_key=d / "client.key",
                 other_ca=d / "other-ca.pem", other_client_cert=d / "stranger.pem",
                 other_client_key=d / "stranger.key")
