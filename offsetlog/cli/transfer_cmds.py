"""``offsetlog export`` and ``offsetlog import``: committed offsets out of a store and in.

export reads the store as ``describe`` does (the log, replayed read-only, without its lock), so
it works on a store that ``offsetlog serve`` or a service has open. It writes *committed*
offsets only: offsets of open transactions are not committed yet, and are counted on stderr.

Formats:

* ``csv`` (default): ``group,topic,partition,offset`` lines, no header: the file
  ``kafka-consumer-groups --reset-offsets --from-file FILE --group G1 --group G2 ... --execute``
  reads (Kafka's tool takes this form for any number of ``--group``). With ``-o DIR`` (an
  existing directory), one file per group, ``DIR/<group>.csv``, in the ``topic,partition,offset``
  form that the tool reads for a single ``--group``. Neither csv form carries metadata or
  leader epochs (Kafka's tool does not read them).
* ``json``: JSON lines, one per offset: group, topic, partition, offset, metadata,
  leader_epoch, commit_timestamp (epoch ms).

import reads either (the format is told by the first character) and commits each group's
offsets with one ``commit_sync`` (atomic: all of a group's offsets or none), under the store's
lock. The store stamps its own commit time, as Kafka does. A group whose coordinator has
members is refused unless ``--force``.
"""

from __future__ import annotations

import argparse
import csv
import io
import json
import os
import sys
from urllib.parse import quote

from offsetlog.cli.crashtest_cmd import UsageError
from offsetlog.cli.inspect_cmds import load_groups
from offsetlog.cli.output import Output
from offsetlog.cli.plan import Entry, GroupResult, Key, diff, plan_rows, print_plan, print_summary
from offsetlog.errors import OffsetlogError

# -- reading a store read-only ------------------------------------------------------------


class SourceGroups:
    """The committed offsets of a store's groups, as its log says."""

    def __init__(self, out: Output, path: str, groups: list[str] | None) -> None:
        views = load_groups(out, path)
        missing = [g for g in (groups or []) if g not in views]
        if missing:
            raise OffsetlogError(f"{path}: no such group: {', '.join(map(repr, missing))}")
        chosen = [views[g] for g in groups] if groups else list(views.values())
        self.offsets: dict[str, dict[Key, Entry]] = {}
        self.timestamps: dict[str, dict[Key, int | None]] = {}
        self.pending: dict[str, int] = {}
        self.members: dict[str, int] = {}  # groups with members in the store: how many
        for v in chosen:
            if v.members:
                self.members[v.group] = len(v.members)
            self.offsets[v.group] = {tuple(k): Entry.of(e[0], e[1], e[2])
                                     for k, e in sorted(v.offsets.items())}
            self.timestamps[v.group] = {tuple(k): e[3] for k, e in v.offsets.items()}
            n = sum(len(x) for x in v.pending.values())
            if n:
                self.pending[v.group] = n

    def warn_pending(self, out: Output, verb: str) -> None:
        if self.pending:
            n = sum(self.pending.values())
            names = ", ".join(sorted(self.pending))
            out.warn(f"{n} pending transactional offsets not {verb} (open transactions, not "
                     f"committed yet) in groups: {names}")


# -- export -------------------------------------------------------------------------------


def _file_name(group: str, ext: str) -> str:
    name = quote(group, safe="-_.@+=,")
    if name.strip(".") == "":
        name = name.replace(".", "%2E")
    return f"{name}.{ext}"


def _csv_text(rows: list[list]) -> str:
    buf = io.StringIO()
    w = csv.writer(buf, lineterminator="\n")
    w.writerows(rows)
    return buf.getvalue()


def _export_text(src: SourceGroups, groups: list[str], fmt: str, with_group: bool) -> str:
    if fmt == "csv":
        return _csv_text([([g] if with_group else []) + [t, p, e.offset]
                          for g in groups for (t, p), e in src.offsets[g].items()])
    lines = []
    for g in groups:
        for (t, p), e in src.offsets[g].items():
            lines.append(json.dumps({"group": g, "topic": t, "partition": p, "offset": e.offset,
                                     "metadata": e.metadata, "leader_epoch": e.leader_epoch,
                                     "commit_timestamp": src.timestamps[g].get((t, p))},
                                    separators=(",", ":")) + "\n")
    return "".join(lines)


def _write(path: str, text: str) -> None:
    tmp = f"{path}.tmp-{os.getpid()}"
    with open(tmp, "w", newline="") as f:
        f.write(text)
        f.flush()
        os.fsync(f.fileno())
    os.replace(tmp, path)


def cmd_export(args: argparse.Namespace, out: Output) -> int:
    src = SourceGroups(out, args.dir, args.group)
    groups = list(src.offsets)
    fmt = args.format
    ext = "csv" if fmt == "csv" else "jsonl"
    if args.output and os.path.isdir(args.output):
        for g in groups:
            _write(os.path.join(args.output, _file_name(g, ext)),
                   _export_text(src, [g], fmt, with_group=fmt != "csv"))
        where = f"{len(groups)} files in {args.output}"
    else:
        text = _export_text(src, groups, fmt, with_group=True)
        if args.output in (None, "-"):
            out.stdout.write(text)
            out.stdout.flush()
            where = "stdout"
        else:
            _write(args.output, text)
            where = args.output
    n = sum(len(o) for o in src.offsets.values())
    src.warn_pending(out, "exported")
    out.stderr.write(f"offsetlog: exported {n} offsets of {len(groups)} groups to {where}\n")
    return 0


# -- import -------------------------------------------------------------------------------


def read_offsets_file(path: str, group: str | None) -> dict[str, dict[Key, Entry]]:
    """``group -> {(topic, partition): Entry}`` from a csv or JSON-lines file (``-``: stdin).

    :raises UsageError: a malformed line (with its number), or three-column csv without
        ``--group``
    """
    if path == "-":
        text = sys.stdin.read()
    else:
        with open(path, newline="") as f:
            text = f.read()
    out: dict[str, dict[Key, Entry]] = {}
    first = text.lstrip()[:1]
    try:
        if first == "{":
            for n, line in enumerate(text.splitlines(), 1):
                if not line.strip():
                    continue
                try:
                    d = json.loads(line)
                    key = (str(d["topic"]), int(d["partition"]))
                    e = Entry.of(d["offset"], d.get("metadata"), d.get("leader_epoch"))
                    g = str(d["group"])
                except (ValueError, KeyError, TypeError) as exc:
                    raise UsageError(f"{path}:{n}: not an offset line ({exc})") from None
                if group is None or g == group:
                    out.setdefault(g, {})[key] = e
            return out
        for n, row in enumerate(csv.reader(io.StringIO(text)), 1):
            if not row or not "".join(row).strip():
                continue
            if len(row) == 3:
                if group is None:
                    raise UsageError(f"{path}: topic,partition,offset lines name no group: "
                                     "give --group")
                g, (t, p, o) = group, row
            elif len(row) == 4:
                g, t, p, o = row
            else:
                raise UsageError(f"{path}:{n}: expected group,topic,partition,offset or "
                                 f"topic,partition,offset, got {len(row)} fields")
            try:
                key, e = (t, int(p)), Entry.of(int(o), "", None)
            except ValueError:
                raise UsageError(f"{path}:{n}: partition and offset must be integers") from None
            if group is None or g == group:
                out.setdefault(g, {})[key] = e
    except UnicodeDecodeError as exc:
        raise UsageError(f"{path}: not text ({exc})") from None
    return out


def _open_store(path: str, create: bool, partitions: int | None):
    from offsetlog import OffsetStore

    if not create and not os.path.isdir(path):
        raise UsageError(f"{path}: no such directory (give --create to make a new store)")
    return OffsetStore.open(path, create=create, partitions=partitions)


def commit_group(store, group: str, offsets: dict[Key, Entry], force: bool) -> str | None:
    """Commit one group's offsets in one atomic ``commit_sync``; the reason it was refused,
    or None. A group with members is refused unless ``force``: then the commit is made as its
    leader, in its current generation (the only commit its coordinator accepts)."""
    from offsetlog import OffsetAndMetadata, TopicPartition

    desc = store.describe_group(group)
    fence = {}
    if desc is not None and desc.members:
        if not force:
            return (f"the group has {len(desc.members)} live members ({desc.state}); stop "
                    "them or give --force")
        leader = next((m for m in desc.members if m.member_id == desc.leader), desc.members[0])
        fence = dict(generation_id=desc.generation, member_id=leader.member_id,
                     group_instance_id=leader.group_instance_id)
    store.commit_sync(group, {TopicPartition(t, p): OffsetAndMetadata(*e)
                              for (t, p), e in offsets.items()}, **fence)
    return None


def current_offsets(store, group: str) -> dict[Key, Entry]:
    return {(tp.topic, tp.partition): Entry.of(o.offset, o.metadata, o.leader_epoch)
            for tp, o in store.fetch(group).items()}


def cmd_import(args: argparse.Namespace, out: Output) -> int:
    wanted = read_offsets_file(args.file, args.group)
    if not wanted:
        raise UsageError(f"{args.file}: no offsets" + (f" of group {args.group!r}"
                                                      if args.group else ""))
    results, plan = [], []
    with _open_store(args.dir, args.create, args.partitions) as store:
        with out.progress(len(wanted), "importing", unit="items") as advance:
            for group, offsets in sorted(wanted.items()):
                r = GroupResult(group)
                results.append(r)
                try:
                    have = current_offsets(store, group)
                    actions = diff(offsets, have)
                    r.unchanged = sum(a == "stay" for a in actions.values())
                    todo = {k: offsets[k] for k, a in actions.items() if a != "stay"}
                    if args.dry_run:
                        plan += plan_rows(group, offsets, have, actions)
                        r.sent = len(todo)
                    elif not todo:
                        r.status, r.verified = "unchanged", True
                    else:
                        refused = commit_group(store, group, todo, args.force)
                        if refused:
                            r.status, r.reason = "refused", refused
                        else:
                            r.status, r.sent = "moved", len(todo)
                            r.verified = all(current_offsets(store, group).get(k) == e
                                             for k, e in offsets.items())
                except OffsetlogError as e:
                    r.status, r.reason = "failed", f"{type(e).__name__}: {e}"
                advance(1)
    if args.dry_run:
        if out.json:
            out.emit_json({"dry_run": True, "plan": plan})
        else:
            print_plan(out, plan, title=f"import into {args.dir} (dry run)")
        return 0
    if out.json:
        out.emit_json({"groups": [r.as_json() for r in results],
                       "ok": all(r.ok for r in results)})
    else:
        print_summary(out, results, title=f"import into {args.dir}")
    return 0 if all(r.ok for r in results) else 1


def add_parsers(command, json_flag) -> None:
    """``export`` and ``import``, added by main.build_parser."""
    p = command("export", cmd_export, "write committed offsets as csv (kafka-consumer-groups "
                                      "--reset-offsets --from-file) or JSON lines; read-only")
    p.add_argument("dir")
    p.add_argument("--group", action="append", help="only this group (repeatable)")
    p.add_argument("--format", choices=("csv", "json"), default="csv",
                   help="csv: group,topic,partition,offset (default); json: JSON lines with "
                        "metadata, leader epoch and commit timestamp")
    p.add_argument("-o", "--output", metavar="FILE",
                   help="write here (default stdout); an existing directory: one file per "
                        "group, <group>.csv as topic,partition,offset (or <group>.jsonl)")
    p = command("import", cmd_import, "commit offsets from an export file into a store, one "
                                      "atomic commit per group (takes the store's lock)")
    p.add_argument("dir")
    p.add_argument("file", help="csv or JSON lines as export writes them; - for stdin")
    p.add_argument("--group", help="only this group; names the group of topic,partition,offset "
                                   "csv")
    p.add_argument("--dry-run", action="store_true",
                   help="print per partition what would be new, change or stay; write nothing")
    p.add_argument("--force", action="store_true",
                   help="also commit to groups that have live members (as their leader)")
    p.add_argument("--create", action="store_true", help="create the store if there is none")
    p.add_argument("--partitions", type=int, help="with --create: log partitions (default 50)")
    json_flag(p)
