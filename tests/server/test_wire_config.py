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
                            "socket.request.max.bytes=1024", "connections.max.idle.ms=500"])
    assert (c.initial_rebalance_delay_ms, c.num_partitions, c.auto_create_topics,
            c.retention_ms, c.socket_request_max_bytes, c.connections_max_idle_ms) == (
        0, 3, False, 120_000, 1024, 500)
    assert ServerConfig().connections_max_idle_ms == 600_000  # Kafka's default, 10 min
    assert c.group_config().initial_rebalance_delay_ms == 0


@pytest.mark.parametrize("item", ["no.such.key=1", "num.partitions=0", "num.partitions",
                                  "auto.create.topics.enable=maybe"])
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
