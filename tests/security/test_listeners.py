"""Listener settings: parsing, the refusal to listen beyond loopback without
authentication (naming --allow-plaintext), keystores (PEM, encrypted PEM, PKCS12), TLS
versions, and Metadata / FindCoordinator answering the address of the listener the client
came in on."""

from __future__ import annotations

import socket
import ssl
import subprocess
import sys

import pytest

from offsetlog.server.config import ConfigError, ServerConfig
from offsetlog.server.main import check_listeners
from offsetlog.server.tls import TlsConfigError, server_context
from support.tls_certs import KEY_PASSWORD, KEYSTORE_PASSWORD
from support.wire_raw import call

from .conftest import LISTENERS, add_users, tls_config


def listeners_of(*items, listen=None, allow=False):
    return check_listeners(ServerConfig.parse(list(items)), listen, allow)


def test_listeners_and_the_protocol_map():
    ls = listeners_of("listeners=INTERNAL://127.0.0.1:0,EXTERNAL://localhost:9093",
                      "listener.security.protocol.map=INTERNAL:PLAINTEXT,EXTERNAL:SASL_PLAINTEXT")
    assert [(li.name, li.host, li.port, li.protocol) for li in ls] == [
        ("INTERNAL", "127.0.0.1", 0, "PLAINTEXT"), ("EXTERNAL", "localhost", 9093,
                                                     "SASL_PLAINTEXT")]
    assert [li.name for li in listeners_of(listen="127.0.0.1:0")] == ["PLAINTEXT"]


@pytest.mark.parametrize("items,message", [
    (["listeners=FOO://127.0.0.1:1"], "no security protocol for listener FOO"),
    (["listeners=PLAINTEXT://127.0.0.1"], "expected NAME://HOST:PORT"),
    (["listeners=PLAINTEXT://127.0.0.1:1,PLAINTEXT://127.0.0.1:2"], "named twice"),
    (["listeners=SSL://127.0.0.1:0"], "needs ssl.keystore.location"),
    (["listener.security.protocol.map=A:TLS"], "expected NAME:PROTOCOL"),
    (["sasl.enabled.mechanisms=GSSAPI"], "unsupported SASL mechanisms GSSAPI"),
    (["ssl.enabled.protocols=TLSv1.1"], "supported: TLSv1.2, TLSv1.3"),
])
def test_bad_listener_settings_are_refused(items, message):
    with pytest.raises(ConfigError, match=message):
        listeners_of(*items, "listeners=PLAINTEXT://127.0.0.1:0"
                     if not any(i.startswith("listeners=") for i in items) else items[0])


def test_listen_and_listeners_are_exclusive():
    with pytest.raises(ConfigError, match="exclusive"):
        listeners_of("listeners=PLAINTEXT://127.0.0.1:0", listen="127.0.0.1:0")


@pytest.mark.parametrize("items", [
    ["listeners=PLAINTEXT://0.0.0.0:0"],
    ["listeners=SASL_PLAINTEXT://0.0.0.0:0,PLAINTEXT://10.1.2.3:0"],
])
def test_no_authentication_beyond_loopback_refuses_to_start(items):
    with pytest.raises(ConfigError, match="--allow-plaintext"):
        listeners_of(*items)
    assert listeners_of(*items, allow=True)


def test_the_command_refuses_and_names_the_flag(tmp_path):
    r = subprocess.run([sys.executable, "-m", "offsetlog", "serve", str(tmp_path / "s"),
                        "--listen", "0.0.0.0:0"], capture_output=True, text=True, timeout=60)
    assert r.returncode == 2 and "--allow-plaintext" in r.stderr
    assert not (tmp_path / "s").exists()  # refused before the store was created


def test_sasl_and_required_client_certificates_may_listen_anywhere(certs):
    assert listeners_of("listeners=SASL_PLAINTEXT://0.0.0.0:0")
    assert listeners_of("listeners=SSL://0.0.0.0:0", *tls_config(certs, "required"))
    with pytest.raises(ConfigError, match="--allow-plaintext"):
        listeners_of("listeners=SSL://0.0.0.0:0", *tls_config(certs, "requested"))


def test_keystores(certs):
    def ctx(*items):
        return server_context(ServerConfig.parse(list(items)).security)
    assert ctx("ssl.keystore.type=PEM", f"ssl.keystore.location={certs.server_pem}")
    assert ctx("ssl.keystore.type=PEM", f"ssl.keystore.location={certs.server_pem_encrypted}",
               f"ssl.key.password={KEY_PASSWORD}")
    assert ctx("ssl.keystore.type=PKCS12", f"ssl.keystore.location={certs.server_p12}",
               f"ssl.keystore.password={KEYSTORE_PASSWORD}")
    with pytest.raises(TlsConfigError):
        ctx("ssl.keystore.type=PKCS12", f"ssl.keystore.location={certs.server_p12}",
            "ssl.keystore.password=wrong")
    with pytest.raises(TlsConfigError):
        ctx("ssl.keystore.type=PEM", f"ssl.keystore.location={certs.server_pem_encrypted}",
            "ssl.key.password=wrong")
    only13 = ctx("ssl.keystore.type=PEM", f"ssl.keystore.location={certs.server_pem}",
                 "ssl.enabled.protocols=TLSv1.3")
    assert only13.minimum_version == ssl.TLSVersion.TLSv1_3


def test_each_listener_answers_its_own_address(tmp_path, certs):
    from support.wire_server import Server
    directory = str(tmp_path / "store")
    add_users(directory)
    server = Server(directory, config=[LISTENERS, *tls_config(certs)]).start()
    try:
        for name in ("PLAINTEXT", "SASL_PLAINTEXT"):
            with socket.create_connection(("127.0.0.1", server.ports[name])) as s:
                if name == "SASL_PLAINTEXT":
                    from .test_attacks import authenticate
                    authenticate(s)
                meta = call(s, 3, 9, topics=None, allow_auto_topic_creation=False,
                            include_topic_authorized_operations=False,
                            include_cluster_authorized_operations=False)
                assert [(b.host, b.port) for b in meta.brokers] == [
                    ("127.0.0.1", server.ports[name])]
                coord = call(s, 10, 3, key="g", key_type=0)
                assert (coord.host, coord.port) == ("127.0.0.1", server.ports[name])
    finally:
        server.stop()


def test_a_pkcs12_keystore_serves_tls(tmp_path, certs):
    from support.wire_server import Server
    server = Server(str(tmp_path / "store"), config=[
        "listeners=SSL://127.0.0.1:0", "ssl.keystore.type=PKCS12",
        f"ssl.keystore.location={certs.server_p12}",
        f"ssl.keystore.password={KEYSTORE_PASSWORD}"]).start()
    try:
        ctx = ssl.create_default_context(cafile=str(certs.ca))
        with socket.create_connection(("127.0.0.1", server.ports["SSL"])) as raw:
            with ctx.wrap_socket(raw, server_hostname="localhost") as s:
                assert call(s, 18, 0).error_code == 0
    finally:
        server.stop()


def test_ssl_client_auth_required_refuses_a_client_without_a_certificate(tmp_path, certs):
    from support.wire_server import Server
    server = Server(str(tmp_path / "store"), config=[
        "listeners=SSL://127.0.0.1:0", *tls_config(certs, "required")]).start()
    try:
        for cert in (None, (certs.other_client_cert, certs.other_client_key)):
            ctx = ssl.create_default_context(cafile=str(certs.ca))
            if cert:
                ctx.load_cert_chain(str(cert[0]), str(cert[1]))
            with socket.create_connection(("127.0.0.1", server.ports["SSL"]), timeout=5) as raw:
                with pytest.raises((ssl.SSLError, ConnectionError, OSError)):
                    with ctx.wrap_socket(raw, server_hostname="localhost") as s:
                        call(s, 18, 0)
        ctx = ssl.create_default_context(cafile=str(certs.ca))
        ctx.load_cert_chain(str(certs.client_cert), str(certs.client_key))
        with socket.create_connection(("127.0.0.1", server.ports["SSL"])) as raw:
            with ctx.wrap_socket(raw, server_hostname="localhost") as s:
                assert call(s, 18, 0).error_code == 0
    finally:
        server.stop()


def test_the_failed_authentication_delay_must_be_less_than_the_idle_timeout():
    """Kafka's check: a failure answered after the connection idled out would never be."""
    with pytest.raises(ConfigError, match="should always be less than connections.max.idle"):
        ServerConfig.parse(["connection.failed.authentication.delay.ms=60000",
                            "connections.max.idle.ms=60000"])
    c = ServerConfig.parse(["connection.failed.authentication.delay.ms=500",
                            "connections.max.reauth.ms=3000"])
    assert (c.security.failed_authentication_delay_ms, c.security.max_reauth_ms) == (500, 3000)
