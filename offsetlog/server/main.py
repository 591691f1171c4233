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
from offsetlog.server.topics import TopicRegistry
from offsetlog.server.workers import Workers
from offsetlog.store.async_writer import drive_from_loop

log = logging.getLogger("offsetlog.server")

DEFAULT_LISTEN = "127.0.0.1:9092"
#: seconds a stopping server gives in-flight answers before it drops their connections
DRAIN_SECONDS = 5.0


def add_parser(subparsers) -> argparse.ArgumentParser:
    p = subparsers.add_parser(
        "serve", help="serve Kafka's group and offset APIs for the store in DIR",
        description="Kafka's wire protocol in front of the store: unmodified Kafka clients "
                    "join groups and commit offsets against it (docs/PROTOCOL.md). No "
                    "authentication: it listens on loopback unless told otherwise.")
    p.add_argument("dir", metavar="DATA_DIR")
    p.add_argument("--listen", default=DEFAULT_LISTEN, metavar="HOST:PORT",
                   help=f"address to listen on (default {DEFAULT_LISTEN}; port 0 picks one)")
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


def run(args) -> int:
    try:
        config = ServerConfig.parse(args.config)
        host, port = parse_listen(args.listen)
        topics = [parse_topic(t, config.num_partitions) for t in args.topic]
    except ConfigError as e:
        print(f"offsetlog serve: {e}", file=sys.stderr)
        return 2
    if not logging.getLogger().handlers:
        logging.basicConfig(level=logging.WARNING, format="%(asctime)s %(name)s: %(message)s")
    if not is_loopback(host):
        print(f"offsetlog serve: WARNING: listening on {host}, not a loopback address; the "
              "server has no authentication: anyone who can reach it can join groups, commit "
              "and delete offsets", file=sys.stderr)
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
        asyncio.run(serve(store, config, registry, host, port))
    except OSError as e:
        print(f"offsetlog serve: {e}", file=sys.stderr)
        return 1
    finally:
        store.close()
    return 0


async def serve(store, config: ServerConfig, registry: TopicRegistry, host: str, port: int,
                *, ready=None, stop: asyncio.Event | None = None) -> None:
    """Serve until SIGTERM/SIGINT (or ``stop`` is set); then stop accepting, close the store
    (which answers parked requests), let in-flight answers go out and return."""
    loop = asyncio.get_running_loop()
    stop = stop or asyncio.Event()
    for sig in (signal.SIGTERM, signal.SIGINT):
        try:
            loop.add_signal_handler(sig, stop.set)
        except (NotImplementedError, RuntimeError):
            pass  # not the main thread (tests run servers in threads)
    # commits queued under load are framed, applied and answered on this thread, with no
    # hand-off between threads (offsetlog/store/async_writer.py; docs/PROTOCOL.md)
    undrive = drive_from_loop(store, loop)
    workers = Workers(config.num_io_threads)
    ctx = Context(store=store, config=config, topics=registry, host=host, port=port)
    if config.authorizer:  # Kafka's ACLs, checked per request (docs/SECURITY.md)
        ctx.acl = AclState(store, super_users=config.super_users,
                           allow_if_no_acl=config.allow_everyone_if_no_acl)
    conns = Connections(ctx, workers, store.config.clock)
    bound = conns.listen(host, port)
    ctx.port = bound[1]
    if host in ("0.0.0.0", "::", ""):
        ctx.host = socket.gethostname()
    print(f"listening on {bound[0]}:{bound[1]}", file=sys.stderr, flush=True)
    if ready is not None:
        ready(bound[0], bound[1])
    try:
        await stop.wait()
    finally:
        conns.stop_reading()
        # Closing the store answers parked JoinGroups and SyncGroups (COORDINATOR_NOT_AVAILABLE)
        # and finishes every queued commit; it waits for fsyncs, so not on the loop's thread.
        await asyncio.to_thread(store.close)
        undrive()
        await conns.drain(DRAIN_SECONDS)
        workers.shutdown()


def main(argv: list[str] | None = None) -> int:
    """``offsetlog serve ...`` with ``argv`` the arguments after ``serve``."""
    parser = argparse.ArgumentParser(prog="offsetlog")
    add_parser(parser.add_subparsers(dest="command", required=True))
    args = parser.parse_args(["serve", *(sys.argv[2:] if argv is None else argv)])
    return run(args)
