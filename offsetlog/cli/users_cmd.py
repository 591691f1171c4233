"""``offsetlog users DIR add|delete|list``: the wire server's SASL/SCRAM users, offline.

The store must be closed (the command takes its lock, as ``compact`` does): with
``offsetlog serve`` running, use ``kafka-configs --alter --add-config
'SCRAM-SHA-512=[password=...]' --entity-type users --entity-name NAME`` instead. The
password is read from a prompt that does not echo it (getpass), or with ``--password-stdin``
from the first line of standard input; never from an argument, which other users of the
machine could read. Each write is a ``USER_SCRAM_CREDENTIAL`` record, durable on return.
"""

from __future__ import annotations

import argparse
import getpass
import sys

from offsetlog.cli.crashtest_cmd import UsageError
from offsetlog.cli.maintenance import open_existing
from offsetlog.cli.output import Output
from offsetlog.server.scram import DEFAULT_ITERATIONS, make_credential
from offsetlog.store.registries import MAX_ITERATIONS, MECHANISMS, MIN_ITERATIONS


def _password(args: argparse.Namespace) -> str:
    if args.password_stdin:
        line = sys.stdin.readline()
        password = line[:-1] if line.endswith("\n") else line
    else:
        password = getpass.getpass(f"password for {args.name}: ")
        if getpass.getpass("again: ") != password:
            raise UsageError("the passwords differ")
    if not password:
        raise UsageError("the password is empty")
    return password


def _done(out: Output, user: str, what: str, mechanisms: list[str]) -> None:
    if out.json:
        out.emit_json({"user": user, what: mechanisms})
    else:
        for mechanism in mechanisms:
            out.line(f"{user}: {mechanism} credential {what}")


def cmd_users(args: argparse.Namespace, out: Output) -> int:
    if args.action != "list" and not args.name:
        raise UsageError(f"users {args.action}: name the user")
    if args.action == "add":
        if not MIN_ITERATIONS <= args.iterations <= MAX_ITERATIONS:
            raise UsageError(f"--iterations must be from {MIN_ITERATIONS} to {MAX_ITERATIONS}")
        password = _password(args)
        # the users of a new server are added before its first start: make the store
        with open_existing(out, args.dir, create=True) as store:
            mechanisms = list(dict.fromkeys(args.mechanism or ["SCRAM-SHA-512"]))
            for mechanism in mechanisms:
                store.registries.set_scram_credential(
                    args.name, mechanism,
                    make_credential(mechanism, password, iterations=args.iterations))
        _done(out, args.name, "written", mechanisms)
        return 0
    if args.action == "delete":
        with open_existing(out, args.dir) as store:
            registries = store.registries
            mechanisms = args.mechanism or [m for m in MECHANISMS
                                            if registries.scram_credential(args.name, m)]
            if not mechanisms or not all(registries.scram_credential(args.name, m)
                                         for m in mechanisms):
                out.error(f"{args.name}: no such credential")
                return 1
            for mechanism in mechanisms:
                registries.set_scram_credential(args.name, mechanism, None)
        _done(out, args.name, "deleted", mechanisms)
        return 0
    with open_existing(out, args.dir) as store:
        rows = [{"user": user, "mechanism": mechanism, "iterations": value["iterations"]}
                for (user, mechanism), value in store.registries.scram_credentials().items()]
    if out.json:
        out.emit_json({"users": rows})
    else:
        out.table(["user", "mechanism", "iterations"],
                  [[r["user"], r["mechanism"], str(r["iterations"])] for r in rows])
    return 0


def add_parser(command, json_flag) -> None:
    p = command("users", cmd_users, "the SASL/SCRAM users of `offsetlog serve` (docs/SECURITY.md)"
                "; the store must not be open elsewhere")
    p.add_argument("dir")
    p.add_argument("action", choices=("add", "delete", "list"))
    p.add_argument("name", nargs="?", help="the user (add, delete)")
    p.add_argument("--mechanism", action="append", choices=MECHANISMS,
                   help="add: the credential to write (repeatable; default SCRAM-SHA-512); "
                        "delete: the one to delete (default every one the user has)")
    p.add_argument("--iterations", type=int, default=DEFAULT_ITERATIONS,
                   help=f"add: PBKDF2 iterations ({MIN_ITERATIONS}-{MAX_ITERATIONS}, default "
                        f"{DEFAULT_ITERATIONS})")
    p.add_argument("--password-stdin", action="store_true",
                   help="add: read the password from the first line of standard input "
                        "instead of a prompt")
    json_flag(p)
