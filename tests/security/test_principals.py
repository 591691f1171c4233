"""Each request's ``Call`` carries the connection's principal and listener (what the
authorizer reads): ``User:ANONYMOUS`` on PLAINTEXT and before authentication, SASL's user
after it, a client certificate's subject on SSL (Kafka's rendering), and the listener's name.
The server runs in this process so the calls can be watched."""

from __future__ import annotations

import asyncio
import socket
import ssl
import threading

import pytest

from offsetlog.server import apis
from offsetlog.server.config import ServerConfig
from offsetlog.server.main import serve
from offsetlog.server.topics import TopicRegistry
from offsetlog.store import OffsetStore
from support.tls_certs import CLIENT_DN
from support.wire_raw import call

from .conftest import LISTENERS, add_users, tls_config
from .test_attacks import authenticate

METADATA = 3


@pytest.fixture
def watched(tmp_path, certs, monkeypatch):
    """(ports by listener, [(principal, listener) of each Metadata call])"""
    seen: list[tuple[str, str]] = []
    lo, hi, handler = apis.APIS[METADATA]

    def watching(ctx, c, now_ms):
        seen.append((c.principal, c.listener))
        return handler(ctx, c, now_ms)

    monkeypatch.setitem(apis.APIS, METADATA, (lo, hi, watching))
    directory = str(tmp_path / "store")
    add_users(directory)
    store = OffsetStore.open(directory)
    config = ServerConfig.parse([LISTENERS, *tls_config(certs, "requested"),
                                 "sasl.enabled.mechanisms=SCRAM-SHA-256,PLAIN"])
    holder: dict = {}
    ready = threading.Event()

    def on_ready(host, port):
        ready.set()
    on_ready.listeners = {}

    def run():
        async def main():
            holder["loop"] = asyncio.get_running_loop()
            holder["stop"] = asyncio.Event()
            await serve(store, config, TopicRegistry(store), "127.0.0.1", 0,
                        stop=holder["stop"], ready=on_ready)
        asyncio.run(main())

    t = threading.Thread(target=run, daemon=True)
    t.start()
    assert ready.wait(30)
    try:
        yield {name: addr[1] for name, addr in on_ready.listeners.items()}, seen
    finally:
        holder["loop"].call_soon_threadsafe(holder["stop"].set)
        t.join(30)
        store.close()


def metadata(s):
    return call(s, METADATA, 9, topics=None, allow_auto_topic_creation=False,
                include_topic_authorized_operations=False,
                include_cluster_authorized_operations=False)


def test_principals_and_listeners(watched, certs):
    ports, seen = watched
    with socket.create_connection(("127.0.0.1", ports["PLAINTEXT"])) as s:
        metadata(s)
    with socket.create_connection(("127.0.0.1", ports["SASL_PLAINTEXT"])) as s:
        authenticate(s, "SCRAM-SHA-256", "bob")
        metadata(s)
    ctx = ssl.create_default_context(cafile=str(certs.ca))
    ctx.load_cert_chain(str(certs.client_cert), str(certs.client_key))
    with socket.create_connection(("127.0.0.1", ports["SSL"])) as raw:
        with ctx.wrap_socket(raw, server_hostname="localhost") as s:
            metadata(s)
    anonymous = ssl.create_default_context(cafile=str(certs.ca))
    with socket.create_connection(("127.0.0.1", ports["SSL"])) as raw:
        with anonymous.wrap_socket(raw, server_hostname="localhost") as s:
            metadata(s)
    # SASL_SSL with a client certificate too: SASL's user is the principal
    with socket.create_connection(("127.0.0.1", ports["SASL_SSL"])) as raw:
        with ctx.wrap_socket(raw, server_hostname="localhost") as s:
            call(s, 17, 1, mechanism="PLAIN")
            assert call(s, 36, 2, auth_bytes=b"\0alice\0alice-secret").error_code == 0
            metadata(s)
    assert seen == [("User:ANONYMOUS", "PLAINTEXT"), ("User:bob", "SASL_PLAINTEXT"),
                    (f"User:{CLIENT_DN}", "SSL"), ("User:ANONYMOUS", "SSL"),
                    ("User:alice", "SASL_SSL")]
