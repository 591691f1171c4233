"""Differential sessions: one scripted session of raw requests sent to Apache Kafka and to
``offsetlog serve``, the answers compared field by field.

A session is data: a list of steps (:class:`Req`, :class:`Send`, :class:`Recv`). Request
bodies are dicts for ``codec.build`` (one dict serves every version: fields a version
lacks are dropped); a value may be a callable of the session's context (what earlier
steps saved), e.g. ``member_id=lambda c: c["m1"]``. :func:`run` drives one target and
returns the normalised answers; :func:`compare` runs both and checks they are equal,
except for the differences a case declares (``known``), which must be exactly as declared.

Normalisation, in ONE place (:func:`normalise`): the fields that legitimately differ
between two servers:

* ``throttle_time_ms``: dropped (Kafka's quotas);
* the order of a group's members (JoinGroup's and DescribeGroups' lists: Kafka keeps
  members in a hash map, so its order is no order): sorted by their placeholders; the
  order of DeleteGroups' results (Kafka answers group by group as its coordinator's
  shards finish): sorted by group id;
* node ids, hosts and ports (Kafka is node 1 on its port, offsetlog node 0 on another):
  ``NODE``, ``HOST``, ``PORT``;
* generated member ids (Kafka: ``client-id-UUID``) and producer ids (allocated from a
  counter each server keeps): placeholders ``M1``, ``M2``... / ``P1``... in order of
  appearance within the session;
* topic ids and the cluster id (random per server): ``TOPIC_ID`` / ``CLUSTER``;
* timestamps (transaction start): ``TS``;
* error messages (Kafka's free text): ``MESSAGE`` when there is one;
* the order of a consumer-group member's subscribed topic names in ConsumerGroupDescribe
  and of the topics of an assignment (Kafka keeps them in hash sets and maps by topic id):
  sorted.

A :class:`Req` whose answer carries a RETRIABLE error is sent again, as clients do (Kafka's
coordinators load their partitions after start-up; its transactions answer
CONCURRENT_TRANSACTIONS while their markers are written); the first answers of such
retries are kept in the context (``_retried``: step's answer index -> first answer).
"""

from __future__ import annotations

import dataclasses
import datetime
import enum
import socket
import struct
import time
import uuid
from typing import Any, Callable

from support.wire_raw import frame

#: fields dropped from every answer
DROPPED = {"throttle_time_ms", "throttle_time"}
#: fields holding node ids (a single id or a list of them)
NODE_FIELDS = {"node_id", "leader_id", "replica_nodes", "isr_nodes", "offline_replicas",
               "controller_id", "eligible_leader_replicas", "last_known_elr",
               "coordinator_id", "leader"}
#: fields holding member ids
MEMBER_FIELDS = {"member_id", "leader", "memberid"}
#: errors every client answers by sending the request again (a coordinator still loading
#: its partition after start-up; a transaction still writing its markers)
RETRIABLE = {14, 15, 16, 51}  # COORDINATOR_LOAD_IN_PROGRESS, COORDINATOR_NOT_AVAILABLE,
#                               NOT_COORDINATOR, CONCURRENT_TRANSACTIONS
TIMESTAMPS = {"transaction_start_time_ms", "timestamp", "commit_timestamp"}
#: lists Kafka keeps in hash sets and maps, so their order is no order: compared sorted
#: (an assignment's topics: ConsumerGroupHeartbeat's and ConsumerGroupDescribe's)
UNORDERED_FIELDS = {"subscribed_topic_names", "topic_partitions"}


@dataclasses.dataclass
class Req:
    """Send a request and read its answer."""
    api: int
    version: int
    body: dict
    conn: str = "a"
    save: dict | None = None  #: name -> callable(answer) stored in the context (or KEEP)
    retry: bool = True  #: send again while the answer has a RETRIABLE error


@dataclasses.dataclass
class Send:
    """Send a request whose answer comes later (a parked JoinGroup / SyncGroup)."""
    api: int
    version: int
    body: dict
    conn: str = "a"


@dataclasses.dataclass
class Poll:
    """Send a request again until ``until(answer)`` holds (at most ``timeout`` s): waits for
    a state another connection's request brings about (Kafka handles connections on
    several threads, so a request sent on one may not be seen yet by the next on another).
    The last answer is the step's."""
    api: int
    version: int
    body: dict
    until: Callable[[Any], bool]
    conn: str = "a"
    timeout: float = 15.0
    save: dict | None = None


@dataclasses.dataclass
class Recv:
    """Read the answer to the request ``conn`` sent last (with :class:`Send`)."""
    conn: str = "a"
    save: dict | None = None


Step = Req | Send | Recv | Poll

#: what a ``save`` callable returns to leave the context's value as it was (a refused
#: heartbeat's answer carries no epoch to remember)
KEEP = object()


def _save(ctx: dict, save: dict | None, answer: Any) -> None:
    for name, get in (save or {}).items():
        value = get(answer)
        if value is not KEEP:
            ctx[name] = value


class _Conn:
    def __init__(self, port: int, login: Callable[[socket.socket], None] | None = None) -> None:
        self.sock = socket.create_connection(("127.0.0.1", port), timeout=20)
        self.sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        if login is not None:
            login(self.sock)
        self.pending: list[tuple[int, int, int]] = []
        self.next_id = 1

    def send(self, api: int, version: int, body: dict) -> None:
        cid = self.next_id
        self.next_id += 1
        self.sock.sendall(frame(api, version, correlation_id=cid, **body))
        self.pending.append((api, version, cid))

    def recv(self):
        from kio.index import load_response_schema
        from kio.serial import entity_reader

        api, version, cid = self.pending.pop(0)
        size = struct.unpack(">i", self._exactly(4))[0]
        data = self._exactly(size)
        schema = load_response_schema(api, version)
        header, at = entity_reader(schema.__header_schema__)(data, 0)
        assert header.correlation_id == cid, (header.correlation_id, cid)
        return entity_reader(schema)(data, at)[0]

    def _exactly(self, n: int) -> bytes:
        out = b""
        while len(out) < n:
            chunk = self.sock.recv(n - len(out))
            if not chunk:
                raise ConnectionError("closed by the server")
            out += chunk
        return out

    def close(self) -> None:
        self.sock.close()


def _errors(value: Any) -> set[int]:
    """Every error code in an answer."""
    out: set[int] = set()
    if dataclasses.is_dataclass(value):
        for f in dataclasses.fields(value):
            v = getattr(value, f.name)
            if f.name == "error_code":
                out.add(int(v))
            elif isinstance(v, tuple) or dataclasses.is_dataclass(v):
                out |= _errors(v)
    elif isinstance(value, tuple):
        for v in value:
            out |= _errors(v)
    return out


def _resolve(value: Any, ctx: dict) -> Any:
    if callable(value):
        return value(ctx)
    if isinstance(value, dict):
        return {k: _resolve(v, ctx) for k, v in value.items()}
    if isinstance(value, list):
        return [_resolve(v, ctx) for v in value]
    return value


def run(port: int, steps: list[Step], *,
        login: Callable[[socket.socket], None] | None = None) -> tuple[list, dict]:
    """Drive one target through ``steps``: (raw answers in step order, context).
    ``login(sock)``: run on each new connection first (SASL: support/sasl_raw.py)."""
    conns: dict[str, _Conn] = {}
    ctx: dict = {}
    answers = []
    try:
        for step in steps:
            conn = conns.get(step.conn) or conns.setdefault(step.conn, _Conn(port, login))
            if isinstance(step, Poll):
                deadline = time.monotonic() + step.timeout
                while True:
                    conn.send(step.api, step.version, _resolve(step.body, ctx))
                    answer = conn.recv()
                    if step.until(answer):
                        break
                    if time.monotonic() > deadline:
                        raise AssertionError(f"Poll: never true on port {port}: {answer}")
                    time.sleep(0.02)
                answers.append(answer)
                _save(ctx, step.save, answer)
                continue
            if isinstance(step, (Req, Send)):
                conn.send(step.api, step.version, _resolve(step.body, ctx))
                if isinstance(step, Send):
                    continue
            answer = conn.recv()
            if isinstance(step, Req) and step.retry:
                deadline = time.monotonic() + 20
                while _errors(answer) & RETRIABLE and time.monotonic() < deadline:
                    # what every client does with these: ask again
                    ctx.setdefault("_retried", {}).setdefault(len(answers), answer)
                    time.sleep(0.05)
                    conn.send(step.api, step.version, _resolve(step.body, ctx))
                    answer = conn.recv()
            answers.append(answer)
            _save(ctx, step.save, answer)
    finally:
        for c in conns.values():
            c.close()
    return answers, ctx


class _Names:
    """Placeholders for generated ids, in order of appearance."""

    def __init__(self) -> None:
        self.seen: dict[tuple[str, Any], str] = {}

    def __call__(self, kind: str, value: Any) -> str:
        key = (kind, value)
        if key not in self.seen:
            self.seen[key] = f"{kind}{sum(1 for k in self.seen if k[0] == kind) + 1}"
        return self.seen[key]


def normalise(answers: list) -> list:
    """The answers of one session as plain values, with what legitimately differs replaced
    (see the module's docstring). Member and producer ids are numbered across the session."""
    names = _Names()
    return [_sort_members(_norm(a, None, names)) for a in answers]


def _sort_members(tree: Any) -> Any:
    if isinstance(tree, dict):
        for k, v in tree.items():
            _sort_members(v)
            if k == "members" and isinstance(v, list) and all(isinstance(m, dict) for m in v):
                v.sort(key=lambda m: (str(m.get("member_id")), str(m.get("group_instance_id"))))
            if k == "results" and isinstance(v, list) and all(
                    isinstance(r, dict) and "group_id" in r for r in v):
                v.sort(key=lambda r: r["group_id"])
    elif isinstance(tree, list):
        for v in tree:
            _sort_members(v)
    return tree


def _norm(value: Any, field: str | None, names: _Names) -> Any:
    if dataclasses.is_dataclass(value) and not isinstance(value, type):
        out = {}
        for f in dataclasses.fields(value):
            if f.name in DROPPED:
                continue
            out[f.name] = _norm(getattr(value, f.name), f.name, names)
        return out
    if isinstance(value, (tuple, list)):
        out = [_norm(v, field, names) for v in value]
        return sorted(out, key=repr) if field in UNORDERED_FIELDS else out
    if isinstance(value, enum.Enum):
        return value.name.upper()
    if isinstance(value, datetime.datetime):  # a timestamp (kio decodes them)
        return "TS"
    if isinstance(value, datetime.timedelta):
        value = round(value.total_seconds() * 1000)
    if isinstance(value, uuid.UUID):
        return "ZERO_UUID" if value.int == 0 else "TOPIC_ID"
    if field is None:
        return value
    if field in MEMBER_FIELDS and isinstance(value, str):
        return names("M", value) if value else value
    if field in NODE_FIELDS and isinstance(value, int):
        return "NODE" if value >= 0 else value
    if field == "host":
        return "HOST"
    if field == "port":
        return "PORT"
    if field == "cluster_id":
        return "CLUSTER" if value is not None else None
    if field == "producer_id" and isinstance(value, int):
        return names("P", value) if value >= 0 else value
    if field in TIMESTAMPS and isinstance(value, int):
        return "TS" if value >= 0 else value
    if field == "error_message":
        return "MESSAGE" if value else value
    return value


def at(tree: Any, path: str) -> Any:
    """The value at a dotted path (``2.groups.0.error_code``) of normalised answers."""
    for part in path.split("."):
        tree = tree[int(part)] if isinstance(tree, list) else tree[part]
    return tree


def _put(tree: Any, path: str, value: Any) -> None:
    parts = path.split(".")
    for part in parts[:-1]:
        tree = tree[int(part)] if isinstance(tree, list) else tree[part]
    last = parts[-1]
    if isinstance(tree, list):
        tree[int(last)] = value
    else:
        tree[last] = value


def diff(a: Any, b: Any, path: str = "") -> list[str]:
    """Every path where ``a`` and ``b`` differ, with both values."""
    if isinstance(a, dict) and isinstance(b, dict):
        out = []
        for k in list(a) + [k for k in b if k not in a]:
            out += diff(a.get(k, "<absent>"), b.get(k, "<absent>"), f"{path}.{k}" if path else k)
        return out
    if isinstance(a, list) and isinstance(b, list) and len(a) == len(b):
        out = []
        for i, (x, y) in enumerate(zip(a, b)):
            out += diff(x, y, f"{path}.{i}" if path else str(i))
        return out
    return [] if a == b else [f"{path}: kafka={a!r} offsetlog={b!r}"]


def compare(kafka_port: int, ours_port: int, steps: list[Step], *,
            known: dict[str, tuple[Any, Any]] | None = None,
            check: Callable[[list], None] | None = None,
            view: Callable[[list], list] | None = None,
            whole: Callable[[list], list] | None = None) -> list:
    """Run ``steps`` on Kafka, then on offsetlog, and assert the normalised answers are
    equal; ``known``: path -> (Kafka's value, offsetlog's value), the declared differences
    (docs/PROTOCOL.md), asserted exactly. ``check(kafka_answers)``: what the case is about,
    asserted on Kafka's answers so a case cannot pass by both targets saying nothing.
    ``view(answers)``: the part of the answers compared (ListGroups lists every group).
    ``whole(answers)``: a second, wider part compared too, where ``view`` is the shape the
    case's checks read. Returns Kafka's normalised answers (its ``view``)."""
    kafka = normalise(run(kafka_port, steps)[0])
    ours = normalise(run(ours_port, steps)[0])
    if whole is not None:
        problems = diff(whole(kafka), whole(ours))
        assert not problems, ("offsetlog answers differently from Kafka:\n  "
                              + "\n  ".join(problems))
    if view is not None:  # what of the answers the case compares (e.g. its own groups)
        kafka, ours = view(kafka), view(ours)
    for path, (k, o) in (known or {}).items():
        found = (at(kafka, path), at(ours, path))
        assert found == (k, o), f"declared difference at {path}: (kafka, offsetlog) = {found!r}"
        _put(ours, path, k)
    problems = diff(kafka, ours)
    assert not problems, "offsetlog answers differently from Kafka:\n  " + "\n  ".join(problems)
    if check is not None:
        check(kafka)
    return kafka
