"""Fixtures of the security tests: certificates made for the session, a store with SCRAM
users, and the server (a child process) with TLS and SASL listeners."""

from __future__ import annotations

import uuid

import pytest

from offsetlog.server.scram import make_credential
from offsetlog.store import OffsetStore
from support.tls_certs import make_certs
from support.wire_server import Server

#: the users every secured store has: name -> password (both SCRAM mechanisms)
USERS = {"alice": "alice-secret", "bob": "b0b-pässword"}


@pytest.fixture(scope="session")
def certs(tmp_path_factory):
    return make_certs(tmp_path_factory.mktemp("certs"))


def add_users(directory: str, users=USERS) -> None:
    with OffsetStore.open(directory) as store:
        for name, password in users.items():
            for mechanism in ("SCRAM-SHA-256", "SCRAM-SHA-512"):
                store.registries.set_scram_credential(name, mechanism,
                                                      make_credential(mechanism, password))


def tls_config(certs, client_auth: str = "requested") -> list[str]:
    return ["ssl.keystore.type=PEM", f"ssl.keystore.location={certs.server_pem}",
            "ssl.truststore.type=PEM", f"ssl.truststore.location={certs.ca}",
            f"ssl.client.auth={client_auth}"]


LISTENERS = ("listeners=SASL_SSL://127.0.0.1:0,SSL://127.0.0.1:0,"
             "SASL_PLAINTEXT://127.0.0.1:0,PLAINTEXT://127.0.0.1:0")


@pytest.fixture
def secure_server(tmp_path, certs):
    """A server with all four listeners (``ports`` by name), SCRAM users ``USERS``, PLAIN
    enabled, client certificates requested."""
    directory = str(tmp_path / "store")
    add_users(directory)
    s = Server(directory, config=[
        LISTENERS, *tls_config(certs),
        "sasl.enabled.mechanisms=SCRAM-SHA-256,SCRAM-SHA-512,PLAIN"]).start()
    yield s
    if s.proc is not None:
        s.stop()


@pytest.fixture
def group_id():
    return f"g-{uuid.uuid4().hex[:8]}"
