"""offsetlog migrate, export and import against a real Apache Kafka broker (issue 29): the
round trip store -> Kafka -> new store, Kafka's refusal of a group with an active member, a
wrong bootstrap address, SIGKILL at a random point then a re-run, and Kafka's own
``kafka-consumer-groups --reset-offsets --from-file`` reading the csv export."""

from __future__ import annotations

import json
import logging
import os
import shutil
import signal
import subprocess
import sys
import time
import uuid

import pytest

from offsetlog import OffsetAndMetadata, TopicPartition
from offsetlog.bench.kafka_broker import fetch_libs, find_java, free_port
from offsetlog.cli import main
from support.kafka_broker import kafka_tools
from support.stores import open_store
from support.wire_server import wait_until

TOPICS = ["mig-a:4", "mig-b:2"]


_ADMINS: dict = {}


def _admin(broker):
    """One AdminClient per broker, kept alive (a client collected while a request is in
    flight never resolves its future)."""
    from confluent_kafka.admin import AdminClient
    if broker.bootstrap not in _ADMINS:
        _ADMINS[broker.bootstrap] = AdminClient({"bootstrap.servers": broker.bootstrap,
                                                 "logger": logging.getLogger("quiet")})
    return _ADMINS[broker.bootstrap]


def kafka_offsets(broker, group) -> dict:
    """The group's offsets on the broker, read with confluent-kafka directly (the oracle)."""
    from confluent_kafka import ConsumerGroupTopicPartitions
    res = _admin(broker).list_consumer_group_offsets(
        [ConsumerGroupTopicPartitions(group)])[group].result(30)
    return {TopicPartition(tp.topic, tp.partition):
            OffsetAndMetadata(tp.offset, tp.metadata or "",
                              tp.leader_epoch if tp.leader_epoch is not None
                              and tp.leader_epoch >= 0 else None)
            for tp in res.topic_partitions if tp.offset >= 0}


def store_offsets(path) -> dict:
    with open_store(path) as s:
        return {g: s.fetch(g) for g in s.groups() if s.fetch(g)}


def _populate(path, prefix, n, rng=None, *, partitions=5):
    """``n`` groups over both topics, with metadata and leader epochs on some offsets."""
    groups = [f"{prefix}-{i:03d}" for i in range(n)]
    with open_store(path, partitions=partitions) as s:
        for i, g in enumerate(groups):
            base = (rng.randrange(1000) if rng else 0) + i
            offsets = {TopicPartition("mig-a", p): OffsetAndMetadata(
                base + p, f"meta-{i}-{p}" if p % 2 else "", (i + p) % 7 if p != 3 else None)
                for p in range(4)}
            offsets[TopicPartition("mig-b", i % 2)] = base
            s.commit_sync(g, offsets)
    return groups


def _run(capsys, *argv):
    rc = main(list(argv))
    out, err = capsys.readouterr()
    return rc, out, err


def _group_args(groups):
    return [a for g in groups for a in ("--group", g)]


def test_round_trip_store_to_kafka_to_a_new_store_is_equal(kafka_broker, kafka_topics,
                                                           tmp_path, capsys):
    kafka_topics(TOPICS)
    src, back = str(tmp_path / "src"), str(tmp_path / "back")
    prefix = f"rt-{uuid.uuid4().hex[:6]}"
    groups = _populate(src, prefix, 30)
    txg = f"{prefix}-txn"
    with open_store(src) as s:
        s.commit_sync(txg, {TopicPartition("mig-a", 0): 40})
        txn = s.init_transactions(f"{prefix}-tid")
        txn.begin()
        txn.commit_offsets(txg, {TopicPartition("mig-a", 0): 99,
                                 TopicPartition("mig-a", 1): 98})  # left open: pending
        txn.commit_offsets(f"{prefix}-pending-only", {TopicPartition("mig-a", 2): 5})
    groups.append(txg)
    rc, out, err = _run(capsys, "migrate", src, "--to", kafka_broker.bootstrap, "--json",
                        *_group_args(groups + [f"{prefix}-pending-only"]))
    doc = json.loads(out)
    assert rc == 0, (out, err)
    assert "3 pending transactional offsets not migrated" in err and txg in err
    by = {r["group"]: r for r in doc["groups"]}
    only = by.pop(f"{prefix}-pending-only")
    assert only["status"] == "no-offsets" and only["sent"] == 0
    assert only["reason"] == "only pending transactional offsets"
    assert kafka_offsets(kafka_broker, f"{prefix}-pending-only") == {}
    assert {r["status"] for r in by.values()} == {"moved"}
    assert all(r["verified"] for r in by.values())
    assert doc["sent"] == 30 * 5 + 1
    # Kafka holds exactly the committed offsets: metadata and leader epochs, no pending ones
    want = store_offsets(src)
    for g in groups:
        assert kafka_offsets(kafka_broker, g) == want[g], g
    # and back into a new store
    rc, out, err = _run(capsys, "migrate", back, "--from", kafka_broker.bootstrap, "--create",
                        "--json", *_group_args(groups))
    assert rc == 0, (out, err)
    got = store_offsets(back)
    assert set(got) == set(groups)
    assert got == {g: want[g] for g in groups}
    # re-runs after success change nothing and send nothing
    for argv in (["migrate", src, "--to", kafka_broker.bootstrap],
                 ["migrate", back, "--from", kafka_broker.bootstrap]):
        rc, out, _ = _run(capsys, *argv, "--json", *_group_args(groups))
        doc = json.loads(out)
        assert rc == 0 and doc["sent"] == 0
        assert {r["status"] for r in doc["groups"]} == {"done-before"}
    assert store_offsets(back) == got


def test_dry_run_plans_and_missing_partitions_are_skipped(kafka_broker, kafka_topics, tmp_path,
                                                          capsys):
    kafka_topics(TOPICS)
    src = str(tmp_path / "src")
    g = f"plan-{uuid.uuid4().hex[:6]}"
    lacking = f"absent-{uuid.uuid4().hex[:6]}"
    with open_store(src, partitions=3) as s:
        s.commit_sync(g, {TopicPartition("mig-a", 0): 5, TopicPartition("mig-a", 1): 6,
                          TopicPartition("mig-b", 7): 1, TopicPartition(lacking, 0): 2})
    from confluent_kafka import ConsumerGroupTopicPartitions
    from confluent_kafka import TopicPartition as KTP
    _admin(kafka_broker).alter_consumer_group_offsets(
        [ConsumerGroupTopicPartitions(g, [KTP("mig-a", 0, 5), KTP("mig-a", 1, 3)])])[g].result(30)
    with open_store(src):  # open elsewhere (as under `offsetlog serve`): read without its lock
        rc, out, _ = _run(capsys, "migrate", src, "--to", kafka_broker.bootstrap, "--dry-run",
                          "--json")
    assert rc == 0
    plan = {(r["topic"], r["partition"]): r["action"] for r in json.loads(out)["plan"]}
    assert plan == {("mig-a", 0): "stay", ("mig-a", 1): "change",
                    ("mig-b", 7): "skip (not on target)", (lacking, 0): "skip (not on target)"}
    assert kafka_offsets(kafka_broker, g)[TopicPartition("mig-a", 1)].offset == 3  # dry run
    rc, out, _ = _run(capsys, "migrate", src, "--to", kafka_broker.bootstrap, "--json")
    r = json.loads(out)["groups"][0]
    assert rc == 1 and r["status"] == "partial" and r["skipped"] == 2 and r["sent"] == 1
    assert "mig-b has 2 partitions" in r["reason"] and f"no topic {lacking}" in r["reason"]
    assert set(kafka_offsets(kafka_broker, g)) == {TopicPartition("mig-a", 0),
                                                   TopicPartition("mig-a", 1)}
    # --create-topics makes the missing topic (never touches mig-b): only mig-b-7 is left out
    rc, out, _ = _run(capsys, "migrate", src, "--to", kafka_broker.bootstrap, "--json",
                      "--create-topics")
    r = json.loads(out)["groups"][0]
    assert rc == 1 and r["skipped"] == 1 and r["sent"] == 1
    assert kafka_offsets(kafka_broker, g)[TopicPartition(lacking, 0)].offset == 2


def test_a_group_with_an_active_member_on_kafka_is_refused_the_others_go_on(
        kafka_broker, kafka_topics, tmp_path, capsys):
    from confluent_kafka import Consumer
    kafka_topics(TOPICS)
    src = str(tmp_path / "src")
    busy, free = (f"{x}-{uuid.uuid4().hex[:6]}" for x in ("busy", "free"))
    with open_store(src, partitions=3) as s:
        s.commit_sync(busy, {TopicPartition("mig-a", 0): 11})
        s.commit_sync(free, {TopicPartition("mig-a", 0): 12})
    c = Consumer({"bootstrap.servers": kafka_broker.bootstrap, "group.id": busy,
                  "enable.auto.commit": False, "session.timeout.ms": 6000,
                  "logger": logging.getLogger("quiet")})
    try:
        c.subscribe(["mig-a"])
        wait_until(lambda: c.poll(0.1) is None and c.assignment(), what="the consumer's join")
        rc, out, _ = _run(capsys, "migrate", src, "--to", kafka_broker.bootstrap, "--json",
                          "--group", busy, "--group", free)
        by = {r["group"]: r for r in json.loads(out)["groups"]}
        assert rc == 1
        assert by[busy]["status"] == "refused" and by[busy]["sent"] == 0
        assert "active members" in by[busy]["reason"] and "Kafka:" in by[busy]["reason"]
        assert by[free]["status"] == "moved" and by[free]["verified"] is True
        assert TopicPartition("mig-a", 0) not in kafka_offsets(kafka_broker, busy)
    finally:
        c.close()
    # once the member has left, the same command finishes the job
    rc, out, _ = _run(capsys, "migrate", src, "--to", kafka_broker.bootstrap, "--json",
                      "--group", busy, "--group", free)
    by = {r["group"]: r for r in json.loads(out)["groups"]}
    assert rc == 0 and by[busy]["status"] == "moved" and by[free]["status"] == "done-before"
    assert kafka_offsets(kafka_broker, busy)[TopicPartition("mig-a", 0)].offset == 11


def test_a_wrong_bootstrap_address_is_a_clear_error(tmp_path, capsys):
    src = str(tmp_path / "src")
    with open_store(src, partitions=3) as s:
        s.commit_sync("g", {TopicPartition("t", 0): 1})
    address = f"127.0.0.1:{free_port()}"  # nothing listens there
    for argv in (["migrate", src, "--to", address], ["migrate", src, "--from", address]):
        run = subprocess.run([sys.executable, "-m", "offsetlog", *argv, "--timeout", "2"],
                             capture_output=True, text=True, timeout=120)
        assert run.returncode == 1, run
        assert f"offsetlog: cannot reach Kafka at {address} within 2 s" in run.stderr
        assert "Traceback" not in run.stderr and run.stdout == ""
    assert not os.path.exists(src + ".migrate-state.jsonl")


def test_sigkill_at_random_points_then_a_rerun_converges(kafka_broker, kafka_topics, tmp_path,
                                                         seeded_random, capsys):
    kafka_topics(TOPICS)
    src = str(tmp_path / "src")
    state = str(tmp_path / "state.jsonl")
    prefix = f"kill-{uuid.uuid4().hex[:6]}"
    groups = _populate(src, prefix, 60, seeded_random)
    argv = [sys.executable, "-m", "offsetlog", "migrate", src, "--to", kafka_broker.bootstrap,
            "--state-file", state, "--json", *_group_args(groups)]

    def done() -> int:
        try:
            with open(state) as f:
                return sum(1 for _ in f)
        except FileNotFoundError:
            return 0

    kills = 0
    for _ in range(3):  # kill -9 after a random number of groups, at a random moment after
        target = done() + seeded_random.randint(1, 12)
        proc = subprocess.Popen(argv, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        try:
            while done() < target and proc.poll() is None:
                time.sleep(0.002)
            # the random moment falls within the next group's work, never later: a fast run
            # must not reach the last group before its kill (then nothing would be left over)
            deadline = time.monotonic() + seeded_random.uniform(0, 0.03)
            while time.monotonic() < deadline and done() <= target and proc.poll() is None:
                time.sleep(0.001)
            if proc.poll() is None:
                proc.send_signal(signal.SIGKILL)
                kills += 1
        finally:
            proc.wait(30)
    assert kills >= 1 and 0 < done() < len(groups)
    # what is on the target now, before the re-run: the re-run sends exactly the rest
    want = store_offsets(src)
    missing = sum(1 for g in groups for tp, o in want[g].items()
                  if kafka_offsets(kafka_broker, g).get(tp) != o)
    marked = done()
    run = subprocess.run(argv, capture_output=True, text=True, timeout=120)
    assert run.returncode == 0, run.stdout + run.stderr
    doc = json.loads(run.stdout)
    assert doc["sent"] == missing
    statuses = [r["status"] for r in doc["groups"]]
    assert statuses.count("done-before") == marked
    assert all(r["verified"] for r in doc["groups"])
    for g in groups:
        assert kafka_offsets(kafka_broker, g) == want[g], g
    again = subprocess.run(argv, capture_output=True, text=True, timeout=120)
    assert again.returncode == 0 and json.loads(again.stdout)["sent"] == 0


# -- Kafka's own tool reads the csv export -------------------------------------------------

def _produce(broker, topic, partitions, n):
    from confluent_kafka import Producer
    p = Producer({"bootstrap.servers": broker.bootstrap})
    for part in range(partitions):
        for i in range(n):
            p.produce(topic, value=b"x%d" % i, partition=part)
    assert p.flush(30) == 0


def test_kafka_reset_offsets_from_file_reads_the_csv_export(kafka_broker, kafka_topics,
                                                            tmp_path, capsys):
    topic = f"mig-tool-{uuid.uuid4().hex[:6]}"
    kafka_topics([f"{topic}:3"])
    _produce(kafka_broker, topic, 3, 40)  # Kafka's tool clamps offsets to the log's range
    src = str(tmp_path / "src")
    g1, g2, g3 = (f"tool-{uuid.uuid4().hex[:6]}" for _ in range(3))
    with open_store(src, partitions=3) as s:
        s.commit_sync(g1, {TopicPartition(topic, 0): 7, TopicPartition(topic, 2): 31})
        s.commit_sync(g2, {TopicPartition(topic, 1): OffsetAndMetadata(19, "m", 2)})
        s.commit_sync(g3, {TopicPartition(topic, 0): 3, TopicPartition(topic, 1): 4})
    both, per = tmp_path / "both.csv", tmp_path / "per"
    per.mkdir()
    assert main(["export", src, "--group", g1, "--group", g2, "-o", str(both)]) == 0
    assert main(["export", src, "--group", g3, "-o", str(per)]) == 0
    java, cp = kafka_tools()
    tool = [java, "-cp", cp, "org.apache.kafka.tools.consumer.group.ConsumerGroupCommand",
            "--bootstrap-server", kafka_broker.bootstrap, "--reset-offsets", "--execute"]
    for extra in (["--from-file", str(both), "--group", g1, "--group", g2],
                  ["--from-file", str(per / f"{g3}.csv"), "--group", g3]):
        r = subprocess.run(tool + extra, capture_output=True, text=True, timeout=120)
        assert r.returncode == 0, r.stdout + r.stderr
    want = store_offsets(src)
    for g in (g1, g2, g3):
        got = {tp: o.offset for tp, o in kafka_offsets(kafka_broker, g).items()}
        assert got == {tp: o.offset for tp, o in want[g].items()}, g
    # and migrate, on the same offsets, finds nothing to change but the metadata
    rc, out, _ = _run(capsys, "migrate", src, "--to", kafka_broker.bootstrap, "--dry-run",
                      "--json", "--group", g1, "--group", g3)
    assert {r["action"] for r in json.loads(out)["plan"]} == {"stay"}


def test_command_config_reaches_the_client(kafka_broker, kafka_topics, tmp_path, capsys):
    kafka_topics(TOPICS)
    src = str(tmp_path / "src")
    with open_store(src, partitions=3) as s:
        s.commit_sync(f"cc-{uuid.uuid4().hex[:6]}", {TopicPartition("mig-a", 0): 1})
    conf = tmp_path / "client.properties"
    conf.write_text("security.protocol=PLAINTEXT\nclient.id=offsetlog-migrate-test\n")
    rc, out, err = _run(capsys, "migrate", src, "--to", kafka_broker.bootstrap, "--dry-run",
                        "--command-config", str(conf))
    assert rc == 0, err
    conf.write_text("security.protocol=SSL\n")  # the broker speaks PLAINTEXT only
    rc, out, err = _run(capsys, "migrate", src, "--to", kafka_broker.bootstrap, "--dry-run",
                        "--command-config", str(conf), "--timeout", "2")
    assert rc == 1 and f"cannot reach Kafka at {kafka_broker.bootstrap}" in err


def test_a_broker_that_stops_answering_mid_run_then_a_rerun_converges(
        kafka_broker, kafka_topics, tmp_path, seeded_random):
    proc = getattr(kafka_broker, "proc", None)
    if proc is None:
        pytest.skip("needs the broker process this session started (not an external one)")
    kafka_topics(TOPICS)
    src, state = str(tmp_path / "src"), str(tmp_path / "state.jsonl")
    groups = _populate(src, f"gone-{uuid.uuid4().hex[:6]}", 40, seeded_random)
    argv = [sys.executable, "-m", "offsetlog", "migrate", src, "--to", kafka_broker.bootstrap,
            "--state-file", state, "--timeout", "2", "--json", *_group_args(groups)]

    def done() -> int:
        try:
            with open(state) as f:
                return sum(1 for _ in f)
        except FileNotFoundError:
            return 0

    target = seeded_random.randint(2, 20)
    run = subprocess.Popen(argv, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        wait_until(lambda: done() >= target or run.poll() is not None, timeout=60,
                   what="groups migrated")
        os.kill(proc.pid, signal.SIGSTOP)  # the broker stops answering, connections stay open
        out, err = run.communicate(timeout=120)
    finally:
        os.kill(proc.pid, signal.SIGCONT)
        if run.poll() is None:
            run.kill()
    assert run.returncode == 1, out + err
    doc = json.loads(out)
    statuses = [r["status"] for r in doc["groups"]]
    assert statuses.count("moved") == done() >= target
    assert "failed" in statuses
    assert any("not tried: the cluster stopped answering" in (r["reason"] or "")
               for r in doc["groups"])
    marked = done()
    again = subprocess.run(argv, capture_output=True, text=True, timeout=120)
    assert again.returncode == 0, again.stdout + again.stderr
    doc = json.loads(again.stdout)
    assert [r["status"] for r in doc["groups"]].count("done-before") == marked
    want = store_offsets(src)
    for g in groups:
        assert kafka_offsets(kafka_broker, g) == want[g], g


JAVA_CONSUMER = r"""
import java.time.Duration;
import java.util.*;
import org.apache.kafka.clients.consumer.*;
import org.apache.kafka.common.TopicPartition;

/** commit BOOTSTRAP GROUP TOPIC P=O...: join, commit those offsets, leave.
 *  consume BOOTSTRAP GROUP TOPIC N: join, print "partition offset" for N records, leave. */
public class MigrateConsumer {
    public static void main(String[] a) {
        Properties p = new Properties();
        p.put("bootstrap.servers", a[1]);
        p.put("group.id", a[2]);
        p.put("enable.auto.commit", "false");
        p.put("auto.offset.reset", "earliest");
        p.put("session.timeout.ms", "6000");
        p.put("key.deserializer", "org.apache.kafka.common.serialization.ByteArrayDeserializer");
        p.put("value.deserializer", "org.apache.kafka.common.serialization.ByteArrayDeserializer");
        try (KafkaConsumer<byte[], byte[]> c = new KafkaConsumer<>(p)) {
            c.subscribe(List.of(a[3]));
            long deadline = System.currentTimeMillis() + 60_000;
            if (a[0].equals("commit")) {
                while (c.assignment().isEmpty() && System.currentTimeMillis() < deadline)
                    c.poll(Duration.ofMillis(100));
                Map<TopicPartition, OffsetAndMetadata> m = new HashMap<>();
                for (int i = 4; i < a.length; i++) {
                    String[] kv = a[i].split("=");
                    m.put(new TopicPartition(a[3], Integer.parseInt(kv[0])),
                          new OffsetAndMetadata(Long.parseLong(kv[1])));
                }
                c.commitSync(m);
                System.out.println("committed");
            } else {
                int n = Integer.parseInt(a[4]), seen = 0;
                while (seen < n && System.currentTimeMillis() < deadline) {
                    for (ConsumerRecord<byte[], byte[]> r : c.poll(Duration.ofMillis(200))) {
                        System.out.println(r.partition() + " " + r.offset());
                        seen++;
                    }
                }
                for (ConsumerRecord<byte[], byte[]> r : c.poll(Duration.ofMillis(500)))
                    System.out.println(r.partition() + " " + r.offset());
            }
        }
    }
}
"""


def _java_consumer(tmp_path):
    """``run(mode, bootstrap, group, topic, *args) -> stdout``: Kafka's Java consumer (the
    broker's kafka-clients jar), compiled here."""
    java = find_java()
    javac = shutil.which("javac") or os.path.join(os.path.dirname(os.path.realpath(java)),
                                                  "javac")
    if not os.path.exists(javac):
        pytest.skip("javac not found: the Java consumer is compiled by the test")
    libs = fetch_libs()
    src = tmp_path / "java"
    src.mkdir()
    (src / "MigrateConsumer.java").write_text(JAVA_CONSUMER)
    jar = next(libs.glob("kafka-clients-*.jar"))
    subprocess.run([javac, "-cp", str(jar), "-d", str(src), str(src / "MigrateConsumer.java")],
                   check=True, capture_output=True, timeout=120)

    def run(*args) -> str:
        r = subprocess.run([java, "-Dorg.slf4j.simpleLogger.defaultLogLevel=warn", "-cp",
                            f"{libs}/*:{src}", "MigrateConsumer", *map(str, args)],
                           capture_output=True, text=True, timeout=120)
        assert r.returncode == 0, r.stdout + r.stderr
        return r.stdout
    return run


def _confluent_commit(bootstrap, group, topic, committed):
    from confluent_kafka import Consumer
    from confluent_kafka import TopicPartition as KTP
    c = Consumer({"bootstrap.servers": bootstrap, "group.id": group, "enable.auto.commit": False,
                  "session.timeout.ms": 6000, "logger": logging.getLogger("quiet")})
    try:
        c.subscribe([topic])
        wait_until(lambda: c.poll(0.1) is None and len(c.assignment()) == 2,
                   what="the consumer's assignment")
        c.commit(offsets=[KTP(topic, p, o) for p, o in committed.items()], asynchronous=False)
    finally:
        c.close()


def _confluent_consume(bootstrap, group, topic, expected) -> dict[int, list[int]]:
    from confluent_kafka import Consumer
    c = Consumer({"bootstrap.servers": bootstrap, "group.id": group, "enable.auto.commit": False,
                  "auto.offset.reset": "earliest", "logger": logging.getLogger("quiet")})
    seen: dict[int, list[int]] = {0: [], 1: []}

    def consume():
        m = c.poll(0.2)
        if m is not None and m.error() is None:
            seen[m.partition()].append(m.offset())
        return sum(map(len, seen.values())) >= expected
    try:
        c.subscribe([topic])
        wait_until(consume, timeout=60, what="the rest of the topic on Kafka")
        for _ in range(3):  # nothing more may come
            consume()
    finally:
        c.close()
    return seen


@pytest.mark.parametrize("client", ["confluent-kafka", "java"])
def test_consumers_resume_on_kafka_exactly_where_they_stopped_on_offsetlog_serve(
        client, kafka_broker, kafka_topics, tmp_path, capsys):
    """A consumer (librdkafka's, or Kafka's own Java one) commits against `offsetlog serve`
    and stops; the store is migrated while serve still has it open; the same group, same
    client, on the broker resumes from exactly the committed offsets: no message of the
    broker's topic is consumed twice or skipped."""
    from support.wire_server import Server
    java = _java_consumer(tmp_path) if client == "java" else None
    topic, group = f"mig-cont-{uuid.uuid4().hex[:6]}", f"cont-{uuid.uuid4().hex[:6]}"
    kafka_topics([f"{topic}:2"])
    _produce(kafka_broker, topic, 2, 30)
    committed = {0: 12, 1: 20}
    expected = sum(30 - o for o in committed.values())
    server = Server(str(tmp_path / "store"), topics=[f"{topic}:2"]).start()
    try:
        if java:
            assert "committed" in java("commit", server.bootstrap, group, topic,
                                       *(f"{p}={o}" for p, o in committed.items()))
        else:
            _confluent_commit(server.bootstrap, group, topic, committed)
        rc, out, err = _run(capsys, "migrate", server.directory, "--to",
                            kafka_broker.bootstrap, "--group", group, "--json")
        assert rc == 0, out + err
    finally:
        server.stop()
    if java:
        seen: dict[int, list[int]] = {0: [], 1: []}
        for line in java("consume", kafka_broker.bootstrap, group, topic, expected).split("\n"):
            if line.strip():
                p, o = map(int, line.split())
                seen[p].append(o)
    else:
        seen = _confluent_consume(kafka_broker.bootstrap, group, topic, expected)
    assert seen == {p: list(range(o, 30)) for p, o in committed.items()}


def test_a_group_with_members_in_the_store_is_copied_with_a_warning(kafka_broker, kafka_topics,
                                                                    tmp_path, clock, capsys):
    from cli.conftest import build_group_store
    kafka_topics(TOPICS)
    src = str(tmp_path / "src")
    build_group_store(src, clock)  # billing: two members; solo: none
    rc, out, _ = _run(capsys, "migrate", src, "--to", kafka_broker.bootstrap, "--dry-run",
                      "--json")
    by = {r["group"]: r for r in json.loads(out)["groups"]}
    assert rc == 0
    assert "the group has 2 members in the store" in by["billing"]["reason"]
    assert "members in the store" not in (by["solo"]["reason"] or "")
