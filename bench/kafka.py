"""The kafka case of ``offsetlog bench``: the same OffsetCommit load against Apache Kafka and
against ``offsetlog serve``, on the same machine, in one run (issue 26, item 5).

Two pairings, each at the same durability:

* Kafka with its defaults (an append is acknowledged once in the page cache; no fsync per
  append) against offsetlog with ``fsync="interval"``;
* Kafka with ``log.flush.interval.messages=1`` (the broker-wide default of the topic config
  ``flush.messages``, so ``__consumer_offsets`` is flushed after every append, before the
  commit is answered) against offsetlog with ``fsync="always"``.

Each pairing measures commits/s of 32 connections, each committing to a group of its own
(one OffsetCommit v8 in flight per connection, ``bench/wire.py``'s load generator: one
thread, a selector, frames encoded with kio before the clock starts), and the p50 of one
connection's OffsetCommit round-trips, the two servers taking turns in rounds. The broker
comes from ``offsetlog.bench.kafka_broker`` (Java 17+ and Maven; the jars are fetched on first
use), with a 1 GiB heap and the JVM's default JIT and collector (not the tests' quick-start
flags). Each commit is checked once before the clock starts: an error answer would be fast
and would mean nothing.

Rows: offsetlog / Kafka for throughput (higher is better) and p50 (lower is better), with
issue 27's goals as their targets (``TARGETS``).
"""

from __future__ import annotations

import os
import socket
import struct
import sys
import time

from offsetlog.bench.common import case_dir, median, percentile
from offsetlog.bench.kafka_broker import KAFKA_VERSION, KafkaBroker
from offsetlog.bench.report import HIGHER, LOWER, Row
from offsetlog.bench.wire import CLIENTS, TOPIC, _commit_frame, _round_trip, _Server, _timed, drive
from offsetlog.bench.wire_floors import exactly

#: (offsetlog's fsync, Kafka's extra properties, how the row names Kafka's side)
PAIRINGS = (
    ("interval", {}, f"Kafka {KAFKA_VERSION}, defaults (no fsync per append)"),
    ("always", {"log.flush.interval.messages": "1"},
     f"Kafka {KAFKA_VERSION}, flush.messages=1 (fsync per append)"),
)
#: issue 27's goals, offsetlog / Kafka, per pairing: (commits/s at least, p50 at most).
#: Where both fsync per commit, the server is to be well ahead: half Kafka's latency,
#: twice its throughput; where neither does, at least level with it
TARGETS = {"always": (2.0, 0.5), "interval": (1.0, 1.0)}
QUICK = {"reps": 1, "duration_s": 1.0, "warmup_s": 0.3, "count": 200, "warmup": 20,
         "rounds": 4}
FULL = {"reps": 3, "duration_s": 3.0, "warmup_s": 0.5, "count": 3000, "warmup": 100,
        "rounds": 20}


#: what the test harness's JVM flags trade for a fast start, taken back for the bench: C1
#: only (no C2 JIT) and the serial collector
_START_UP_FLAGS = ("-XX:TieredStopAtLevel=1", "-XX:+UseSerialGC")


def _start_for_throughput(broker: KafkaBroker) -> None:
    """``broker.start()`` with the JVM's usual JIT and collector: KafkaBroker's command line
    has flags for a quick start in the tests (C1 only, serial GC) that would slow Kafka down
    here. It finds java through ``$JAVA_HOME/bin/java`` first, so for the start a JAVA_HOME
    whose ``bin/java`` drops those flags and runs the real java."""
    import shlex
    import tempfile

    from offsetlog.bench.kafka_broker import find_java

    real = find_java()
    drop = " | ".join(shlex.quote(f) for f in _START_UP_FLAGS)
    with tempfile.TemporaryDirectory(prefix="bench-java-") as home:
        os.mkdir(os.path.join(home, "bin"))
        wrapper = os.path.join(home, "bin", "java")
        with open(wrapper, "w") as f:
            f.write("#!/bin/sh\n"
                    "n=$#\n"
                    "while [ \"$n\" -gt 0 ]; do\n"
                    "  a=$1; shift; n=$((n - 1))\n"
                    f"  case \"$a\" in {drop}) ;; *) set -- \"$@\" \"$a\" ;; esac\n"
                    "done\n"
                    f"exec {shlex.quote(real)} \"$@\"\n")
        os.chmod(wrapper, 0o755)
        saved = os.environ.get("JAVA_HOME")
        os.environ["JAVA_HOME"] = home
        try:
            broker.start()
        finally:
            if saved is None:
                del os.environ["JAVA_HOME"]
            else:
                os.environ["JAVA_HOME"] = saved


def create_topic(port: int, name: str, partitions: int) -> None:
    """CreateTopics v7 on the broker (kio), then wait until Metadata lists every partition
    with its leader."""
    import datetime

    from kio.schema.create_topics.v7.request import CreatableTopic
    from kio.schema.metadata.v12.request import MetadataRequestTopic
    from kio.schema.types import TopicName
    from kio.static.primitive import i16, i32, i32Timedelta

    from offsetlog.bench.kafka_broker import _request

    with socket.create_connection(("127.0.0.1", port), timeout=30) as sock:
        answer = _request(sock, 19, 7, dict(
            topics=(CreatableTopic(name=TopicName(name), num_partitions=i32(partitions),
                                   replication_factor=i16(1), assignments=(), configs=()),),
            timeout=i32Timedelta.parse(datetime.timedelta(seconds=30)), validate_only=False))
        code = answer.topics[0].error_code.value
        if code not in (0, 36):  # 36: TOPIC_ALREADY_EXISTS
            raise RuntimeError(f"CreateTopics {name}: error {code}")
        deadline = time.monotonic() + 60
        while time.monotonic() < deadline:
            meta = _request(sock, 3, 12, dict(
                topics=(MetadataRequestTopic(topic_id=None, name=TopicName(name)),),
                allow_auto_topic_creation=False,
                include_topic_authorized_operations=False))
            topic = meta.topics[0]
            if topic.error_code.value == 0 and len(topic.partitions) == partitions and all(
                    p.leader_id >= 0 for p in topic.partitions):
                return
            time.sleep(0.1)
    raise RuntimeError(f"topic {name} not ready on the broker")


def check_commits(port: int, frames: list[bytes]) -> None:
    """Send each frame once and read its answer: every partition must be committed (error
    0), or the timings that follow would be of error answers."""
    from kio.index import load_response_schema
    from kio.serial import entity_reader

    schema = load_response_schema(8, 8)
    with socket.create_connection(("127.0.0.1", port), timeout=30) as sock:
        for frame in frames:
            for attempt in range(100):
                sock.sendall(frame)
                size = struct.unpack(">i", exactly(sock, 4))[0]
                data = exactly(sock, size)
                _, at = entity_reader(schema.__header_schema__)(data, 0)
                answer = entity_reader(schema)(data, at)[0]
                codes = {p.error_code.value for t in answer.topics for p in t.partitions}
                if codes == {0}:
                    break
                # the coordinator may still be loading the group's offsets partition
                if not codes <= {14, 15, 16} or attempt == 99:
                    raise RuntimeError(f"OffsetCommit answered error(s) {sorted(codes)}")
                time.sleep(0.1)


def p50_us(ports: dict[str, int], *, count: int, warmup: int, rounds: int) -> dict[str, float]:
    """p50 of one connection's OffsetCommit round-trips to each port (µs), the servers
    taking turns, ``count / rounds`` commits each per round."""
    frame = _commit_frame("bench-latency", 0, 1000, 1)
    socks = {}
    try:
        for name, port in ports.items():
            sock = socket.create_connection(("127.0.0.1", port))
            sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
            socks[name] = sock
        times: dict[str, list[int]] = {name: [] for name in ports}
        for name, sock in socks.items():
            _timed(lambda s=sock: _round_trip(s, frame), warmup, [])
        per_round = max(1, count // rounds)
        for r in range(rounds):
            order = list(socks) if r % 2 == 0 else list(socks)[::-1]
            for name in order:
                _timed(lambda s=socks[name]: _round_trip(s, frame), per_round, times[name])
        return {name: percentile(t, 50) / 1000 for name, t in times.items()}
    finally:
        for sock in socks.values():
            sock.close()


def run_pairing(data_dir: str, fsync: str, extra: dict, sizes: dict) -> dict:
    """One pairing's figures: ``{"offsetlog": {...}, "kafka": {...}}`` with ``commits_per_s``
    (median of the windows) and ``p50_us``."""
    frames = [_commit_frame(f"bench-{i}", i, 1000 + i, i) for i in range(CLIENTS)]
    latency_frame = [_commit_frame("bench-latency", 0, 1000, 1)]
    broker = KafkaBroker(extra=extra, heap="1g")
    _start_for_throughput(broker)
    with open(f"/proc/{broker.proc.pid}/cmdline", "rb") as f:
        jvm = [a.decode() for a in f.read().split(b"\0") if a.startswith(b"-X")]
    try:
        create_topic(broker.port, TOPIC, CLIENTS)
        with case_dir(data_dir, f"kafka-vs-{fsync}") as d:
            server = _Server(os.path.join(d, "store"), fsync)
            try:
                ports = {"offsetlog": server.port, "kafka": broker.port}
                for port in ports.values():
                    check_commits(port, frames + latency_frame)
                windows: dict[str, list[float]] = {name: [] for name in ports}
                for r in range(sizes["reps"]):
                    order = list(ports) if r % 2 == 0 else list(ports)[::-1]
                    for name in order:
                        windows[name].append(drive(ports[name], frames,
                                                   duration_s=sizes["duration_s"],
                                                   warmup_s=sizes["warmup_s"]))
                p50 = p50_us(ports, count=sizes["count"], warmup=sizes["warmup"],
                             rounds=sizes["rounds"])
            finally:
                server.close()
    finally:
        broker.stop()
    out = {name: {"commits_per_s": median(windows[name]), "windows": windows[name],
                  "p50_us": p50[name]} for name in ("offsetlog", "kafka")}
    out["kafka"]["jvm_flags"] = jvm
    return out


def run_kafka_benchmark(data_dir: str, *, quick: bool = False,
                        sizes: dict | None = None) -> list[Row]:
    """The kafka case's four rows (called by bench/runner.py's ``kafka`` case)."""
    import tempfile

    sizes = sizes or (QUICK if quick else FULL)
    # the broker keeps its log in the system's temporary folder (KafkaBroker): say so when
    # that is not the filesystem offsetlog's store is on, as the fsyncs then differ
    os.makedirs(data_dir, exist_ok=True)
    elsewhere = (os.stat(tempfile.gettempdir()).st_dev != os.stat(data_dir).st_dev)
    where = (f"; Kafka's log on another filesystem ({tempfile.gettempdir()})"
             if elsewhere else "")
    rows = []
    for fsync, extra, kafka_name in PAIRINGS:
        got = run_pairing(data_dir, fsync, extra, sizes)
        ours, theirs = got["offsetlog"], got["kafka"]
        rows.append(Row(f"kafka: OffsetCommit from {CLIENTS} connections, offsetlog "
                        f"fsync={fsync}", kafka_name, ours["commits_per_s"],
                        theirs["commits_per_s"], "commits/s", HIGHER,
                        target=TARGETS[fsync][0],
                        note=f"a group per connection; median of {sizes['reps']} "
                             f"{sizes['duration_s']}s windows each, taking turns{where}",
                        extra={"windows": {"offsetlog": ours["windows"],
                                           "kafka": theirs["windows"]},
                               "kafka_jvm_flags": theirs["jvm_flags"]}))
        rows.append(Row(f"kafka: OffsetCommit p50, one connection, offsetlog fsync={fsync}",
                        f"{kafka_name}, p50", ours["p50_us"], theirs["p50_us"], "us", LOWER,
                        target=TARGETS[fsync][1],
                        note=f"{sizes['count']} commits each, taking turns{where}"))
    return rows


if __name__ == "__main__":
    import tempfile

    for row in run_kafka_benchmark(tempfile.mkdtemp(), quick="--quick" in sys.argv):
        print(row.case, "|", row.baseline, "|", row.offsetlog, "vs", row.baseline_value,
              row.unit, "ratio", row.ratio)
