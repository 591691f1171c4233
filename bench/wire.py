"""The wire case of ``offsetlog bench``: commits over Kafka's protocol against embedded ones,
in the same run.

* throughput: 32 clients, each with its own connection to ``offsetlog serve`` (a child
  process) and one OffsetCommit round-trip per commit, against 32 threads of embedded
  ``commit_sync`` (goal: >= 0.5x);
* latency: p50 of one client's OffsetCommit round-trips over loopback against one thread's
  embedded ``commit_sync`` (goal: <= 1.5x).

The clients send requests kio encoded before the clock starts (one per partition, offsets
fixed: the store writes and fsyncs each commit whatever its value) and read each answer's
bytes, so the figures are the server's, not a client library's.
"""

from __future__ import annotations

import os
import socket
import struct
import subprocess
import sys
import threading
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
        counts = [0] * CLIENTS
        start = threading.Barrier(CLIENTS + 1)
        measuring = threading.Event()
        stop = threading.Event()

        def client(i: int) -> None:
            frame = _commit_frame(f"bench-{i}", i, 1000 + i, i)
            with socket.create_connection(("127.0.0.1", server.port)) as sock:
                sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
                start.wait()
                n = 0
                while not stop.is_set():
                    sock.sendall(frame)
                    _recv_answer(sock)
                    if measuring.is_set():
                        n += 1
                counts[i] = n

        threads = [threading.Thread(target=client, args=(i,)) for i in range(CLIENTS)]
        for t in threads:
            t.start()
        start.wait()
        time.sleep(warmup_s)
        measuring.set()
        t0 = time.perf_counter()
        time.sleep(duration_s)
        stop.set()
        elapsed = time.perf_counter() - t0
        for t in threads:
            t.join()
        return sum(counts) / elapsed
    finally:
        server.close()


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
