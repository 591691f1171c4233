"""What moving offsets from one place to another would do, and the table that says what it did.

Shared by ``import`` (transfer_cmds.py) and ``migrate`` (migrate_cmds.py). An offset here is
``Entry(offset, metadata, leader_epoch)``: what both Kafka's OffsetCommit and the store's
``commit_sync`` carry (the commit timestamp is the receiver's own, in both).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import NamedTuple

from offsetlog.cli.output import Output, Styled

#: (topic, partition)
Key = tuple[str, int]


class Entry(NamedTuple):
    offset: int
    metadata: str = ""
    leader_epoch: int | None = None

    @classmethod
    def of(cls, offset: int, metadata: str | None, leader_epoch: int | None) -> "Entry":
        """Normalised: no metadata is ``""``, no epoch (Kafka's -1) is None."""
        epoch = None if leader_epoch is None or leader_epoch < 0 else int(leader_epoch)
        return cls(int(offset), metadata or "", epoch)


def diff(source: dict[Key, Entry], target: dict[Key, Entry]) -> dict[Key, str]:
    """Per source partition: ``new`` (the target has none), ``change`` or ``stay``."""
    out = {}
    for key, e in sorted(source.items()):
        t = target.get(key)
        out[key] = "new" if t is None else "stay" if t == e else "change"
    return out


def digest(offsets: dict[Key, Entry]) -> str:
    """A short fingerprint of a group's offsets (the migrate state file records it)."""
    import hashlib
    import json

    text = json.dumps(sorted([list(k), list(v)] for k, v in offsets.items()))
    return hashlib.sha256(text.encode()).hexdigest()[:16]


#: statuses that are not a failure
OK_STATUSES = ("moved", "unchanged", "done-before", "no-offsets", "planned")


@dataclass
class GroupResult:
    """What happened to one group (a row of the summary)."""

    group: str
    status: str = "planned"  # one of OK_STATUSES, or refused, failed, partial, mismatch
    sent: int = 0  # partitions written
    unchanged: int = 0  # partitions the target already had equal
    skipped: int = 0  # partitions left out (topic or partition missing on the target)
    verified: bool | None = None  # read back equal (None: not read back)
    reason: str = ""
    plan: dict = field(default_factory=dict)  # Key -> action (new/change/stay/skip)

    @property
    def ok(self) -> bool:
        return self.status in OK_STATUSES and self.verified is not False and not self.skipped

    def as_json(self) -> dict:
        return {"group": self.group, "status": self.status, "sent": self.sent,
                "unchanged": self.unchanged, "skipped": self.skipped,
                "verified": self.verified, "reason": self.reason or None}


SUMMARY_COLUMNS = ("GROUP", "STATUS", "SENT", "UNCHANGED", "SKIPPED", "VERIFIED", "REASON")
PLAN_COLUMNS = ("GROUP", "TOPIC", "PARTITION", "OFFSET", "TARGET-OFFSET", "ACTION")


def print_summary(out: Output, results: list[GroupResult], *, title: str) -> None:
    rows = []
    for r in results:
        status = r.status if r.ok else Styled(r.status, "red" if not r.skipped else "yellow")
        verified = "-" if r.verified is None else "yes" if r.verified else Styled("NO", "red")
        rows.append([r.group, status, str(r.sent), str(r.unchanged), str(r.skipped), verified,
                     r.reason or "-"])
    out.table(SUMMARY_COLUMNS, rows, title=title, right=("SENT", "UNCHANGED", "SKIPPED"))
    bad = [r for r in results if not r.ok]
    moved = sum(r.sent for r in results)
    out.line(f"{len(results)} groups: {moved} offsets sent, {len(bad)} groups not complete")


def plan_rows(group: str, source: dict[Key, Entry], target: dict[Key, Entry],
              actions: dict[Key, str]) -> list[dict]:
    rows = []
    for key, action in sorted(actions.items()):
        t = target.get(key)
        rows.append({"group": group, "topic": key[0], "partition": key[1],
                     "offset": source[key].offset, "metadata": source[key].metadata,
                     "leader_epoch": source[key].leader_epoch,
                     "target_offset": None if t is None else t.offset, "action": action})
    return rows


def print_plan(out: Output, rows: list[dict], *, title: str) -> None:
    cells = [[r["group"], r["topic"], str(r["partition"]), str(r["offset"]),
              "-" if r["target_offset"] is None else str(r["target_offset"]),
              r["action"] if r["action"] in ("stay", "new", "change")
              else Styled(r["action"], "yellow")] for r in rows]
    out.table(PLAN_COLUMNS, cells, title=title, right=("PARTITION", "OFFSET", "TARGET-OFFSET"))
