"""The wire case of ``offsetlog bench``: commits over Kafka's protocol against the least a
durable server can be on this machine, in the same run (issue 27's goals).

* the floor (``wire_floors.serve_floor``): a child process with a thread per connection
  that writes each request to the connection's own preallocated file with one ``RWF_DSYNC``
  write and answers; no decoding, no table, no answer to build: what loopback TCP and the
  disk allow;
* throughput: 32 clients, each with its own connection to ``offsetlog serve`` (a child
  process), a group of its own and one OffsetCommit round-trip per commit, against the
  floor with the same clients (goal: >= 0.9x); and with 1,000 idle connections open beside
  them, against the 32 alone on the same server, in pairs of windows (``idle_pairs``; goal:
  >= 0.9x);
* latency: p50 of one client's OffsetCommit round-trips over loopback against the floor's
  (goal: <= 1.15x);
* for information: both against embedded ``commit_sync`` (32 threads; one thread's p50),
  the Python floor (``wire_floors.serve_python_floor``: the floor's threads, each request decoded with
  kio and committed with the store's ``commit_sync``), the server's CPU per commit (user and
  system microseconds, from /proc, over the measured window), and the load generator's own
  ceiling: the same clients against a server that answers at once and writes nothing
  (``serve_echo``), so the throughput rows measure servers, not the generator; and the
  compiled floor (bench/floor.c): the floor's work with no interpreter at all.

The clients send requests kio encoded before the clock starts (one per partition, offsets
fixed: the store writes and fsyncs each commit whatever its value) and read each answer's
bytes, so the figures are the server's, not a client library's. The 32 connections are
driven by one thread with a selector (``drive``), each with one request in flight: the
server decodes every request and commits it through the store's group commit
(``fsync="always"``) before answering.
"""

from __future__ import annotations

import os
import socket
import struct
import subprocess
import sys
import time

from offsetlog.bench import cases
from offsetlog.bench.common import case_dir, median, percentile
from offsetlog.bench.report import HIGHER, LOWER, Row
from offsetlog.bench.wire_floors import CompiledFloor, Floor, compiled_floor, exactly

TOPIC = "bench"
CLIENTS = 32
#: connections opened and left idle beside the committing ones (the idle case)
IDLE = 1000


def _frame(api_key: int, version: int, correlation_id: int, **body) -> bytes:
    """A request frame, encoded by kio before any clock starts."""
    import io

    from kio.index import load_request_schema
    from kio.serial import entity_writer

    from offsetlog.server.codec import build

    schema = load_request_schema(api_key, version)
    header = schema.__header_schema__
    buf = io.BytesIO()
    entity_writer(header)(buf, header(request_api_key=api_key, request_api_version=version,
                                      correlation_id=correlation_id, client_id="bench"))
    entity_writer(schema)(buf, build(schema, **body))
    data = buf.getvalue()
    return struct.pack(">i", len(data)) + data


def _commit_frame(group: str, partition: int, offset: int, correlation_id: int,
                  leader_epoch: int = -1) -> bytes:
    return _frame(8, 8, correlation_id, group_id=group, generation_id_or_member_epoch=-1,
                  member_id="", group_instance_id=None, topics=[dict(name=TOPIC, partitions=[
                      dict(partition_index=partition, committed_offset=offset,
                           committed_leader_epoch=leader_epoch, committed_metadata="")])])


def _call(sock: socket.socket, api_key: int, version: int, **body):
    """One request's answer, decoded by kio (setting up, not measured)."""
    return _answer(sock, _frame(api_key, version, 0, **body), api_key, version)


def _answer(sock: socket.socket, frame: bytes, api_key: int, version: int):
    """The answer to ``frame`` (API ``api_key`` at ``version``), decoded by kio; an error in
    it raises (a request answered with one would time nothing worth timing)."""
    from kio.index import load_response_schema
    from kio.serial import entity_reader

    sock.sendall(frame)
    data = exactly(sock, struct.unpack(">i", exactly(sock, 4))[0])
    schema = load_response_schema(api_key, version)
    _, at = entity_reader(schema.__header_schema__)(data, 0)
    answer, _ = entity_reader(schema)(data, at)
    codes = {getattr(answer, "error_code", 0)} | {
        p.error_code for t in getattr(answer, "topics", ()) for p in t.partitions}
    if codes != {0}:
        raise RuntimeError(f"API {api_key} answered {answer!r}")
    return answer


def _member_frames(sock: socket.socket, group: str) -> tuple[bytes, bytes]:
    """Make the connection the only member of ``group`` (JoinGroup v3, which needs no member
    id first; SyncGroup as its leader) and return the Heartbeat (v3) a stable member sends
    and its OffsetCommit (v8, generation and member id: a consumer group client's commit)."""
    from offsetlog.group.consumer_protocol import encode_assignment, encode_subscription

    join = _call(sock, 11, 3, group_id=group, session_timeout=60_000,
                 rebalance_timeout=60_000, member_id="", protocol_type="consumer",
                 protocols=[dict(name="range", metadata=encode_subscription([TOPIC]))])
    _call(sock, 14, 3, group_id=group, generation_id=join.generation_id,
          member_id=join.member_id, assignments=[dict(
              member_id=join.member_id, assignment=encode_assignment([]))])
    beat = _frame(12, 3, 2, group_id=group, generation_id=join.generation_id,
                  member_id=join.member_id, group_instance_id=None)
    commit = _frame(8, 8, 3, group_id=group, generation_id_or_member_epoch=join.generation_id,
                    member_id=join.member_id, group_instance_id=None,
                    topics=[dict(name=TOPIC, partitions=[dict(
                        partition_index=0, committed_offset=2000, committed_leader_epoch=-1,
                        committed_metadata="")])])
    return beat, commit


def _txn_frame(sock: socket.socket, apart_from: str) -> bytes:
    """Open a transaction (InitProducerId v1, AddOffsetsToTxn v1) for a group of a log
    partition other than ``apart_from``'s (pending transactional offsets put the plain
    commits of their partition off the table's fast apply) and return the TxnOffsetCommit
    (v3) its producer sends, a transactional producer's usual commit, committed once."""
    from offsetlog.partitioner import partition_for
    from offsetlog.store.config import StoreConfig

    n = StoreConfig().partitions  # (the served store's: offsets.topic.num.partitions')
    group = next(g for g in (f"bench-txn-{i}" for i in range(100))
                 if partition_for(g, n) != partition_for(apart_from, n))
    init = _call(sock, 22, 1, transactional_id="bench-txn", transaction_timeout=600_000)
    producer = dict(transactional_id="bench-txn", producer_id=init.producer_id,
                    producer_epoch=init.producer_epoch)
    _call(sock, 25, 1, group_id=group, **producer)
    commit = _frame(28, 3, 4, group_id=group, generation_id=-1, member_id="",
                    group_instance_id=None, topics=[dict(name=TOPIC, partitions=[dict(
                        partition_index=0, committed_offset=3000, committed_leader_epoch=-1,
                        committed_metadata="")])], **producer)
    _answer(sock, commit, 28, 3)
    return commit


def _recv_answer(sock: socket.socket) -> None:
    size = struct.unpack(">i", exactly(sock, 4))[0]
    exactly(sock, size)


class _Server:
    """``offsetlog serve`` as a child process (with the store's ``fsync`` when given)."""

    def __init__(self, directory: str, fsync: str | None = None,
                 config: tuple[str, ...] = ()) -> None:
        self.proc = subprocess.Popen(
            [sys.executable, "-m", "offsetlog", "serve", directory, "--listen",
             "127.0.0.1:0", "--topic", f"{TOPIC}:{CLIENTS}"]
            + (["--fsync", fsync] if fsync else [])
            + [arg for item in config for arg in ("--config", item)],
            stderr=subprocess.PIPE, text=True)
        line = self.proc.stderr.readline()
        if not line.startswith("listening on "):
            self.proc.kill()
            raise RuntimeError(f"offsetlog serve did not start: {line!r}")
        self.port = int(line.rsplit(":", 1)[1])

    def close(self) -> None:
        self.proc.terminate()
        self.proc.wait(30)


def wire_throughput(directory: str, *, duration_s: float, warmup_s: float,
                    floor: str | None = None) -> tuple[float, float, float]:
    """``(commits/s, user us, system us per commit of the server process)`` of CLIENTS
    connections, each committing one offset per round-trip (to a floor server instead:
    ``floor`` is ``"--floor"``, ``"--python-floor"``, ``"--echo"``, or the compiled floor's
    binary)."""
    server = (_Server(directory) if not floor else Floor(directory, floor)
              if floor.startswith("--") else CompiledFloor(directory, floor))
    try:
        frames = [_commit_frame(f"bench-{i}", i, 1000 + i, i) for i in range(CLIENTS)]
        cpu: list = []
        rate, count = drive(server.port, frames, duration_s=duration_s, warmup_s=warmup_s,
                            on_window=lambda: cpu.append(_cpu_us(server.proc.pid)))
        (u0, s0), (u1, s1) = cpu
        return rate, (u1 - u0) / count, (s1 - s0) / count
    finally:
        server.close()


def idle_pairs(directory: str, *, duration_s: float, warmup_s: float,
               pairs: int) -> list[tuple[float, float]]:
    """``(commits/s of CLIENTS connections alone, the same beside IDLE idle ones)``, ``pairs``
    times, on one ``offsetlog serve``: the two windows of a pair in alternating order, the
    idle connections opened (and answered once) before each window of theirs and closed
    after it, the server's threads back to their count before the next window. What idle
    connections cost committing ones, without the machine's drift between servers and each
    server's start in the ratio (which moved it 0.71-1.12x between runs when every window
    had a server of its own; on one server the pairs read 0.80-1.15x, median 1.0)."""
    server = _Server(directory)
    frames = [_commit_frame(f"bench-{i}", i, 1000 + i, i) for i in range(CLIENTS)]
    out = []
    try:
        threads = _threads(server.proc.pid)
        for i in range(pairs):
            got = {}
            for idle in ((0, IDLE) if i % 2 == 0 else (IDLE, 0)):
                quiet = [socket.create_connection(("127.0.0.1", server.port))
                         for _ in range(idle)]
                try:
                    _answered_once(quiet)
                    got[idle] = drive(server.port, frames, duration_s=duration_s,
                                      warmup_s=warmup_s)
                finally:
                    for sock in quiet:
                        sock.close()
                _settle(server.proc.pid, threads)
            out.append((got[0], got[IDLE]))
    finally:
        server.close()
    return out


def _threads(pid: int) -> int:
    with open(f"/proc/{pid}/status") as f:
        return next(int(line.split()[1]) for line in f if line.startswith("Threads:"))


def _settle(pid: int, threads: int, timeout_s: float = 30.0) -> None:
    """Wait until process ``pid`` has at most ``threads`` threads again (its connections'
    threads gone), so that their ending is not in the next window."""
    deadline = time.monotonic() + timeout_s
    while _threads(pid) > threads and time.monotonic() < deadline:
        time.sleep(0.05)


def _answered_once(socks: list[socket.socket]) -> None:
    """One ApiVersions round-trip on each of ``socks``: the server has taken every one of
    them up (a connection accepted by the kernel may not be the server's yet), so the idle
    case's window measures idle connections, not their setting up."""
    client = b"bench"
    request = struct.pack(">hhih", 18, 0, 0, len(client)) + client
    for sock in socks:
        sock.sendall(struct.pack(">i", len(request)) + request)
    for sock in socks:
        _recv_answer(sock)


def _cpu_us(pid: int) -> tuple[float, float]:
    """(user, system) CPU microseconds process ``pid`` has used (its threads included)."""
    with open(f"/proc/{pid}/stat") as f:
        fields = f.read().rsplit(")", 1)[1].split()
    tick = os.sysconf("SC_CLK_TCK")
    return int(fields[11]) * 1e6 / tick, int(fields[12]) * 1e6 / tick


def drive(port: int, frames: list[bytes], *, duration_s: float, warmup_s: float,
          on_window=None):
    """Round-trips/s of ``len(frames)`` connections to ``port``, each sending its frame,
    reading the whole answer, and only then sending again (one request in flight each).
    With ``on_window``, it is called as the measured window starts and as it ends, and
    ``(round-trips/s, round-trips)`` is returned.

    One thread drives them all with a selector. The first version ran a thread per
    connection: 32 client threads of this process then fought for the GIL on a 2-core
    machine, shared with the server, and their wake-ups were measured along with it.
    """
    import selectors

    sel = selectors.DefaultSelector()
    socks = []
    try:
        for frame in frames:
            sock = socket.create_connection(("127.0.0.1", port))
            sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
            sock.setblocking(False)
            socks.append(sock)
            sel.register(sock, selectors.EVENT_READ, (frame, bytearray()))
        for sock, frame in zip(socks, frames):
            sock.send(frame)
        count = 0
        t0 = time.perf_counter()
        start = t0 + warmup_s
        end = start + duration_s
        measuring = False
        now = t0
        while now < end:
            if not measuring and now >= start:
                measuring, count, t0 = True, 0, now
                if on_window is not None:
                    on_window()
            for key, _ in sel.select(0.5):
                sock = key.fileobj
                frame, buf = key.data
                chunk = sock.recv(65536)
                if not chunk:
                    raise ConnectionError("server closed the connection")
                buf += chunk
                while len(buf) >= 4:
                    size = struct.unpack_from(">i", buf)[0]
                    if len(buf) < 4 + size:
                        break
                    del buf[:4 + size]
                    count += 1
                    sock.send(frame)  # a few dozen bytes: the socket buffer always takes it
            now = time.perf_counter()
        if on_window is None:
            return count / (now - t0)
        on_window()
        return count / (now - t0), count
    finally:
        sel.close()
        for sock in socks:
            sock.close()


def latencies_ns(directory: str, *, count: int, warmup: int, rounds: int,
                 compiled: str | None = None) -> dict[str, list[int]]:
    """Round-trip times by name: one client's commits to ``offsetlog serve`` ("wire"), one
    thread's embedded ``commit_sync`` calls ("embedded"), the client's round-trips to the
    floor servers ("floor", "python": ``serve_floor``, ``serve_python_floor``), and, for
    information, a stable member's heartbeats to ``offsetlog serve`` ("heartbeat": a group
    call that writes nothing) against the same frame to a server that answers at once
    ("echo": ``serve_echo``), OffsetFetch requests for the committed partition ("fetch": a
    read, no write, no group call), that member's own commits ("member": its generation and
    member id checked by the coordinator), a transactional producer's TxnOffsetCommits in
    its open transaction ("txn"), and the commits to the compiled floor ("compiled":
    ``compiled``, ``compiled_floor``'s binary; left out without it). The member's and the
    producer's commits take turns with a simple consumer's ("simple") after the others.

    They take turns, ``count / rounds`` calls each per round, all three running
    throughout: this disk's fsync time drifts by half from one second to the next, and
    measured one after the other the ratio followed the drift more than the server.
    """
    # (a new group's first join waits for more members: 0 ms here, as tests set it)
    server = _Server(os.path.join(directory, "served"),
                     config=("group.initial.rebalance.delay.ms=0",))
    floor = Floor(os.path.join(directory, "floor"))
    python_floor = Floor(os.path.join(directory, "python-floor"), "--python-floor")
    echo = Floor(os.path.join(directory, "echo"), "--echo")
    native = CompiledFloor(os.path.join(directory, "compiled"), compiled) if compiled else None
    store = cases.open_store(os.path.join(directory, "embedded"))
    socks = []
    try:
        for port in (server.port, floor.port, python_floor.port, server.port, echo.port,
                     server.port, server.port) + ((native.port,) if native else ()):
            sock = socket.create_connection(("127.0.0.1", port))
            sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
            socks.append(sock)
        frame = _commit_frame("bench-latency", 0, 1000, 1)
        beat, member_commit = _member_frames(socks[3], "bench-member")
        txn_commit = _txn_frame(socks[6], "bench-latency")
        fetch = _frame(9, 6, 2, group_id="bench-latency", require_stable=False,
                       topics=[dict(name=TOPIC, partition_indexes=[0])])
        ops = {"wire": lambda: _round_trip(socks[0], frame),
               "embedded": cases.commit_sync_op(store),
               "floor": lambda: _round_trip(socks[1], frame),
               "python": lambda: _round_trip(socks[2], frame),
               "heartbeat": lambda: _round_trip(socks[3], beat),
               "echo": lambda: _round_trip(socks[4], beat),
               "fetch": lambda: _round_trip(socks[5], fetch)}
        if native:
            ops["compiled"] = lambda: _round_trip(socks[7], frame)
        # The member's commits and a simple consumer's again, taking turns after the rest, so
        # that the coordinator's work cannot reach the goal rows' turns (with the member's
        # commits among them, one connection's p50 read 1.16-1.29x the floor's in three runs,
        # against 1.09-1.25x before: within this machine's noise, but nothing is lost)
        # (and a simple consumer's commits that carry a leader epoch, as Kafka's clients
        # send once they have read a record, to a group of their own)
        with_epoch = _commit_frame("bench-epoch", 0, 1000, 1, leader_epoch=7)
        after = {"member": lambda: _round_trip(socks[3], member_commit),
                 "txn": lambda: _round_trip(socks[6], txn_commit),
                 "epoch": lambda: _round_trip(socks[0], with_epoch),
                 "simple": ops["wire"]}
        out: dict[str, list[int]] = {name: [] for name in (*ops, *after)}
        per_round = max(1, count // rounds)
        for op in (*ops.values(), *after.values()):
            _timed(op, warmup, [])
        _answer(socks[3], member_commit, 8, 8)  # (the member's commit is committed)
        # (the fetch reads what the commits wrote: an answer of an error would time nothing)
        answer = _call(socks[5], 9, 6, group_id="bench-latency", require_stable=False,
                       topics=[dict(name=TOPIC, partition_indexes=[0])])
        if [p.committed_offset for t in answer.topics for p in t.partitions] != [1000]:
            raise RuntimeError(f"OffsetFetch answered {answer!r}")
        for phase in (ops, after):
            for _ in range(rounds):
                for name, op in phase.items():
                    _timed(op, per_round, out[name])
        return out
    finally:
        for sock in socks:
            sock.close()
        store.close()
        if native:
            native.close()
        echo.close()
        python_floor.close()
        floor.close()
        server.close()


def _median_latencies(data_dir: str, reps: int, **kw) -> tuple[dict[str, list[int]], list]:
    """``latencies_ns`` run ``reps`` times, each on servers and stores of its own: the run
    whose wire/floor p50 ratio is the median, and every run's ratio in order. One run's
    servers sometimes all answer slower than the others' (its Python floor 1.35x the floor
    against 1.15-1.25x, the same server's commits slower in its first phase than in its
    second), and one run then decided the goal row (bench/RESULTS.md, twentieth session)."""
    runs = []
    for _ in range(reps):
        with case_dir(data_dir, "wire-latency") as d:
            times = latencies_ns(d, **kw)
        runs.append((percentile(times["wire"], 50) / percentile(times["floor"], 50), times))
    ratios = [r for r, _ in runs]
    return sorted(runs, key=lambda run: run[0])[len(runs) // 2][1], ratios


def _round_trip(sock: socket.socket, frame: bytes) -> None:
    sock.sendall(frame)
    _recv_answer(sock)


def _timed(op, n: int, out: list[int]) -> None:
    clock = time.perf_counter_ns
    for _ in range(n):
        t0 = clock()
        op()
        out.append(clock() - t0)


def _compiled_rows(rate: dict, compiled: list[int], floor_p50: float,
                   wire_p50: float) -> list[Row]:
    """The rows against the compiled floor (none when it could not be built): what the
    hardware allows a server with no Python, beside the bench's Python floor."""
    if "compiled" not in rate:
        return []
    name = f"the compiled floor at {CLIENTS} connections (C: the same writes, no Python)"
    p50 = percentile(compiled, 50) / 1000
    note = "bench/floor.c: what the hardware allows a server that does nothing else"
    return [
        Row(f"wire: OffsetCommit from {CLIENTS} connections (for information)", name,
            rate["wire"], rate["compiled"], "commits/s", HIGHER, note=note),
        Row(f"wire: the floor at {CLIENTS} connections (for information)", name,
            rate["floor"], rate["compiled"], "commits/s", HIGHER,
            note="the Python floor the goals are set against, against the compiled one"),
        Row("wire: OffsetCommit p50 over loopback (for information)",
            "the compiled floor's p50", wire_p50, p50, "us", LOWER,
            note=f"the Python floor's p50: {floor_p50 / p50:.3f}x the compiled floor's"),
    ]


def run_wire_benchmark(data_dir: str, *, quick: bool = False) -> list[Row]:
    """The wire case's rows (called by bench/runner.py's ``wire`` case). Each repetition
    runs every server in turn, so the disk's drift is shared."""
    reps = 1 if quick else 3
    window = {"duration_s": 2.0 if quick else 3.0, "warmup_s": 0.5}
    kinds = [("wire", None), ("floor", "--floor"), ("python", "--python-floor"),
             ("echo", "--echo"), ("floor-batch", "--floor-batch")]
    got: dict[str, list] = {key: [] for key, _ in kinds}
    embedded = []
    for _ in range(reps):
        for key, floor in kinds:
            with case_dir(data_dir, f"wire-{key}") as d:
                got[key].append(wire_throughput(os.path.join(d, "store"), floor=floor,
                                                **window))
        with case_dir(data_dir, "wire-embedded") as d:
            embedded.append(cases.commit_sync_threads(os.path.join(d, "store"), CLIENTS,
                                                      one_group=False, **window))
    # The compiled floor after the rest, not between them, so that the aftermath of its
    # writes cannot reach the goal rows' servers (two runs with it in their turns had the
    # server at 16.4-16.7k commits/s, one without it at 19.1k: too few runs to tell from
    # the disk's drift, and keeping it apart costs nothing)
    binary = compiled_floor(os.path.join(data_dir, "wire-compiled-floor"))
    if binary:
        got["compiled"] = []
        for _ in range(reps):
            with case_dir(data_dir, "wire-compiled") as d:
                got["compiled"].append(wire_throughput(os.path.join(d, "store"),
                                                       floor=binary, **window))
    with case_dir(data_dir, "wire-idle") as d:
        pairs = idle_pairs(os.path.join(d, "store"), pairs=2 if quick else 4, **window)
    rate = {k: median([r for r, _, _ in v]) for k, v in got.items()}
    cpu = {k: (median([u for _, u, _ in v]), median([y for _, _, y in v]))
           for k, v in got.items()}
    count, warmup = (600, 50) if quick else (3000, 100)
    times, ratios = _median_latencies(data_dir, reps, count=count, warmup=warmup,
                                      rounds=6 if quick else 20, compiled=binary)
    over_wire, inside, floor = times["wire"], times["embedded"], times["floor"]
    wire_p50, floor_p50 = percentile(over_wire, 50) / 1000, percentile(floor, 50) / 1000
    floor_name = f"the floor at {CLIENTS} connections: one DSYNC write per request"
    return [
        Row(f"wire: OffsetCommit from {CLIENTS} connections", floor_name, rate["wire"],
            rate["floor"], "commits/s", HIGHER, target=0.9,
            note=f"median of {reps}; the floor: a thread per connection, its own file, "
                 "nothing else: what loopback TCP and the disk allow"),
        Row("wire: OffsetCommit p50 over loopback, one connection",
            "the floor's p50", wire_p50, floor_p50, "us", LOWER, target=1.15,
            note=f"{len(over_wire)} commits each, taking turns; the median of {reps} runs "
                 f"(every latency row is that run's), their ratios "
                 + ", ".join(f"{r:.3f}" for r in ratios)),
        Row(f"wire: {CLIENTS} committing connections beside {IDLE} idle ones",
            f"the {CLIENTS} alone", median([b for _, b in pairs]),
            median([a for a, _ in pairs]), "commits/s", HIGHER, target=0.9,
            note=f"one server, medians of {len(pairs)} windows each, in pairs of alternating "
                 "order (idle_pairs); the pairs' ratios "
                 + ", ".join(f"{b / a:.3f}" for a, b in pairs)),
        Row(f"wire: OffsetCommit from {CLIENTS} connections (for information)",
            f"{CLIENTS} threads of embedded commit_sync", rate["wire"], median(embedded),
            "commits/s", HIGHER),
        Row("wire: OffsetCommit p50 over loopback (for information)",
            "embedded commit_sync p50", wire_p50, percentile(inside, 50) / 1000, "us", LOWER),
        Row("wire: server CPU per commit, user (for information)",
            "the floor's", cpu["wire"][0], cpu["floor"][0], "us", LOWER,
            note=f"at {CLIENTS} connections; system: {cpu['wire'][1]:.1f} us "
                 f"(the floor's {cpu['floor'][1]:.1f} us)"),
        Row(f"wire: the Python floor at {CLIENTS} connections: kio decode + commit_sync",
            floor_name, rate["python"], rate["floor"], "commits/s", HIGHER,
            note="a thread per connection: decode, the store's commit, a fixed answer"),
        Row("wire: the Python floor's p50", "the floor's p50",
            percentile(times["python"], 50) / 1000, floor_p50, "us", LOWER),
        Row("wire: Heartbeat p50 over loopback, a stable member (for information)",
            "a server that answers at once", percentile(times["heartbeat"], 50) / 1000,
            percentile(times["echo"], 50) / 1000, "us", LOWER,
            note="a group call that writes nothing: answered in the connection's thread"),
        Row("wire: OffsetFetch p50 over loopback, one committed partition (for information)",
            "a server that answers at once", percentile(times["fetch"], 50) / 1000,
            percentile(times["echo"], 50) / 1000, "us", LOWER,
            note="a read: the group's offsets from its partition's table"),
        Row("wire: a group member's OffsetCommit p50 over loopback (for information)",
            "a simple consumer's, taking turns with it", percentile(times["member"], 50) / 1000,
            percentile(times["simple"], 50) / 1000, "us", LOWER,
            note="generation and member id: the coordinator's check, in the commit's lock "
                 "hold, as every consumer group client's commit takes it"),
        Row("wire: a transactional producer's TxnOffsetCommit p50 over loopback "
            "(for information)", "a simple consumer's OffsetCommit, taking turns with it",
            percentile(times["txn"], 50) / 1000, percentile(times["simple"], 50) / 1000, "us",
            LOWER, note="in its open transaction, its group already added: written pending, "
                        "checked against the store's board of open transactions"),
        Row("wire: OffsetCommit p50 over loopback, offsets with a leader epoch "
            "(for information)", "a simple consumer's without, taking turns with it",
            percentile(times["epoch"], 50) / 1000, percentile(times["simple"], 50) / 1000,
            "us", LOWER, note="committed_leader_epoch 7: what Kafka's clients commit once "
                              "they have read a record"),
        Row(f"wire: OffsetCommit from {CLIENTS} connections (for information)",
            "the floor with its threads under SCHED_BATCH, as offsetlog serve's",
            rate["wire"], rate["floor-batch"], "commits/s", HIGHER,
            note="the floor under the policy offsetlog serve's connection threads take "
                 "(connection.no_wakeup_preemption)"),
        *_compiled_rows(rate, times.get("compiled", []), floor_p50, wire_p50),
        Row(f"wire: the load generator's ceiling at {CLIENTS} connections", floor_name,
            rate["echo"], rate["floor"], "commits/s", HIGHER,
            note="a server that answers at once and writes nothing: far above the floor, "
                 "the generator is not what the rows above measure"),
    ]


if __name__ == "__main__":
    import tempfile

    for row in run_wire_benchmark(tempfile.mkdtemp(), quick="--quick" in sys.argv):
        print(row.case, "|", row.offsetlog, "vs", row.baseline_value, row.unit,
              "ratio", row.ratio)
