"""``offsetlog serve``'s command line: Kafka property names, clear errors, the loopback
warning."""

from __future__ import annotations

import subprocess
import sys

import pytest

from offsetlog.server.config import ConfigError, ServerConfig
from offsetlog.server.main import is_loopback


def test_kafka_property_names_are_parsed():
    c = ServerConfig.parse(["group.initial.rebalance.delay.ms=0", "num.partitions=3",
                            "auto.create.topics.enable=false", "offsets.retention.minutes=2",
                            "socket.request.max.bytes=1024", "connections.max.idle.ms=500",
                            "num.io.threads=2"])
    assert (c.initial_rebalance_delay_ms, c.num_partitions, c.auto_create_topics,
            c.retention_ms, c.socket_request_max_bytes, c.connections_max_idle_ms,
            c.num_io_threads) == (0, 3, False, 120_000, 1024, 500, 2)
    assert ServerConfig().connections_max_idle_ms == 600_000  # Kafka's default, 10 min
    assert ServerConfig().num_io_threads == 8  # Kafka's default
    assert c.group_config().initial_rebalance_delay_ms == 0


@pytest.mark.parametrize("policy", ["bidirectional", "upgrade", "downgrade", "disabled"])
def test_the_migration_policy_reaches_the_consumer_groups(policy):
    c = ServerConfig.parse([f"group.consumer.migration.policy={policy.upper()}"])
    config = c.consumer_group_config()
    assert config.migration_policy == policy
    assert (config.upgrade_enabled, config.downgrade_enabled) == (
        policy in ("bidirectional", "upgrade"), policy in ("bidirectional", "downgrade"))
    assert ServerConfig().consumer_group_config().migration_policy == "bidirectional"


def test_the_reconciliation_interval_reaches_the_consumer_groups():
    """offsetlog's own setting (docs/GROUPS.md, "Heartbeat intervals"), 250 ms by default."""
    assert ServerConfig().consumer_group_config().reconciliation_heartbeat_interval_ms == 250
    c = ServerConfig.parse(["group.consumer.reconciliation.heartbeat.interval.ms=5000"])
    assert c.consumer_group_config().reconciliation_heartbeat_interval_ms == 5000


@pytest.mark.parametrize("item", ["no.such.key=1", "num.partitions=0", "num.partitions",
                                  "auto.create.topics.enable=maybe", "num.io.threads=0",
                                  "num.io.threads=257", "group.consumer.migration.policy=both",
                                  "group.consumer.reconciliation.heartbeat.interval.ms=49"])
def test_bad_settings_are_refused(item):
    with pytest.raises(ConfigError):
        ServerConfig.parse([item])


def test_an_unknown_key_exits_2_before_opening_anything(tmp_path):
    r = subprocess.run([sys.executable, "-m", "offsetlog", "serve", str(tmp_path / "s"),
                        "--config", "log.flush.interval.ms=1"], capture_output=True, text=True,
                       timeout=60)
    assert r.returncode == 2 and "log.flush.interval.ms: unknown setting" in r.stderr
    assert not (tmp_path / "s").exists()


def test_only_loopback_is_quiet():
    assert is_loopback("127.0.0.1") and is_loopback("::1") and is_loopback("localhost")
    assert not is_loopback("0.0.0.0") and not is_loopback("10.1.2.3")


def test_one_io_thread_serves_every_connection(tmp_path):
    """``num.io.threads=1``: commits from many connections, sent at once, and a transaction
    all go through the one thread that waits for the disk; none waits for another."""
    from support.wire_raw import frame, read_answer
    from support.wire_server import Server, raw_socket
    from support.wire_txn import end_txn, init_producer, send_offsets, stable_fetch

    server = Server(str(tmp_path / "store"), config=["num.io.threads=1"]).start()
    try:
        socks = [raw_socket(server) for _ in range(8)]
        try:
            for i, sock in enumerate(socks):
                sock.sendall(frame(8, 8, correlation_id=i, group_id=f"g{i}",
                                   generation_id_or_member_epoch=-1, member_id="",
                                   group_instance_id=None, topics=[dict(name="orders", partitions=[
                                       dict(partition_index=0, committed_offset=100 + i,
                                            committed_leader_epoch=-1,
                                            committed_metadata="")])]))
            for i, sock in enumerate(socks):
                cid, r = read_answer(sock, 8, 8)
                assert cid == i and int(r.topics[0].partitions[0].error_code) == 0
        finally:
            for sock in socks:
                sock.close()
        with raw_socket(server) as sock:
            pid, epoch = init_producer(sock, "tx-one")
            send_offsets(sock, "tx-one", pid, epoch, "g0")
            assert end_txn(sock, "tx-one", pid, epoch, True) == 0
        assert stable_fetch(server, "g0") == (17, 0)
        for i in range(1, 8):
            assert stable_fetch(server, f"g{i}") == (100 + i, 0)
    finally:
        server.stop()
