"""The read-only commands: ``describe``, ``groups`` and ``verify`` (``dump`` is in dump.py).

They never take the store's lock, never repair and never create anything, so they are safe to
point at a store a service has open, or at a read-only copy of one. What they show of groups
is what the log says (the replay a restart would load), not the live state of a store open
elsewhere.
"""

from __future__ import annotations

import argparse
from dataclasses import dataclass, field

from offsetlog.cli import consumer_view
from offsetlog.cli.output import Output, Styled, ts
from offsetlog.errors import OffsetlogError
from offsetlog.group.consumer import ConsumerGroup
from offsetlog.group.consumer_protocol import PROTOCOL_TYPE, decode_assignment
from offsetlog.recovery.tools import inspect
from offsetlog.store.opening import check_store_path
from offsetlog.txn.state import TxnMetadata

UNKNOWN_NOTE = ("LOG-END-OFFSET and LAG are '-': offsetlog stores the consumers' offsets, not "
                "the topics' logs, so it cannot know where those end.")


@dataclass
class GroupView:
    """One group as the log holds it."""

    group: str
    log_partition: int
    offsets: dict = field(default_factory=dict)  # (topic, partition) -> table entry
    #: (topic, partition) -> [(producer id, entry, superseded)] of open transactions
    pending: dict = field(default_factory=dict)
    metadata: dict | None = None  # its latest GROUP_METADATA value
    #: the group as a consumer-protocol (KIP-848) group, when it is one
    consumer: ConsumerGroup | None = None

    @property
    def members(self) -> list[dict]:
        """The classic protocol's members (a consumer-protocol group's are in ``consumer``)."""
        return list((self.metadata or {}).get("members") or [])

    @property
    def state(self) -> str:
        if self.consumer is not None:
            return self.consumer.state()
        # as the coordinator loads a group: Stable with members, Empty without (a group that
        # only ever committed, like Kafka's simple consumer, is Empty too)
        return "Stable" if self.members else "Empty"

    @property
    def protocol_type(self) -> str | None:
        return (self.metadata or {}).get("protocol_type") if self.metadata else None

    def assignment(self, member: dict) -> list:
        """A member's partitions, decoded when the group speaks the consumer protocol."""
        if self.protocol_type != PROTOCOL_TYPE:
            return []
        try:
            return sorted(decode_assignment(member.get("assignment") or b""))
        except Exception:  # noqa: BLE001 - bytes some client wrote: shown as undecodable
            return []

    def owner_of(self, topic: str, partition: int) -> dict | None:
        if self.consumer is not None:
            mid = self.consumer.owners.get((topic, partition))
            if mid is None:
                return None
            m = self.consumer.members[mid]
            return {"member_id": mid, "client_host": m.client_host, "client_id": m.client_id}
        for m in self.members:
            if (topic, partition) in {tuple(tp) for tp in self.assignment(m)}:
                return m
        return None


def load_groups(out: Output, path: str) -> dict[str, GroupView]:
    """Every group of the store at ``path``, replayed read-only from its log."""
    check_store_path(path, create=False)
    total = inspect.total_segment_bytes(path)
    with out.progress(total, "reading the log") as advance:
        _, tables = inspect.scan(path, salvage=False, tables=True, progress=advance)
    views: dict[str, GroupView] = {}
    for p, table in tables.items():
        consumer = consumer_view.consumer_groups(table)
        for group in table.groups() | set(table.txn.keys) | set(consumer):
            views[group] = v = GroupView(group, p)
            v.offsets = dict(table.offsets.get(group, {}))
            v.metadata = table.group_metadata.get(group)
            v.consumer = consumer.get(group)
            for tp, per_pid in table.txn.keys.get(group, {}).items():
                v.pending[tp] = [(pid, slot[0], slot[2]) for pid, slot in sorted(per_pid.items())]
    return dict(sorted(views.items()))


def _dash(v) -> str:
    return "-" if v is None or v == "" else str(v)


# -- describe -----------------------------------------------------------------------------

OFFSET_COLUMNS = ("GROUP", "TOPIC", "PARTITION", "CURRENT-OFFSET", "LOG-END-OFFSET", "LAG",
                  "CONSUMER-ID", "HOST", "CLIENT-ID", "LEADER-EPOCH", "METADATA",
                  "COMMITTED-AT", "TRANSACTION")
MEMBER_COLUMNS = ("GROUP", "CONSUMER-ID", "GROUP-INSTANCE-ID", "CLIENT-ID", "HOST",
                  "#PARTITIONS", "ASSIGNMENT")
STATE_COLUMNS = ("GROUP", "STATE", "GENERATION", "PROTOCOL-TYPE", "PROTOCOL", "LEADER",
                 "#MEMBERS")


def _key(column: str) -> str:
    """The JSON field of a column: ``CURRENT-OFFSET`` -> ``current_offset``, ``#MEMBERS`` ->
    ``num_members``."""
    return ("num_" + column[1:] if column.startswith("#") else column).lower().replace("-", "_")


def _offset_rows(v: GroupView) -> list[dict]:
    rows = []
    keys = sorted(set(v.offsets) | set(v.pending))
    for tp in keys:
        topic, partition = tp
        owner = v.owner_of(topic, partition) or {}
        who = {"consumer_id": owner.get("member_id"), "host": owner.get("client_host") or None,
               "client_id": owner.get("client_id") or None}
        e = v.offsets.get(tp)
        if e is not None:
            rows.append({"group": v.group, "topic": topic, "partition": partition,
                         "current_offset": e[0], "log_end_offset": None, "lag": None, **who,
                         "leader_epoch": e[2], "metadata": e[1] or None,
                         "committed_at": ts(e[3]) if e[3] is not None else None,
                         "transaction": None, "pending": False, "producer_id": None})
        for pid, pe, superseded in v.pending.get(tp, []):
            rows.append({"group": v.group, "topic": topic, "partition": partition,
                         "current_offset": pe[0], "log_end_offset": None, "lag": None, **who,
                         "leader_epoch": pe[2], "metadata": pe[1] or None,
                         "committed_at": ts(pe[3]) if pe[3] is not None else None,
                         "transaction": f"pending (producer {pid}"
                                        + (", superseded)" if superseded else ")"),
                         "pending": True, "producer_id": pid})
    return rows


def _member_rows(v: GroupView) -> list[dict]:
    rows = []
    for m in v.members:
        parts = v.assignment(m)
        rows.append({"group": v.group, "consumer_id": m.get("member_id"),
                     "group_instance_id": m.get("group_instance_id"),
                     "client_id": m.get("client_id") or None,
                     "host": m.get("client_host") or None, "num_partitions": len(parts),
                     "assignment": ",".join(f"{t}-{p}" for t, p in parts) or None})
    return rows


def _state_row(v: GroupView) -> dict:
    if v.consumer is not None:  # a consumer-protocol group: its group epoch and assignor
        g = v.consumer
        return {"group": v.group, "state": v.state, "generation": g.group_epoch,
                "protocol_type": "consumer", "protocol": consumer_view.preferred_assignor(g),
                "leader": None, "num_members": len(g.members), "type": "consumer",
                "target_assignment_epoch": g.assignment_epoch}
    md = v.metadata or {}
    return {"group": v.group, "state": v.state, "generation": md.get("generation", 0) if md else 0,
            "protocol_type": md.get("protocol_type") or None, "protocol": md.get("protocol"),
            "leader": md.get("leader"), "num_members": len(v.members)}


def _print_rows(out: Output, columns, rows: list[dict], *, title: str, right=()) -> None:
    cells = []
    for r in rows:
        row = [_dash(r[_key(c)]) for c in columns]
        if r.get("pending"):
            row[-1] = Styled(row[-1], "yellow")
        cells.append(row)
    out.table(columns, cells, title=title, right=right)


def cmd_describe(args: argparse.Namespace, out: Output) -> int:
    views = load_groups(out, args.dir)
    if args.group is not None:
        if args.group not in views:
            raise OffsetlogError(f"consumer group {args.group!r} does not exist in {args.dir}")
        views = {args.group: views[args.group]}
    if args.state:
        rows = [_state_row(v) for v in views.values()]
        if out.json:
            out.emit_json({"groups": rows})
        else:
            _print_rows(out, STATE_COLUMNS, rows, title=f"groups in {args.dir}",
                        right=("GENERATION", "#MEMBERS"))
        return 0
    if args.members:
        return _describe_members(args, out, views)
    rows = [r for v in views.values() for r in _offset_rows(v)]
    if out.json:
        out.emit_json({"offsets": rows})
        return 0
    if not rows:
        out.line(f"{_which(args)} no committed offsets.")
        return 0
    _print_rows(out, OFFSET_COLUMNS, rows, title=f"offsets in {args.dir}",
                right=("PARTITION", "CURRENT-OFFSET"))
    out.line()
    out.line(UNKNOWN_NOTE)
    if any(r["pending"] for r in rows):
        out.line("TRANSACTION 'pending': offsets of a transaction not yet committed or "
                 "aborted; fetch() does not return them until it commits.")
    return 0


def _describe_members(args: argparse.Namespace, out: Output, views: dict) -> int:
    """Classic groups' members in kafka-consumer-groups' columns; consumer-protocol groups'
    with their epochs, assignments and targets (``consumer_view``), in a table of their
    own. In JSON the consumer-protocol rows have ``"type": "consumer"``; classic rows, and
    a store with no consumer-protocol group, print exactly what they did before (the
    compatibility fixtures, tests/store/test_compat_fixtures.py, hold old stores to it)."""
    rows = [r for v in views.values() if v.consumer is None for r in _member_rows(v)]
    groups = [v.consumer for v in views.values() if v.consumer is not None]
    consumer_rows = [r for g in groups for r in consumer_view.member_rows(g)]
    if out.json:
        # a store without consumer-protocol groups prints what it always printed
        doc: dict = {"members": rows + consumer_rows}
        if groups:
            doc["consumer_groups"] = [consumer_view.group_row(
                g, consumer_view.preferred_assignor(g)) for g in groups]
        out.emit_json(doc)
        return 0
    if not rows and not consumer_rows:
        out.line(f"{_which(args)} no active members.")
        return 0
    if rows:
        _print_rows(out, MEMBER_COLUMNS, rows, title=f"members in {args.dir}",
                    right=("#PARTITIONS",))
    if consumer_rows:
        if rows:
            out.line()
        _print_rows(out, consumer_view.COLUMNS, consumer_rows,
                    title=f"consumer-protocol members in {args.dir}",
                    right=consumer_view.RIGHT)
    return 0


def _which(args: argparse.Namespace) -> str:
    return f"Consumer group {args.group!r} has" if args.group else "The store has"


# -- groups -------------------------------------------------------------------------------

def cmd_groups(args: argparse.Namespace, out: Output) -> int:
    """The groups with their state and offset count (``kafka-consumer-groups --list
    --state``)."""
    views = load_groups(out, args.dir)
    rows = [{"group": v.group, "state": v.state, "offsets": len(v.offsets),
             "pending_offsets": sum(len(x) for x in v.pending.values()),
             "log_partition": v.log_partition} for v in views.values()]
    if out.json:
        out.emit_json({"groups": rows})
        return 0
    columns = ("GROUP", "STATE", "OFFSETS", "PENDING-OFFSETS", "LOG-PARTITION")
    out.table(columns, [[_dash(r[_key(c)]) for c in columns] for r in rows],
              title=f"groups in {args.dir}", right=columns[2:])
    return 0


# -- transactions -------------------------------------------------------------------------

TXN_COLUMNS = ("TRANSACTIONAL-ID", "PRODUCER-ID", "PRODUCER-EPOCH", "STATE", "TIMEOUT-MS",
               "STARTED-AT", "PARTITIONS", "LOG-PARTITION")


def cmd_transactions(args: argparse.Namespace, out: Output) -> int:
    """Every transactional id as its latest TRANSACTION_STATE record says (``kafka-transactions
    --list`` and ``--describe``): a PrepareCommit / PrepareAbort here is a decision whose
    markers the next open completes."""
    check_store_path(args.dir, create=False)
    total = inspect.total_segment_bytes(args.dir)
    with out.progress(total, "reading the log") as advance:
        _, tables = inspect.scan(args.dir, salvage=False, tables=True, progress=advance)
    rows = []
    for p, table in tables.items():
        for tid, value in table.txn.states.items():
            m = TxnMetadata.from_value(tid, value)
            rows.append({"transactional_id": tid, "producer_id": m.producer_id,
                         "producer_epoch": m.producer_epoch, "state": m.state,
                         "timeout_ms": m.timeout_ms,
                         "started_at": ts(m.start_timestamp) if m.start_timestamp >= 0 else None,
                         "partitions": list(m.partitions), "log_partition": p})
    rows.sort(key=lambda r: r["transactional_id"])
    if out.json:
        out.emit_json({"transactions": rows})
        return 0
    cells = [[_dash(",".join(map(str, r["partitions"])) if c == "PARTITIONS" else r[_key(c)])
              for c in TXN_COLUMNS] for r in rows]
    out.table(TXN_COLUMNS, cells, title=f"transactional ids in {args.dir}",
              right=("PRODUCER-ID", "PRODUCER-EPOCH", "TIMEOUT-MS", "LOG-PARTITION"))
    return 0


# -- verify -------------------------------------------------------------------------------

def cmd_verify(args: argparse.Namespace, out: Output) -> int:
    check_store_path(args.dir, create=False)
    total = inspect.total_segment_bytes(args.dir)
    with out.progress(total, "verifying") as advance:
        # replayed as open replays: "ok" means open would load every record
        report, _ = inspect.scan(args.dir, salvage=True, replay=True, progress=advance)
    partitions = []
    corrupt = 0
    for p, r in sorted(report.partitions.items()):
        status = "ok"
        if r.skipped:
            corrupt += len(r.skipped)
            status = f"CORRUPT ({len(r.skipped)} regions)"
        elif r.truncated:
            status = "torn tail (truncated on next open)"
        partitions.append({"partition": p, "segments": len(r.segments), "batches": r.batches,
                           "records": r.records, "bytes": r.bytes_read,
                           "next_offset": r.next_offset, "status": status})
    log_ends = {p: r.next_offset for p, r in report.partitions.items()}
    checks = inspect.check_snapshots(args.dir, log_ends)
    snapshots = None if not checks else [
        {"partition": c.partition if c.partition >= 0 else None, "offset": c.offset,
         "keys": c.keys, "bytes": c.bytes, "created": ts(c.created_ms) if c.created_ms else None,
         "status": "ok" if c.problem is None else f"WARNING: {c.problem} (discarded on next open)"}
        for c in checks]
    doc = {"store": args.dir, "ok": not corrupt, "records": report.records,
           "batches": report.batches, "bytes": report.bytes_read, "partitions": partitions,
           "torn_tails": [str(t) for t in report.truncations],
           "corruption": [str(s) for s in report.skipped], "snapshots": snapshots}
    if out.json:
        out.emit_json(doc)
    else:
        _print_verify(out, args.dir, doc)
    return 1 if corrupt else 0


def _print_verify(out: Output, path: str, doc: dict) -> None:
    columns = ("PARTITION", "SEGMENTS", "BATCHES", "RECORDS", "BYTES", "NEXT-OFFSET", "STATUS")
    rows = []
    for r in doc["partitions"]:
        status = r["status"]
        style = "red" if status.startswith("CORRUPT") else "yellow" if status != "ok" else ""
        rows.append([str(r[_key(c)]) for c in columns[:-1]]
                    + [Styled(status, style) if style else status])
    out.table(columns, rows, title=f"verify {path}", right=columns[:-1])
    for t in doc["torn_tails"]:
        out.line(f"torn tail: {t}")
    for s in doc["corruption"]:
        out.line(Styled(f"corruption: {s}", "red"))
    verdict = "CORRUPT" if not doc["ok"] else "ok"
    out.line(Styled(f"{doc['records']} records in {doc['batches']} batches, {doc['bytes']} "
                    f"bytes: {verdict}", "red" if not doc["ok"] else ""))
    snapshots = doc["snapshots"]
    out.line()
    if snapshots is None:
        out.line("snapshots: none stored")
        return
    columns = ("PARTITION", "OFFSET", "KEYS", "BYTES", "CREATED", "STATUS")
    rows = [[_dash(c[_key(col)]) for col in columns[:-1]]
            + [c["status"] if c["status"] == "ok" else Styled(c["status"], "yellow")]
            for c in snapshots]
    out.table(columns, rows, title=f"snapshots {path}", right=("PARTITION", "OFFSET", "KEYS",
                                                               "BYTES"))
    bad = sum(c["status"] != "ok" for c in snapshots)
    if bad:
        out.line(Styled(f"snapshots: {bad} of {len(snapshots)} would be discarded (a warning: "
                        "snapshots are a cache, the log is replayed instead)", "yellow"))
    else:
        out.line(f"snapshots: {len(snapshots)} ok")
