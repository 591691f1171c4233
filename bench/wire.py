"""The wire case of ``offsetlog bench``: commits over Kafka's protocol against embedded ones,
in the same run.

* throughput: 32 clients, each with its own connection to ``offsetlog serve`` (a child
  process) and one OffsetCommit round-trip per commit, against 32 threads of embedded
  ``commit_sync`` (goal: >= 0.5x);
* latency: p50 of one client's OffsetCommit round-trips over loopback against one thread's
  embedded ``commit_sync`` (goal: <= 1.5x).

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

TOPIC = "bench"
CLIENTS = 32


def _commit_frame(group: str, partition: int, offset: int, correlation_id: int) -> bytes:
    import io

    from kio.index import load_request_schema
    from kio.serial import entity_writer

    from offsetlog.server.codec import build

    schema = load_request_schema(8, 8)
    header = schema.__header_schema__
    buf = io.BytesIO()
    entity_writer(header)(buf, header(request_api_key=8, request_api_version=8,
                                      correlation_id=correlation_id, client_id="bench"))
    entity_writer(schema)(buf, build(
        schema, group_id=group, generation_id_or_member_epoch=-1, member_id="",
        group_instance_id=None, topics=[dict(name=TOPIC, partitions=[dict(
            partition_index=partition, committed_offset=offset, committed_leader_epoch=-1,
            committed_metadata="")])]))
    data = buf.getvalue()
    return struct.pack(">i", len(data)) + data


def _recv_answer(sock: socket.socket) -> None:
    size = struct.unpack(">i", _exactly(sock, 4))[0]
    _exactly(sock, size)


def _exactly(sock: socket.socket, n: int) -> bytes:
    out = b""
    while len(out) < n:
        chunk = sock.recv(n - len(out))
        if not chunk:
            raise ConnectionError("server closed the connection")
        out += chunk
    return out


class _Server:
    def __init__(self, directory: str) -> None:
        self.proc = subprocess.Popen(
            [sys.executable, "-m", "offsetlog", "serve", directory, "--listen",
             "127.0.0.1:0", "--topic", f"{TOPIC}:{CLIENTS}"], stderr=subprocess.PIPE, text=True)
        line = self.proc.stderr.readline()
        if not line.startswith("listening on "):
            self.proc.kill()
            raise RuntimeError(f"offsetlog serve did not start: {line!r}")
        self.port = int(line.rsplit(":", 1)[1])

    def close(self) -> None:
        self.proc.terminate()
        self.proc.wait(30)


def wire_throughput(directory: str, *, duration_s: float, warmup_s: float) -> float:
    """Commits/s of CLIENTS connections, each committing one offset per round-trip."""
    server = _Server(directory)
    try:
        frames = [_commit_frame(f"bench-{i}", i, 1000 + i, i) for i in range(CLIENTS)]
        return drive(server.port, frames, duration_s=duration_s, warmup_s=warmup_s)
    finally:
        server.close()


def drive(port: int, frames: list[bytes], *, duration_s: float, warmup_s: float) -> float:
    """Round-trips/s of ``len(frames)`` connections to ``port``, each sending its frame,
    reading the whole answer, and only then sending again (one request in flight each).

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
        return count / (now - t0)
    finally:
        sel.close()
        for sock in socks:
            sock.close()


def wire_latency_ns(directory: str, *, count: int, warmup: int) -> list[int]:
    """Round-trip times of one client's commits, one after the other."""
    server = _Server(directory)
    try:
        frame = _commit_frame("bench-latency", 0, 1000, 1)
        out = []
        with socket.create_connection(("127.0.0.1", server.port)) as sock:
            sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
            for i in range(warmup + count):
                t0 = time.perf_counter_ns()
                sock.sendall(frame)
                _recv_answer(sock)
                if i >= warmup:
                    out.append(time.perf_counter_ns() - t0)
        return out
    finally:
        server.close()


def embedded_latency_ns(directory: str, *, count: int, warmup: int) -> list[int]:
    store = cases.open_store(directory)
    try:
        op = cases.commit_sync_op(store)
        out = []
        for i in range(warmup + count):
            t0 = time.perf_counter_ns()
            op()
            if i >= warmup:
                out.append(time.perf_counter_ns() - t0)
        return out
    finally:
        store.close()


def run_wire_benchmark(data_dir: str, *, quick: bool = False) -> list[Row]:
    """The wire case's rows (called by bench/runner.py's ``wire`` case)."""
    reps = 1 if quick else 3
    window = {"duration_s": 2.0 if quick else 3.0, "warmup_s": 0.5}
    wire, embedded = [], []
    for _ in range(reps):
        with case_dir(data_dir, "wire-throughput") as d:
            wire.append(wire_throughput(os.path.join(d, "store"), **window))
        with case_dir(data_dir, "wire-embedded") as d:
            embedded.append(cases.commit_sync_threads(os.path.join(d, "store"), CLIENTS,
                                                      one_group=False, **window))
    count, warmup = (500, 50) if quick else (2000, 100)
    with case_dir(data_dir, "wire-latency") as d:
        over_wire = wire_latency_ns(os.path.join(d, "store"), count=count, warmup=warmup)
    with case_dir(data_dir, "wire-latency-embedded") as d:
        inside = embedded_latency_ns(os.path.join(d, "store"), count=count, warmup=warmup)
    return [
        Row(f"wire: OffsetCommit from {CLIENTS} connections", f"{CLIENTS} threads of "
            "embedded commit_sync", median(wire), median(embedded), "commits/s", HIGHER,
            target=0.5, note=f"median of {reps}"),
        Row("wire: OffsetCommit p50 over loopback", "embedded commit_sync p50",
            percentile(over_wire, 50) / 1000, percentile(inside, 50) / 1000, "us", LOWER,
            target=1.5, note=f"{count} commits each"),
    ]


if __name__ == "__main__":
    import tempfile

    for row in run_wire_benchmark(tempfile.mkdtemp(), quick="--quick" in sys.argv):
        print(row.case, "|", row.offsetlog, "vs", row.baseline_value, row.unit,
              "ratio", row.ratio)
