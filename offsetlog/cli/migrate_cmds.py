"""``offsetlog migrate``: groups' committed offsets to a Kafka cluster (``--to``) or from one
(``--from``), group by group, safe to interrupt and to re-run.

``--to BOOTSTRAP`` reads the store as ``describe`` does (its log, read-only, without its lock:
``offsetlog serve`` may have it open) and, per group: reads the group's offsets on the cluster,
sends only the partitions that are new or different (one AlterConsumerGroupOffsets, which
Kafka applies as one OffsetCommit), reads the group back and compares. Kafka refuses a group
that has members on the cluster; the error is reported and the other groups go on.
Partitions the cluster's topics lack are reported and skipped (``--create-topics`` creates
missing topics with as many partitions as the store names; existing topics are never changed).

``--from BOOTSTRAP`` lists the cluster's groups (ListGroups), reads each one's committed offsets
and commits those that differ into the store (one atomic ``commit_sync`` per group, under the
store's lock), refusing a group with live members in the store unless ``--force``.

The state file (``--state-file``, default ``<DIR>.migrate-state.jsonl`` beside the store, not
in it) gets one line, fsynced, per group that was read back equal, with the cluster's id, the
direction and a digest of the offsets sent. A re-run skips those groups while the store (or
the cluster, for ``--from``) still holds the same offsets, and compares them again; every
other group is read on both sides again, so what landed before an interruption is not sent
twice.
"""

from __future__ import annotations

import argparse
import json
import os

from offsetlog.cli.crashtest_cmd import UsageError
from offsetlog.cli.kafka_admin import Cluster, GroupRefused, KafkaUnreachable, read_properties
from offsetlog.cli.output import Output
from offsetlog.cli.plan import (
    Entry,
    GroupResult,
    Key,
    diff,
    digest,
    plan_rows,
    print_plan,
    print_summary,
)
from offsetlog.cli.transfer_cmds import SourceGroups, commit_group, current_offsets
from offsetlog.errors import OffsetlogError


class StateFile:
    """Groups done, one JSON line each: ``{"direction", "cluster", "group", "digest"}``."""

    def __init__(self, path: str, direction: str, cluster: str) -> None:
        self.path, self.direction, self.cluster = path, direction, cluster
        self.done: dict[str, str] = {}
        try:
            with open(path) as f:
                for line in f:
                    try:
                        d = json.loads(line)
                    except ValueError:
                        continue  # a line torn by a crash: that group is simply not done
                    if d.get("direction") == direction and d.get("cluster") == cluster:
                        self.done[d["group"]] = d["digest"]
        except FileNotFoundError:
            pass

    def is_done(self, group: str, offsets: dict[Key, Entry]) -> bool:
        return self.done.get(group) == digest(offsets)

    def mark(self, group: str, offsets: dict[Key, Entry]) -> None:
        d = digest(offsets)
        line = json.dumps({"direction": self.direction, "cluster": self.cluster,
                           "group": group, "digest": d}, separators=(",", ":")) + "\n"
        fd = os.open(self.path, os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o644)
        try:
            os.write(fd, line.encode())
            os.fsync(fd)
        finally:
            os.close(fd)
        self.done[group] = d


def default_state_file(store: str) -> str:
    return os.path.abspath(store).rstrip(os.sep) + ".migrate-state.jsonl"


def _refusal(e: GroupRefused) -> str:
    if e.code in ("UNKNOWN_MEMBER_ID", "REBALANCE_IN_PROGRESS", "ILLEGAL_GENERATION",
                  "STALE_MEMBER_EPOCH"):
        return f"the group has active members on the target (Kafka: {e})"
    return f"Kafka: {e}"


def _lost(cluster: Cluster, e: GroupRefused) -> str | None:
    """After a client-side error (``_TRANSPORT``, ``_TIMED_OUT``, ...): whether the cluster
    still answers. The reason to give the groups not tried yet, or None."""
    if not e.code.startswith("_"):
        return None
    try:
        cluster.connect()
    except KafkaUnreachable as gone:
        return f"the cluster stopped answering ({gone})"
    return None


def _verify(r: GroupResult, want: dict[Key, Entry], got: dict[Key, Entry], *,
            before: bool) -> None:
    same = all(got.get(k) == e for k, e in want.items())
    if before and not same:
        r.verified = None  # the target's own consumers moved it on since it landed
        r.reason = r.reason or "changed on the target since it was migrated"
    else:
        r.verified = same
        if not same:
            bad = sorted(k for k, e in want.items() if got.get(k) != e)
            r.reason = r.reason or "read back differs: " + ", ".join(f"{t}-{p}" for t, p in bad[:5])


# -- to a cluster ---------------------------------------------------------------------------


def _migrate_to(args: argparse.Namespace, out: Output, cluster: Cluster) -> int:
    src = SourceGroups(out, args.dir, args.group)
    src.warn_pending(out, "migrated")
    state = StateFile(args.state_file or default_state_file(args.dir), "to", cluster.cluster_id)
    missing_topics: dict[str, int] = {}
    for offsets in src.offsets.values():
        for t, p in offsets:
            if t not in cluster.topics:
                missing_topics[t] = max(missing_topics.get(t, 0), p + 1)
    create_errors: dict[str, str] = {}
    if args.create_topics and missing_topics and not args.dry_run:
        create_errors = cluster.create_topics(missing_topics)
    results: list[GroupResult] = []
    plan: list[dict] = []
    lost = None
    with out.progress(len(src.offsets), "migrating groups", unit="items") as advance:
        for group, offsets in src.offsets.items():
            r = GroupResult(group)
            results.append(r)
            if lost:
                r.status, r.reason = "failed", f"not tried: {lost}"
                advance(1)
                continue
            if group in src.members:
                r.reason = (f"the group has {src.members[group]} members in the store: its "
                            "offsets may still move")
            try:
                _one_group_to(args, cluster, state, r, offsets, plan, create_errors,
                              pending=group in src.pending)
            except GroupRefused as e:
                r.status, r.reason = ("refused" if "active members" in _refusal(e)
                                      else "failed"), _refusal(e)
                lost = _lost(cluster, e)
            advance(1)
    if not args.dry_run and not lost:  # afterwards: every group read back and compared
        for r in results:
            if r.status in ("refused", "failed", "no-offsets"):
                continue
            want = {k: e for k, e in src.offsets[r.group].items() if cluster.has(k)}
            try:
                _verify(r, want, cluster.group_offsets(r.group),
                        before=r.status == "done-before")
            except GroupRefused as e:
                r.verified, r.reason = False, f"read back failed: {e}"
    return _finish(args, out, results, plan, f"migrate {args.dir} to {args.to}")


def _one_group_to(args, cluster: Cluster, state: StateFile, r: GroupResult,
                  offsets: dict[Key, Entry], plan: list, create_errors: dict, *,
                  pending: bool = False) -> None:
    if not offsets:
        r.status = "no-offsets"
        r.reason = "only pending transactional offsets" if pending else "no committed offsets"
        return
    if state.is_done(r.group, offsets) and not args.dry_run:
        r.status = "done-before"
        return
    present = {k: e for k, e in offsets.items() if cluster.has(k)}
    absent = sorted(k for k in offsets if k not in present)
    target = cluster.group_offsets(r.group)
    actions = diff(present, target)
    r.unchanged = sum(a == "stay" for a in actions.values())
    r.skipped = len(absent)
    if absent:
        topics = sorted({t for t, _ in absent})
        why = [f"{t}: {create_errors[t]}" if t in create_errors else
               f"{t} has {cluster.topics[t]} partitions" if t in cluster.topics else
               f"no topic {t}" for t in topics]
        r.reason = "; ".join(filter(None, ["skipped on the target (" + "; ".join(why) + ")",
                                           r.reason]))
    if args.dry_run:
        plan += plan_rows(r.group, offsets, target, actions)
        plan += [{**row, "action": "skip (not on target)"}
                 for row in plan_rows(r.group, offsets, {}, {k: "skip" for k in absent})]
        r.sent = sum(a != "stay" for a in actions.values())
        return
    todo = {k: present[k] for k, a in actions.items() if a != "stay"}
    if todo:
        errors = cluster.alter(r.group, todo)
        r.sent = len(todo) - len(errors)
        if errors:
            r.status = "failed"
            r.reason = "Kafka refused " + ", ".join(f"{t}-{p}: {c}"
                                                    for (t, p), c in sorted(errors.items())[:5])
            return
    got = cluster.group_offsets(r.group)
    r.status = "moved" if todo else "unchanged"
    if absent:
        r.status = "partial"
    if all(got.get(k) == e for k, e in present.items()) and not absent:
        state.mark(r.group, offsets)


# -- from a cluster -------------------------------------------------------------------------


def _migrate_from(args: argparse.Namespace, out: Output, cluster: Cluster) -> int:
    from offsetlog import OffsetStore

    listed = cluster.list_groups()
    groups = list(args.group) if args.group else sorted(listed)
    state = StateFile(args.state_file or default_state_file(args.dir), "from",
                      cluster.cluster_id)
    results: list[GroupResult] = []
    plan: list[dict] = []
    lost = None
    with OffsetStore.open(args.dir, create=args.create, partitions=args.partitions) as store, \
            out.progress(len(groups), "migrating groups", unit="items") as advance:
        for group in groups:
            r = GroupResult(group)
            results.append(r)
            if lost:
                r.status, r.reason = "failed", f"not tried: {lost}"
                advance(1)
                continue
            try:
                _one_group_from(args, cluster, store, state, r, listed, plan)
            except GroupRefused as e:
                r.status, r.reason = "failed", f"Kafka: {e}"
                lost = _lost(cluster, e)
            except OffsetlogError as e:
                r.status, r.reason = "failed", f"{type(e).__name__}: {e}"
            advance(1)
    return _finish(args, out, results, plan, f"migrate {args.from_} to {args.dir}")


def _one_group_from(args, cluster: Cluster, store, state: StateFile, r: GroupResult,
                    listed: dict[str, str], plan: list) -> None:
    if r.group not in listed:
        r.status, r.reason = "failed", "no such group on the cluster"
        return
    offsets = cluster.group_offsets(r.group)
    if listed[r.group] not in ("Empty", "Dead", "Unknown"):
        r.reason = f"the group is {listed[r.group]} on the cluster: its offsets may still move"
    if not offsets:
        r.status = "no-offsets"
        return
    have = current_offsets(store, r.group)
    if state.is_done(r.group, offsets) and not args.dry_run:
        r.status = "done-before"
        _verify(r, offsets, have, before=True)
        return
    actions = diff(offsets, have)
    r.unchanged = sum(a == "stay" for a in actions.values())
    todo = {k: offsets[k] for k, a in actions.items() if a != "stay"}
    if args.dry_run:
        plan += plan_rows(r.group, offsets, have, actions)
        r.sent = len(todo)
        return
    if todo:
        refused = commit_group(store, r.group, todo, args.force)
        if refused:
            r.status, r.reason = "refused", refused
            return
    r.sent = len(todo)
    r.status = "moved" if todo else "unchanged"
    _verify(r, offsets, current_offsets(store, r.group), before=False)
    if r.verified:
        state.mark(r.group, offsets)


# -- the command ----------------------------------------------------------------------------


def _finish(args, out: Output, results: list[GroupResult], plan: list[dict], title: str) -> int:
    ok = all(r.ok for r in results)
    if args.dry_run:
        if out.json:
            out.emit_json({"dry_run": True, "plan": plan,
                           "groups": [r.as_json() for r in results]})
        elif plan:
            print_plan(out, plan, title=f"{title} (dry run)")
        else:
            out.line("Nothing to migrate.")
        return 0
    if out.json:
        out.emit_json({"groups": [r.as_json() for r in results], "ok": ok,
                       "sent": sum(r.sent for r in results)})
    else:
        print_summary(out, results, title=title)
    return 0 if ok else 1


def cmd_migrate(args: argparse.Namespace, out: Output) -> int:
    if (args.to is None) == (args.from_ is None):
        raise UsageError("give exactly one of --to BOOTSTRAP and --from BOOTSTRAP")
    if args.timeout <= 0:
        raise UsageError("--timeout must be positive")
    if args.to is not None and not os.path.isdir(args.dir):
        raise UsageError(f"{args.dir}: no such directory")
    if args.from_ is not None and not args.create and not os.path.isdir(args.dir):
        raise UsageError(f"{args.dir}: no such directory (give --create to make a new store)")
    props = read_properties(args.command_config) if args.command_config else {}
    cluster = Cluster(args.to or args.from_, props, args.timeout)
    cluster.connect()
    if args.to is not None:
        return _migrate_to(args, out, cluster)
    return _migrate_from(args, out, cluster)


def add_parser(command, json_flag) -> None:
    p = command("migrate", cmd_migrate, "copy groups' committed offsets to a Kafka cluster "
                "(--to) or from one (--from) through Kafka's admin API; re-runnable")
    p.add_argument("dir", help="the store (read without its lock with --to)")
    p.add_argument("--to", metavar="BOOTSTRAP", help="copy the store's groups to this cluster")
    p.add_argument("--from", dest="from_", metavar="BOOTSTRAP",
                   help="copy this cluster's groups into the store")
    p.add_argument("--group", action="append", help="only this group (repeatable)")
    p.add_argument("--command-config", metavar="FILE",
                   help="Kafka client properties (security.protocol, sasl.*, ssl.*)")
    p.add_argument("--dry-run", action="store_true",
                   help="print per group the offsets that would be new, change or stay")
    p.add_argument("--create-topics", action="store_true",
                   help="with --to: create topics the cluster lacks (never alters existing ones)")
    p.add_argument("--state-file", metavar="FILE",
                   help="the groups done (default: <DIR>.migrate-state.jsonl beside DIR)")
    p.add_argument("--timeout", type=float, default=30.0,
                   help="seconds each request to the cluster may take (default 30)")
    p.add_argument("--force", action="store_true",
                   help="with --from: also commit to groups with live members in the store")
    p.add_argument("--create", action="store_true",
                   help="with --from: create the store if there is none")
    p.add_argument("--partitions", type=int, help="with --create: log partitions (default 50)")
    json_flag(p)
