"""DescribeConfigs, judged by the admin clients: the broker's settings by Kafka's names with
the values in force (set with --config: STATIC_BROKER_CONFIG, else Kafka's default), all
read-only; a registered topic has no configs, an unknown one is UNKNOWN_TOPIC_OR_PARTITION;
other resource types are refused with a message."""

from __future__ import annotations

import pytest

from support.wire_clients import kp_admin
from support.wire_raw import call
from support.wire_server import Server, raw_socket


@pytest.fixture
def configured(tmp_path):
    s = Server(str(tmp_path / "store"), config=["offsets.retention.minutes=60"]).start()
    yield s
    s.stop()


def test_confluent_describes_the_broker_and_topics(configured):
    from confluent_kafka import KafkaError
    from confluent_kafka.admin import AdminClient, ConfigResource, ConfigSource, ResourceType

    admin = AdminClient({"bootstrap.servers": configured.bootstrap})

    def describe(kind, name):
        (future,) = admin.describe_configs([ConfigResource(kind, name)]).values()
        return future.result(15)

    broker = describe(ResourceType.BROKER, "0")
    assert broker["offsets.retention.minutes"].value == "60"
    assert broker["offsets.retention.minutes"].source == ConfigSource.STATIC_BROKER_CONFIG.value
    assert broker["group.initial.rebalance.delay.ms"].value == "0"  # the tests' own --config
    assert broker["num.partitions"].value == "1"
    assert broker["num.partitions"].source == ConfigSource.DEFAULT_CONFIG.value
    assert broker["num.io.threads"].value == "8"  # Kafka's default
    assert broker["offsets.topic.num.partitions"].value == "50"  # the store's own count
    assert broker["group.max.size"].value == str(2 ** 31 - 1)  # Kafka's "no limit"
    assert broker["broker.rack"].value is None  # Kafka's default: no rack
    # the consumer group protocol's settings (KIP-848), Kafka's defaults, and one of ours
    assert {k: v.value for k, v in broker.items() if k.startswith("group.consumer.")} == {
        "group.consumer.session.timeout.ms": "45000",
        "group.consumer.heartbeat.interval.ms": "5000",
        # offsetlog's own (Kafka has none): the interval told to a member mid-reconciliation
        "group.consumer.reconciliation.heartbeat.interval.ms": "250",
        "group.consumer.max.size": str(2 ** 31 - 1), "group.consumer.assignors": "uniform,range",
        "group.consumer.migration.policy": "bidirectional"}
    assert all(entry.is_read_only for entry in broker.values())
    assert describe(ResourceType.TOPIC, "orders") == {}
    with pytest.raises(Exception) as unknown:
        describe(ResourceType.TOPIC, "nope")
    assert unknown.value.args[0].code() == KafkaError.UNKNOWN_TOPIC_OR_PART
    with pytest.raises(Exception) as group:
        describe(ResourceType.GROUP, "g")
    assert group.value.args[0].code() == KafkaError.INVALID_REQUEST


def test_kafka_python_describes_the_broker_with_synonyms(configured):
    from kafka.admin import ConfigResource, ConfigResourceType

    admin = kp_admin(configured)
    try:
        described = admin.describe_configs([ConfigResource(ConfigResourceType.BROKER, "0")],
                                           config_filter="all", include_synonyms=True)
    finally:
        admin.close()
    entry = described["broker"]["0"]["offsets.retention.minutes"]
    assert entry["value"] == "60" and entry["config_source"] == "STATIC_BROKER_CONFIG"
    assert entry["synonyms"] == [{"name": "offsets.retention.minutes", "value": "60",
                                  "source": "STATIC_BROKER_CONFIG"}]
    types = {name: e["config_type"] for name, e in described["broker"]["0"].items()}
    assert types["auto.create.topics.enable"] == "BOOLEAN"  # Kafka's declared types
    assert types["connections.max.idle.ms"] == "LONG"
    assert types["num.io.threads"] == "INT"
    assert types["broker.rack"] == "STRING"
    assert types["transaction.abort.timed.out.transaction.cleanup.interval.ms"] == "INT"


def test_key_filter_and_other_broker_ids(configured):
    with raw_socket(configured) as sock:
        r = call(sock, 32, 4, include_synonyms=False, include_documentation=False, resources=[
            dict(resource_type=4, resource_name="0",
                 configuration_keys=["num.partitions", "no.such.key"]),
            dict(resource_type=4, resource_name="", configuration_keys=None),
            dict(resource_type=4, resource_name="3", configuration_keys=None)])
    named, defaults, other = r.results
    assert [(c.name, c.value) for c in named.configs] == [("num.partitions", "1")]
    assert int(defaults.error_code) == 0 and defaults.configs == ()  # no dynamic defaults
    assert int(other.error_code) == 42 and "node 0" in other.error_message  # INVALID_REQUEST
