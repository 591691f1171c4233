"""The ``offsetlog`` command: its parser and what every command shares.

Conventions (Kafka's tools and Unix's): results on stdout, errors on stderr as
``offsetlog: <what went wrong>``; exit status 0 on success, 1 on a failure (a store that is
not there, corruption, a Spark job that failed), 2 on a usage error (argparse's own, a
malformed option); no traceback for an expected error unless ``--debug`` is given.

Commands, one module per group: inspect_cmds.py (describe, groups, transactions, verify) and
dump.py read a store and never change it; maintenance.py (compact, recover, snapshot) changes
one under its lock and never creates one; spark_cmds.py (report, compact --engine spark);
crashtest_cmd.py (crashtest, bench); transfer_cmds.py (export, import) and migrate_cmds.py
(migrate, with kafka_admin.py) move groups' offsets out and in. output.py prints: plain aligned text when piped, rich on
a terminal, ``--json`` documents.
"""

from __future__ import annotations

import argparse
import os
import sys
import traceback

from offsetlog.cli.crashtest_cmd import UsageError, cmd_bench, cmd_crashtest
from offsetlog.cli.dump import cmd_dump
from offsetlog.cli.inspect_cmds import cmd_describe, cmd_groups, cmd_transactions, cmd_verify
from offsetlog.cli.maintenance import cmd_compact, cmd_recover, cmd_snapshot
from offsetlog.cli.output import Output
from offsetlog.errors import OffsetlogError


def cmd_report(args: argparse.Namespace, out: Output) -> int:
    from offsetlog.cli.spark_cmds import cmd_report as report  # imports pyspark
    return report(args, out)


def _version() -> str:
    from offsetlog import __version__
    return f"offsetlog {__version__}"


def build_parser() -> argparse.ArgumentParser:
    common = argparse.ArgumentParser(add_help=False)
    common.add_argument("--debug", action="store_true", default=argparse.SUPPRESS,
                        help="show the traceback of an error")
    parser = argparse.ArgumentParser(
        prog="offsetlog", parents=[common],
        description="An embedded, crash-safe consumer-offset store: inspect, check, maintain, "
                    "crash-test and benchmark stores.")
    parser.add_argument("--version", action="version", version=_version())
    sub = parser.add_subparsers(dest="command", required=True, metavar="COMMAND")

    def command(name: str, func, help: str, **kw) -> argparse.ArgumentParser:
        p = sub.add_parser(name, help=help, description=help, parents=[common], **kw)
        p.set_defaults(func=func)
        return p

    def json_flag(p: argparse.ArgumentParser, what: str = "one JSON document") -> None:
        p.add_argument("--json", action="store_true", help=f"{what}, same fields as the text")

    p = command("bench", cmd_bench, "run the comparative benchmarks and print the table",
                add_help=False)
    p.add_argument("bench_args", nargs=argparse.REMAINDER,
                   help="options for the runner (see offsetlog bench --help)")
    p = command("dump", cmd_dump, "print every batch and record (like kafka-dump-log "
                                  "--offsets-decoder)")
    p.add_argument("dir")
    p.add_argument("--partition", type=int, help="only this log partition")
    json_flag(p, "one JSON object per record (JSON lines)")
    p = command("describe", cmd_describe, "committed offsets per group (like "
                                          "kafka-consumer-groups --describe)")
    p.add_argument("dir")
    p.add_argument("--group", help="only this group")
    shown = p.add_mutually_exclusive_group()
    shown.add_argument("--members", action="store_true",
                       help="the members: id, instance id, client id, host, assignment; for "
                            "consumer-protocol groups also rack, state, epochs and target "
                            "assignment")
    shown.add_argument("--state", action="store_true",
                       help="state, generation, protocol type, protocol, members")
    json_flag(p)
    p = command("groups", cmd_groups, "every group with its state and offset count (like "
                                      "kafka-consumer-groups --list --state)")
    p.add_argument("dir")
    json_flag(p)
    p = command("transactions", cmd_transactions, "every transactional id with its producer "
                "and open transaction (like kafka-transactions --list, --describe)")
    p.add_argument("dir")
    json_flag(p)
    p = command("verify", cmd_verify, "check every CRC of the log and the snapshots; exit 1 "
                                      "on log corruption; read-only")
    p.add_argument("dir")
    json_flag(p)
    p = command("compact", cmd_compact, "clean every log partition's closed segments now "
                                        "(takes the store's lock)")
    p.add_argument("dir", help="a store, or with --engine spark a directory of stores")
    p.add_argument("--engine", choices=("local", "spark"), default="local",
                   help="spark: one Spark task per log partition (docs/SPARK.md)")
    p.add_argument("--master", help="Spark master URL (default local[*])")
    json_flag(p)
    p = command("recover", cmd_recover, "recover a closed store now: finish swaps, truncate a "
                                        "torn tail; --salvage cuts out corrupt regions")
    p.add_argument("dir")
    p.add_argument("--salvage", action="store_true",
                   help="rewrite segments without their corrupt regions (offsets kept), "
                        "reporting every dropped byte range")
    json_flag(p)
    p = command("snapshot", cmd_snapshot, "snapshot every log partition's table now (takes "
                                          "the store's lock)")
    p.add_argument("dir")
    json_flag(p)
    p = command("report", cmd_report, "per group and per log partition statistics of one "
                                      "store or a directory of stores, with Spark")
    p.add_argument("dir")
    p.add_argument("--engine", choices=("spark",), default="spark")
    p.add_argument("--master", help="Spark master URL (default local[*])")
    p.add_argument("--out", help="also write both tables as Parquet under this directory")
    p.add_argument("--retention-ms", type=int, default=7 * 24 * 3600 * 1000,
                   help="the stores' retention_ms (default 7 days)")
    p.add_argument("--retention-check-interval-ms", type=int, default=600_000,
                   help="the stores' retention check interval (default 10 minutes)")
    p.add_argument("--salvage", action="store_true", help="skip corrupt regions")
    p.add_argument("--limit", type=int, default=100, help="groups to print (default 100)")
    json_flag(p)
    p = command("crashtest", cmd_crashtest, "SIGKILL a committing child again and again and "
                                            "check every invariant after each reopen "
                                            "(docs/CRASHTEST.md)")
    p.add_argument("dir", help="a new or empty directory to work in")
    p.add_argument("--cycles", type=int, default=20)
    p.add_argument("--threads", type=int)
    p.add_argument("--groups", type=int)
    p.add_argument("--partitions", type=int, help="log partitions of the store it creates")
    p.add_argument("--async-fraction", type=float, help="share of commit_async calls")
    p.add_argument("--seed", type=int, help="replay a run")
    p.add_argument("--tear-tail", type=float, nargs="?", const=0.5,
                   help="chance per cycle of tearing an active segment at an unsynced byte "
                        "(0.5 if no value)")
    p.add_argument("--power-loss", action="store_true",
                   help="drop a random part of every unsynced tail after each kill")
    p.add_argument("--compaction", action="store_true",
                   help="compact in a loop beside the commits; kill at every swap step")
    p.add_argument("--no-step-kills", action="store_true",
                   help="with --compaction, only random kills")
    p.add_argument("--snapshots", action="store_true",
                   help="also call store.snapshot() in that loop, if the store has it")
    p.add_argument("--segment-bytes", type=int)
    p.add_argument("--workload", metavar="MODULE:FUNCTION",
                   help="your own workload, imported as `python -m` would (the current "
                        "directory first); see docs/CRASHTEST.md")
    p.add_argument("--option", action="append", default=[], metavar="KEY=VALUE",
                   help="an OffsetStore.open option, e.g. fsync=always (JSON values); an "
                        "unknown KEY is a usage error")
    from offsetlog.cli.migrate_cmds import add_parser as add_migrate_parser
    from offsetlog.cli.transfer_cmds import add_parsers as add_transfer_parsers
    add_transfer_parsers(command, json_flag)  # export, import
    add_migrate_parser(command, json_flag)  # migrate --to / --from a Kafka cluster
    from offsetlog.cli.users_cmd import add_parser as add_users_parser
    add_users_parser(command, json_flag)  # the wire server's SASL/SCRAM users
    from offsetlog.server.main import add_parser as add_serve_parser
    add_serve_parser(sub)  # `offsetlog serve`: run by main() below, with its own life cycle
    return parser


#: commands whose DIR must be an existing directory (crashtest makes its own)
_NEEDS_DIR = ("dump", "describe", "groups", "transactions", "verify", "compact", "recover",
              "snapshot", "report", "export", "users")


def main(argv: list[str] | None = None) -> int:
    argv = sys.argv[1:] if argv is None else list(argv)
    if argv[:1] == ["bench"]:
        # Everything after "bench" belongs to the runner (argparse's REMAINDER drops a first
        # argument that looks like an option, so hand it over directly).
        return _exit_code(lambda: cmd_bench(argparse.Namespace(bench_args=argv[1:]), Output()))
    if argv[:1] == ["serve"]:  # offsetlog/server/main.py: a server, not a console command
        from offsetlog.server.main import main as serve
        return serve(argv[1:])
    try:
        args = build_parser().parse_args(argv)
    except SystemExit as e:  # usage errors (2, message on stderr), --help and --version (0)
        return _code(e)
    out = Output(json_mode=getattr(args, "json", False))
    debug = getattr(args, "debug", False)
    try:
        # (``users add`` makes a new store: a server's users come before its first start)
        if (args.command in _NEEDS_DIR and not os.path.isdir(args.dir)
                and (args.command, getattr(args, "action", "")) != ("users", "add")):
            raise UsageError(f"{args.dir}: no such directory")
        return args.func(args, out)
    except UsageError as e:
        _report(out, str(e), debug)
        return 2
    except OffsetlogError as e:
        _report(out, str(e), debug)
        return 1
    except BrokenPipeError:  # `offsetlog dump DIR | head`
        _quiet_broken_pipe()
        return 0
    except OSError as e:  # permission denied, a disk error: a failure, said plainly
        _report(out, f"{e.strerror or e}" + (f": {e.filename}" if e.filename else ""), debug)
        return 1
    except KeyboardInterrupt:
        _report(out, "interrupted", debug)
        return 130
    except Exception as e:  # noqa: BLE001 - a bug: one line, and the traceback on request
        _report(out, f"unexpected error: {type(e).__name__}: {e}", debug,
                hint=" (run again with --debug for the traceback)")
        return 1


def _report(out: Output, message: str, debug: bool, hint: str = "") -> None:
    if debug:
        traceback.print_exc(file=out.stderr)
    out.error(message + ("" if debug else hint))


def _code(e: SystemExit) -> int:
    if e.code is None:
        return 0
    return e.code if isinstance(e.code, int) else 2


def _exit_code(run) -> int:
    try:
        return run()
    except SystemExit as e:
        return _code(e)


def _quiet_broken_pipe() -> None:
    # Python flushes stdout at exit and would complain about the closed pipe on stderr.
    try:
        devnull = os.open(os.devnull, os.O_WRONLY)
        os.dup2(devnull, sys.stdout.fileno())
    except (OSError, ValueError):
        pass


if __name__ == "__main__":
    sys.exit(main())
