"""``offsetlog serve DATA_DIR``: the command, its arguments and its life cycle.

``add_parser(subparsers)`` adds the subcommand to the ``offsetlog`` parser and ``run(args)``
runs it; ``offsetlog/cli.py`` and ``python -m offsetlog`` only hook these up.
"""

from __future__ import annotations

import argparse
import asyncio
import ipaddress
import logging
import signal
import socket
import sys

from offsetlog.server.authz import AclState
from offsetlog.server.config import ConfigError, ServerConfig, parse_topic
from offsetlog.server.connection import Connections
from offsetlog.server.context import Context
from offsetlog.server.listeners import Acceptor
from offsetlog.server.security_config import Listener
from offsetlog.server.tls import server_context
from offsetlog.server.topics import TopicRegistry

log = logging.getLogger("offsetlog.server")

DEFAULT_LISTEN = "127.0.0.1:9092"
#: seconds a stopping server gives in-flight answers before it drops their connections
DRAIN_SECONDS = 5.0


def add_parser(subparsers) -> argparse.ArgumentParser:
    p = subparsers.add_parser(
        "serve", help="serve Kafka's group and offset APIs for the store in DIR",
        description="Kafka's wire protocol in front of the store: unmodified Kafka clients "
                    "join groups and commit offsets against it (docs/PROTOCOL.md). TLS "
                    "and SASL listeners with --config listeners=... (docs/SECURITY.md); "
                    "without authentication it listens on loopback only, unless "
                    "--allow-plaintext.")
    p.add_argument("dir", metavar="DATA_DIR")
    p.add_argument("--listen", default=None, metavar="HOST:PORT",
                   help=f"address of the one PLAINTEXT listener (default {DEFAULT_LISTEN}; "
                        "port 0 picks one); --config listeners=NAME://HOST:PORT,... for "
                        "several, and for SSL, SASL_PLAINTEXT and SASL_SSL")
    p.add_argument("--allow-plaintext", action="store_true",
                   help="let a listener without authentication (PLAINTEXT, or SSL without "
                        "ssl.client.auth=required) listen on an address other than loopback: "
                        "anyone who can reach it can join groups, commit and delete offsets")
    p.add_argument("--topic", action="append", default=[], metavar="NAME:PARTITIONS",
                   help="register a topic (repeatable); existing topics are kept")
    p.add_argument("--config", action="append", default=[], metavar="KEY=VALUE",
                   help="a Kafka broker property (repeatable), e.g. "
                        "group.initial.rebalance.delay.ms=0")
    p.add_argument("--fsync", choices=("always", "interval", "never"), default="always",
                   help="when the store syncs its log (OffsetStore.open's fsync): always "
                        "(default: a commit is durable before it is answered), interval "
                        "(at most every second), never (the OS page cache)")
    p.set_defaults(func=run)
    return p


def parse_listen(text: str) -> tuple[str, int]:
    host, sep, port = text.rpartition(":")
    if not sep or not port.isdigit() or not 0 <= int(port) <= 65535:
        raise ConfigError(f"--listen {text!r}: expected HOST:PORT")
    return host.strip("[]") or "0.0.0.0", int(port)


def is_loopback(host: str) -> bool:
    if host == "localhost":
        return True
    try:
        return ipaddress.ip_address(host).is_loopback
    except ValueError:
        return False


def check_listeners(config: ServerConfig, listen: str | None, allow_plaintext: bool
                    ) -> list[Listener]:
    """The listeners to open, checked: their settings, and that none without
    authentication listens beyond loopback unless ``--allow-plaintext``.

    :raises ConfigError: with what is wrong
    """
    security = config.security
    if security.listeners and listen is not None:
        raise ConfigError("--listen and --config listeners=... are exclusive: give one")
    try:
        listeners = security.parsed_listeners(parse_listen(listen or DEFAULT_LISTEN))
        security.check(listeners)
        if any(li.tls for li in listeners):
            server_context(security)  # a keystore that does not open fails now
    except ValueError as e:
        raise ConfigError(str(e)) from None
    for li in listeners:
        if not is_loopback(li.host) and not security.authenticates(li) and not allow_plaintext:
            raise ConfigError(
                f"listener {li.name}://{li.host}:{li.port} ({li.protocol}) has no "
                "authentication and is not on a loopback address: anyone who can reach it "
                "could join groups, commit and delete offsets. Use SASL_SSL, SASL_PLAINTEXT "
                "or SSL with ssl.client.auth=required (docs/SECURITY.md), or pass "
                "--allow-plaintext to listen like this anyway")
    return listeners


def run(args) -> int:
    try:
        config = ServerConfig.parse(args.config)
        listeners = check_listeners(config, args.listen, getattr(args, "allow_plaintext", False))
        topics = [parse_topic(t, config.num_partitions) for t in args.topic]
    except ConfigError as e:
        print(f"offsetlog serve: {e}", file=sys.stderr)
        return 2
    if not logging.getLogger().handlers:
        logging.basicConfig(level=logging.WARNING, format="%(asctime)s %(name)s: %(message)s")
    for li in listeners:
        if not is_loopback(li.host) and not config.security.authenticates(li):
            print(f"offsetlog serve: WARNING: {li.name} listens on {li.host} without "
                  "authentication (--allow-plaintext): anyone who can reach it can join "
                  "groups, commit and delete offsets", file=sys.stderr)
    from offsetlog.store import OffsetStore

    store = OffsetStore.open(args.dir, partitions=config.log_partitions,
                             retention_ms=config.retention_ms,
                             retention_check_interval_ms=config.retention_check_interval_ms,
                             metadata_max_bytes=config.metadata_max_bytes,
                             fsync=getattr(args, "fsync", "always"),
                             negative_offsets=True, fence_on_transaction_timeout=True,
                             transaction_check_interval_ms=config.transaction_check_interval_ms,
                             group_config=config.group_config())
    try:
        store.consumer_groups.configure(config.consumer_group_config())
        registry = TopicRegistry(store)
        for name, partitions in topics:
            existing = registry.partitions(name)
            if existing is None:
                registry.create(name, partitions, exist_ok=True)
            elif existing != partitions:
                log.warning("topic %s exists with %d partitions; --topic %s:%d ignored",
                            name, existing, name, partitions)
        asyncio.run(serve(store, config, registry, listeners[0].host, listeners[0].port,
                          listeners=listeners))
    except OSError as e:
        print(f"offsetlog serve: {e}", file=sys.stderr)
        return 1
    finally:
        store.close()
    return 0


async def serve(store, config: ServerConfig, registry: TopicRegistry, host: str, port: int,
                *, ready=None, stop: asyncio.Event | None = None,
                listeners: list[Listener] | None = None) -> None:
    """Serve until SIGTERM/SIGINT (or ``stop`` is set); then stop accepting, close the store
    (which answers parked requests), let in-flight answers go out and return.

    ``listeners``: default ``config``'s ``listeners``, or one PLAINTEXT listener on ``host``
    and ``port``. ``ready(host, port)`` is called with the first one's address once all
    accept (``ready.listeners``, if it has the attribute, gets every listener's)."""
    loop = asyncio.get_running_loop()
    stop = stop or asyncio.Event()
    for sig in (signal.SIGTERM, signal.SIGINT):
        try:
            loop.add_signal_handler(sig, stop.set)
        except (NotImplementedError, RuntimeError):
            pass  # not the main thread (tests run servers in threads)
    if listeners is None:
        listeners = config.security.parsed_listeners((host, port))
    ctx = Context(store=store, config=config, topics=registry, host=host, port=port)
    if config.authorizer:  # Kafka's ACLs, checked per request (docs/SECURITY.md)
        ctx.acl = AclState(store, super_users=config.super_users,
                           allow_if_no_acl=config.allow_everyone_if_no_acl)
    conns = Connections(ctx, store.config.clock)
    acceptor = Acceptor(conns, config.security, listeners)
    bound = {}
    for li in listeners:
        bound[li.name] = acceptor.listen(li)
        # the address Metadata and FindCoordinator answer this listener's clients
        ctx.addresses[li.name] = (socket.gethostname() if li.host in ("0.0.0.0", "::", "")
                                  else li.host, bound[li.name][1])
    ctx.addresses.update(config.security.advertised(listeners))  # advertised.listeners
    ctx.host, ctx.port = ctx.addresses[listeners[0].name]
    first = bound[listeners[0].name]
    if config.security.listeners:
        for li in listeners:
            print(f"listening on {li.name}://{bound[li.name][0]}:{bound[li.name][1]}",
                  file=sys.stderr, flush=True)
    else:
        print(f"listening on {first[0]}:{first[1]}", file=sys.stderr, flush=True)
    if ready is not None:
        if hasattr(ready, "listeners"):
            ready.listeners.update(bound)
        ready(first[0], first[1])
    try:
        await stop.wait()
    finally:
        conns.stop_reading()
        # Closing the store answers parked JoinGroups and SyncGroups (COORDINATOR_NOT_AVAILABLE)
        # and finishes every queued commit; it waits for fsyncs, so not on the loop's thread.
        await asyncio.to_thread(store.close)
        await conns.drain(DRAIN_SECONDS)


def main(argv: list[str] | None = None) -> int:
    """``offsetlog serve ...`` with ``argv`` the arguments after ``serve``."""
    parser = argparse.ArgumentParser(prog="offsetlog")
    add_parser(parser.add_subparsers(dest="command", required=True))
    args = parser.parse_args(["serve", *(sys.argv[2:] if argv is None else argv)])
    return run(args)
