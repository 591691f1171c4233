"""``offsetlog dump``: every readable record, batch by batch, as ``kafka-dump-log`` shows a
segment (with ``--offsets-decoder``).

Each batch's header line (base and last offset, record count, producer id and epoch, the
transactional and control flags, the delete horizon, position, time, size and CRC) is followed by
its records, one ``| offset: ...`` line each. Group metadata is decoded down to the members'
subscriptions and assignments; records of transactional batches say how their transaction
ended (``committed``, ``aborted``, or ``open`` while undecided); markers say which they end.

``--json``: one JSON object per record (JSON lines), its batch's header nested under ``batch``.
Read-only: what could not be read is named on stderr, and corruption fails the command.
"""

from __future__ import annotations

import argparse
import bisect
import os
import struct
from typing import Any

from offsetlog.cli.output import Output
from offsetlog.group.consumer_protocol import (PROTOCOL_TYPE, decode_assignment,
                                               decode_subscription)
from offsetlog.log.format import Attribute
from offsetlog.log.records import (ABORT, GROUP_METADATA, TRANSACTION_MARKER,
                                   describe as describe_record)
from offsetlog.recovery.tools import inspect
from offsetlog.store.opening import check_store_path

_CRCS = struct.Struct("<4xII")  # header_crc, crc: bytes 4-11 of a batch (docs/FORMAT.md)


def decode_group_value(value: dict | None) -> dict | None:
    """A GROUP_METADATA value with each member's subscription and assignment decoded (for a
    consumer group whose bytes decode; otherwise left as bytes, shown in hex)."""
    if value is None or value.get("protocol_type") != PROTOCOL_TYPE:
        return value
    members = []
    for m in value.get("members") or []:
        m = dict(m)
        try:
            sub = decode_subscription(m.get("subscription") or b"")
            m["subscription"] = {"topics": list(sub.get("topics") or []),
                                 "owned_partitions": [f"{t}-{p}" for t, p in
                                                      sub.get("owned_partitions") or []],
                                 "generation_id": sub.get("generation_id"),
                                 "user_data": sub.get("user_data")}
        except Exception:  # noqa: BLE001 - not the consumer protocol: left as bytes
            pass
        try:
            m["assignment"] = [f"{t}-{p}" for t, p in decode_assignment(m.get("assignment") or b"")]
        except Exception:  # noqa: BLE001
            pass
        members.append(m)
    return dict(value, members=members)


def transaction_outcomes(path: str, partition: int | None) -> dict[int, dict[int, list]]:
    """partition -> producer id -> sorted [(marker offset, result)] (first pass of a dump)."""
    out: dict[int, dict[int, list]] = {}
    for p, _seg, batch, offset, record in inspect.iter_records(path, partition=partition):
        if batch.attributes & Attribute.CONTROL and record[1] == TRANSACTION_MARKER:
            out.setdefault(p, {}).setdefault(record[3]["producer_id"], []).append(
                (offset, record[4]["result"]))
    return out


def _outcome(markers: dict[int, list], producer_id: int, offset: int) -> str:
    """How the transaction that wrote ``offset`` ended: the first marker of its producer
    after it."""
    ends = markers.get(producer_id, [])
    i = bisect.bisect_right(ends, (offset, "~"))
    if i == len(ends):
        return "open"
    return "aborted" if ends[i][1] == ABORT else "committed"


def _fmt(v: Any) -> str:
    if isinstance(v, dict):
        return "{" + ",".join(f"{k}={_fmt(x)}" for k, x in v.items()) + "}"
    if isinstance(v, (list, tuple)):
        return "[" + ",".join(_fmt(x) for x in v) + "]"
    if isinstance(v, (bytes, bytearray, memoryview)):
        return bytes(v).hex() or "''"
    return str(v)


class _Crcs:
    """The CRCs of batches, read from their segment files (one open file at a time)."""

    def __init__(self) -> None:
        self.path: str | None = None
        self.fd: int | None = None

    def get(self, path: str, position: int) -> tuple[int, int] | None:
        if path != self.path:
            self.close()
            try:
                self.fd = os.open(path, os.O_RDONLY)
            except FileNotFoundError:  # swapped away by a cleaner meanwhile
                return None
            self.path = path
        data = os.pread(self.fd, _CRCS.size, position)
        return _CRCS.unpack(data) if len(data) == _CRCS.size else None

    def close(self) -> None:
        if self.fd is not None:
            os.close(self.fd)
        self.fd = self.path = None


def batch_header(batch, crcs: tuple[int, int] | None) -> dict:
    a = batch.attributes
    horizon = bool(a & Attribute.DELETE_HORIZON)
    return {"base_offset": batch.base_offset, "last_offset": batch.last_offset,
            "count": batch.record_count, "producer_id": batch.producer_id,
            "producer_epoch": batch.producer_epoch,
            "is_transactional": bool(a & Attribute.TRANSACTIONAL),
            "is_control": bool(a & Attribute.CONTROL),
            "delete_horizon_ms": batch.timestamp if horizon else None,
            "position": batch.position, "create_time": None if horizon else batch.timestamp,
            "size": batch.size, "header_crc": None if crcs is None else crcs[0],
            "crc": None if crcs is None else crcs[1], "is_valid": True}


def _header_line(h: dict) -> str:
    def b(x: bool) -> str:
        return "true" if x else "false"
    return (f"baseOffset: {h['base_offset']} lastOffset: {h['last_offset']} count: {h['count']} "
            f"producerId: {h['producer_id']} producerEpoch: {h['producer_epoch']} "
            f"isTransactional: {b(h['is_transactional'])} isControl: {b(h['is_control'])} "
            f"deleteHorizonMs: {h['delete_horizon_ms'] if h['delete_horizon_ms'] is not None else '-'} "
            f"position: {h['position']} CreateTime: {h['create_time'] if h['create_time'] is not None else '-'} "
            f"size: {h['size']} crc: {h['crc']} headerCrc: {h['header_crc']} isvalid: true")


def cmd_dump(args: argparse.Namespace, out: Output) -> int:
    check_store_path(args.dir, create=False)
    outcomes = transaction_outcomes(args.dir, args.partition)
    skipped: list = []
    crcs = _Crcs()
    current_seg = current_batch = None
    header: dict = {}
    try:
        for p, seg, batch, offset, record in inspect.iter_records(
                args.dir, partition=args.partition, skipped=skipped):
            if (seg, batch.position) != current_batch:
                current_batch = (seg, batch.position)
                header = batch_header(batch, crcs.get(seg, batch.position))
                if not out.json:
                    if seg != current_seg:
                        current_seg = seg
                        out.line(f"Dumping partition {p} segment {os.path.relpath(seg, args.dir)}")
                    out.line(_header_line(header))
            d = describe_record(record)
            if d["type"] == "GROUP_METADATA" or record[1] == GROUP_METADATA:
                d["value"] = decode_group_value(d["value"])
            txn = None
            if header["is_transactional"] and not header["is_control"]:
                txn = _outcome(outcomes.get(p, {}), batch.producer_id, offset)
            if out.json:
                out.json_line({"partition": p, "segment": os.path.basename(seg),
                               "offset": offset, "batch_offset": batch.base_offset,
                               "batch_position": batch.position, "timestamp": batch.timestamp,
                               **d, "transaction": txn, "batch": header})
                continue
            key = ",".join(f"{k}={_fmt(v)}" for k, v in d["key"].items())
            payload = "<DELETE>" if d["value"] is None else ",".join(
                f"{k}={_fmt(v)}" for k, v in d["value"].items())
            line = (f"| offset: {offset} partition: {p} type: {d['type']} v{d['version']} "
                    f"key: {key} payload: {payload}")
            if txn is not None:
                line += f" transaction: {txn}"
            if header["is_control"] and d["type"] == "TRANSACTION_MARKER":
                line += f" endTxnMarker: {str(d['value']['result']).upper()}"
            out.line(line)
    finally:
        crcs.close()
    # What could not be read is said, never left out silently; corruption fails the command
    # as it fails verify (a torn tail alone does not: the next open truncates it).
    corrupt = 0
    for r in skipped:
        corrupt += not r.reason.endswith("(torn tail)")
        out.warn(f"not dumped: {r}")
    return 1 if corrupt else 0
