"""DescribeConfigs: what admin tools (``kafka-configs --describe``, admin UIs, the clients'
``describe_configs``) read of the broker and its topics.

The broker (node 0) has the settings ``--config`` takes, by Kafka's names, with the values in
force: set on the command line (STATIC_BROKER_CONFIG) or Kafka's default (DEFAULT_CONFIG).
They are read-only: nothing here alters configs at run time. A topic has no configs of its
own (this server keeps no messages, so none of Kafka's topic configs applies): a registered
topic answers an empty list, an unknown one UNKNOWN_TOPIC_OR_PARTITION. Other resource types
(broker loggers, groups, client metrics) answer INVALID_REQUEST with a message.
"""

from __future__ import annotations

from offsetlog.server import authz
from offsetlog.server import errors as E
from offsetlog.server.config import PROPERTIES, ServerConfig
from offsetlog.server.context import NODE_ID, Call, Context

#: ConfigResource types
TOPIC, BROKER = 2, 4
#: DescribeConfigs config sources
STATIC_BROKER_CONFIG, DEFAULT_CONFIG = 4, 5
#: DescribeConfigs config types (v3+)
BOOLEAN, STRING, INT, LONG, LIST = 1, 2, 3, 5, 7

#: the settings Kafka declares LONG (the rest are INT, or BOOLEAN for a bool field)
_LONGS = {"offsets.retention.check.interval.ms", "connections.max.idle.ms"}
#: Kafka's value for "no limit" where the server's field is None
_INT_MAX = str(2 ** 31 - 1)


def broker_configs(config: ServerConfig, log_partitions: int) -> list[tuple[str, str, int, int]]:
    """``(name, value, source, type)`` of every setting, by Kafka name, in name order."""
    out = []
    for name, (field, _) in sorted(PROPERTIES.items()):
        value = getattr(config, field)
        if value is None and field == "broker_rack":  # Kafka's: a STRING with no value
            text, kind = None, STRING
        elif isinstance(value, bool):
            text, kind = ("true" if value else "false"), BOOLEAN
        elif isinstance(value, str):
            text, kind = value, STRING
        elif isinstance(value, (tuple, list)):  # group.consumer.assignors
            text, kind = ",".join(map(str, value)), LIST
        else:
            if value is None:  # group.max.size unlimited; the store's own partition count
                value = log_partitions if field == "log_partitions" else _INT_MAX
            text, kind = str(value), LONG if name in _LONGS else INT
        source = STATIC_BROKER_CONFIG if name in config.given else DEFAULT_CONFIG
        out.append((name, text, source, kind))
    return out


def describe_configs(ctx: Context, call: Call, now_ms: int):
    b = call.body
    synonyms = bool(getattr(b, "include_synonyms", False))
    results = []
    denied = []
    for r in b.resources:
        kind, name = int(r.resource_type), r.resource_name
        refused = _denied(ctx, call, kind, name)
        if refused:  # after the others, with the error's own message, as Kafka answers
            denied.append(dict(error_code=refused[0], error_message=refused[1],
                               resource_type=kind, resource_name=name, configs=()))
            continue
        keys = None if r.configuration_keys is None else set(r.configuration_keys)
        code, message, configs = E.NONE, None, []
        if kind == BROKER:
            if name == str(NODE_ID):
                configs = [dict(name=n, value=v, read_only=True, config_source=s,
                                is_sensitive=False,
                                synonyms=[dict(name=n, value=v, source=s)] if synonyms else [],
                                config_type=t, documentation=None)
                           for n, v, s, t in broker_configs(ctx.config,
                                                            ctx.store.config.partitions)
                           if keys is None or n in keys]
            elif name:  # "" asks for the cluster-wide dynamic defaults: there are none
                code, message = E.INVALID_REQUEST, (
                    f"unexpected broker id {name!r}: this server is node {NODE_ID}")
        elif kind == TOPIC:
            if ctx.topics.partitions(name) is None:
                code, message = E.UNKNOWN_TOPIC_OR_PARTITION, f"unknown topic {name!r}"
        else:
            code, message = E.INVALID_REQUEST, (
                f"offsetlog has no configs of resource type {kind} (only brokers and topics)")
        results.append(dict(error_code=code, error_message=message, resource_type=kind,
                            resource_name=name, configs=configs))
    return call.respond(results=results + denied)


#: ConfigResource types other than TOPIC and BROKER that Kafka authorizes
_BROKER_LOGGER, _GROUP = 8, 32


def _denied(ctx: Context, call: Call, kind: int, name: str) -> tuple[int, str] | None:
    """Kafka's check of one resource: DescribeConfigs on the cluster (a broker), the topic
    or the group; Describe on the cluster for a broker logger."""
    if ctx.acl is None:
        return None
    if kind == BROKER and not authz.allowed(ctx, call, authz.DESCRIBE_CONFIGS, authz.CLUSTER):
        return E.CLUSTER_AUTHORIZATION_FAILED, "Cluster authorization failed."
    if kind == _BROKER_LOGGER and not authz.allowed(ctx, call, authz.DESCRIBE, authz.CLUSTER):
        return E.CLUSTER_AUTHORIZATION_FAILED, "Cluster authorization failed."
    if kind == TOPIC and not authz.allowed(ctx, call, authz.DESCRIBE_CONFIGS, authz.TOPIC,
                                           name):
        return E.TOPIC_AUTHORIZATION_FAILED, "Topic authorization failed."
    if kind == _GROUP and not authz.allowed(ctx, call, authz.DESCRIBE_CONFIGS, authz.GROUP,
                                            name):
        return E.GROUP_AUTHORIZATION_FAILED, "Group authorization failed."
    return None
