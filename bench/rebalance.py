"""The rebalance case of ``offsetlog bench`` (issue 28, "Performance"): how long a group of 10
takes to own every partition again, with the same client on both protocols and both servers.

Two moments, each from a Stable group to every partition owned (each of the 10 partitions of
``orders`` (4) and ``wide`` (6) in exactly one member's assignment, as the members themselves
report it):

* **join**: nine members own everything; the clock starts as the tenth subscribes and stops
  when all ten own one partition each;
* **leave**: the clock starts as one member closes (it leaves: LeaveGroup, or a heartbeat with
  epoch -1) and stops when the nine left own everything again.

Each moment starts as soon as the step before it has ended, which is right after a heartbeat
that ended it, so the members' places in the heartbeat interval are tied to the step before.
The same moments are also measured starting at a random point of the interval (a seeded wait
of up to one interval, the same on both servers, before the join and before the leave): those
rows are information.

The members are confluent-kafka (librdkafka) consumers in this process, polled in turn, with
``group.protocol=consumer`` (KIP-848, the server's default ``uniform`` assignor) or
``classic`` (the ``roundrobin`` assignor, balanced over both topics as ``uniform`` is; librdkafka's
default ``range`` leaves some of 10 members without a partition); each server has its defaults for the
protocol (heartbeat interval 5 s for the consumer protocol, the client's 3 s for classic),
except ``group.initial.rebalance.delay.ms=0`` on both, as in the tests. offsetlog's defaults
include its heartbeat schedule (docs/GROUPS.md, "Heartbeat intervals": 250 ms to a member
waiting for partitions or revoking, settling members spread over the interval), which Kafka
does not have: that is what the consumer protocol's rows compare. Measured on
``offsetlog serve`` (both protocols) and, when Java and Maven are there, on Apache Kafka
(``offsetlog.bench.kafka_broker``) in the same run. Rows: consumer vs classic on offsetlog
(information) and offsetlog vs Kafka per protocol (the issue's goal: no slower than Kafka).
"""

from __future__ import annotations

import os
import random
import subprocess
import sys
import time
import uuid

from offsetlog.bench.common import case_dir, median
from offsetlog.bench.report import LOWER, Row

TOPICS = {"orders": 4, "wide": 6}
ALL = {(t, p) for t, n in TOPICS.items() for p in range(n)}
MEMBERS = 10
QUICK = {"reps": 1}
FULL = {"reps": 3}
PROTOCOLS = ("consumer", "classic")


class _Serve:
    """``offsetlog serve`` with the two topics and no initial rebalance delay."""

    def __init__(self, directory: str) -> None:
        cmd = [sys.executable, "-m", "offsetlog", "serve", directory, "--listen", "127.0.0.1:0",
               "--config", "group.initial.rebalance.delay.ms=0"]
        for t, n in TOPICS.items():
            cmd += ["--topic", f"{t}:{n}"]
        self.proc = subprocess.Popen(cmd, stderr=subprocess.PIPE, text=True)
        line = self.proc.stderr.readline()
        if not line.startswith("listening on "):
            self.proc.kill()
            raise RuntimeError(f"offsetlog serve did not start: {line!r}")
        self.port = int(line.rsplit(":", 1)[1])

    def close(self) -> None:
        self.proc.terminate()
        self.proc.wait(30)


def _consumer(port: int, group: str, protocol: str, name: str):
    import confluent_kafka

    conf = {"bootstrap.servers": f"127.0.0.1:{port}", "group.id": group,
            "group.protocol": protocol, "client.id": name, "enable.auto.commit": False,
            "topic.metadata.refresh.interval.ms": 1000}
    if protocol == "classic":  # balanced over both topics, as uniform is (range is per topic)
        conf["partition.assignment.strategy"] = "roundrobin"
    c = confluent_kafka.Consumer(conf)
    c.subscribe(sorted(TOPICS))
    return c


def _owned(members: list) -> list[set]:
    for c in members:
        c.poll(0)
    return [{(tp.topic, tp.partition) for tp in c.assignment()} for c in members]


def _wait(members: list, done, timeout_s: float) -> None:
    deadline = time.monotonic() + timeout_s
    while True:
        owned = _owned(members)
        if done(owned):
            return
        if time.monotonic() > deadline:
            raise TimeoutError(f"the group did not settle in {timeout_s} s: "
                               f"{[sorted(x) for x in owned]}")
        time.sleep(0.005)


def _covered(owned: list[set]) -> bool:
    return set().union(*owned) == ALL and sum(map(len, owned)) == len(ALL)


def _balanced(owned: list[set]) -> bool:
    """Every partition owned once and every member owning some (10 over 9: one has two)."""
    return _covered(owned) and all(owned)


def _idle(members: list, seconds: float) -> None:
    """Let ``seconds`` pass with the members polled as before."""
    end = time.monotonic() + seconds
    while time.monotonic() < end:
        _owned(members)
        time.sleep(0.005)


def measure(port: int, protocol: str, timeout_s: float = 180,
            waits: tuple[float, float] = (0.0, 0.0)) -> tuple[float, float]:
    """``(join seconds, leave seconds)`` of one group on the server at ``port``. ``waits``:
    seconds to let pass before the join and before the leave (0: each starts as soon as the
    step before it has ended, i.e. right after the heartbeat that ended it)."""
    group = f"bench-rebalance-{protocol}-{uuid.uuid4().hex[:8]}"
    members = [_consumer(port, group, protocol, f"m{i}") for i in range(MEMBERS - 1)]
    try:
        _wait(members, _balanced, timeout_s)
        _idle(members, waits[0])
        t0 = time.monotonic()
        members.append(_consumer(port, group, protocol, f"m{MEMBERS - 1}"))
        _wait(members, lambda o: _covered(o) and all(len(x) == 1 for x in o), timeout_s)
        join = time.monotonic() - t0
        _idle(members, waits[1])
        t1 = time.monotonic()
        members.pop(0).close()
        _wait(members, _balanced, timeout_s)
        return join, time.monotonic() - t1
    finally:
        for c in members:
            c.close()


def _kafka(data_dir: str):
    """A started broker with the topics, or the reason there is none."""
    from offsetlog.bench.kafka import create_topic
    from offsetlog.bench.kafka_broker import KafkaBroker, KafkaUnavailable, check_available

    try:
        check_available()
        broker = KafkaBroker()
        broker.start()
    except KafkaUnavailable as e:
        return None, str(e)
    for t, n in TOPICS.items():
        create_topic(broker.port, t, n)
    return broker, None


#: each protocol's heartbeat interval with the servers' and the client's defaults, s
INTERVALS = {"consumer": 5.0, "classic": 3.0}
SEED = 28


def run_rebalance_benchmark(data_dir: str, *, quick: bool = False, kafka: bool = True,
                            sizes: dict | None = None) -> list[Row]:
    sizes = sizes or (QUICK if quick else FULL)
    times: dict[tuple[str, str], list[tuple[float, float]]] = {}
    #: the same moments started at a random point of the heartbeat interval: a seeded wait,
    #: the same on both servers, before the join and before the leave (information)
    phased: dict[tuple[str, str], list[tuple[float, float]]] = {}
    rnd = random.Random(SEED)
    with case_dir(data_dir, "rebalance") as d:
        server = _Serve(os.path.join(d, "store"))
        broker, why = _kafka(d) if kafka else (None, "not asked for")
        try:
            ports = {"offsetlog": server.port}
            if broker is not None:
                ports["kafka"] = broker.port
            for r in range(sizes["reps"]):
                for protocol in PROTOCOLS:
                    order = list(ports) if r % 2 == 0 else list(ports)[::-1]
                    waits = (rnd.uniform(0, INTERVALS[protocol]),
                             rnd.uniform(0, INTERVALS[protocol]))
                    for name in order:
                        for into, wait in ((times, (0.0, 0.0)), (phased, waits)):
                            try:
                                got = measure(ports[name], protocol, waits=wait)
                            except TimeoutError as e:
                                raise TimeoutError(f"{name}, {protocol} protocol: {e}") from None
                            into.setdefault((name, protocol), []).append(got)
        finally:
            server.close()
            if broker is not None:
                broker.stop()
    med = {k: (median([j for j, _ in v]), median([le for _, le in v])) for k, v in times.items()}
    med_phased = {k: (median([j for j, _ in v]), median([le for _, le in v]))
                  for k, v in phased.items()}
    rows = []
    for i, moment in enumerate(("the last of 10 joins", "one of 10 leaves")):
        consumer, classic = med[("offsetlog", "consumer")][i], med[("offsetlog", "classic")][i]
        rows.append(Row(f"rebalance: {moment} -> all owned, offsetlog serve, consumer protocol",
                        "the classic protocol (confluent-kafka both)", consumer, classic, "s",
                        LOWER, note="information"))
        for protocol in PROTOCOLS:
            ours = med[("offsetlog", protocol)][i]
            theirs = med.get(("kafka", protocol), (None, None))[i]
            rows.append(Row(f"rebalance: {moment} -> all owned, {protocol} protocol, offsetlog",
                            "Apache Kafka 4.4, the same client", ours, theirs, "s", LOWER,
                            target=1.0, note="" if broker is not None or not kafka
                            else f"no Kafka: {why}"))
    for i, moment in enumerate(("the last of 10 joins", "one of 10 leaves")):
        for protocol in PROTOCOLS:
            ours = med_phased[("offsetlog", protocol)][i]
            theirs = med_phased.get(("kafka", protocol), (None, None))[i]
            rows.append(Row(f"rebalance, at a random point of the heartbeat interval: {moment} "
                            f"-> all owned, {protocol} protocol, offsetlog",
                            "Apache Kafka 4.4, the same client", ours, theirs, "s", LOWER,
                            note="information" if broker is not None or not kafka
                            else f"no Kafka: {why}"))
    return rows
