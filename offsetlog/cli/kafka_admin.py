"""A Kafka cluster, as ``offsetlog migrate`` uses it: confluent-kafka's AdminClient (librdkafka).

Only Kafka's admin API: Metadata (topics and their partitions, the cluster id), ListGroups,
OffsetFetch (``list_consumer_group_offsets``), OffsetCommit as the admin client sends it
(``alter_consumer_group_offsets``: generation -1, no member, so Kafka refuses a group that has
members) and CreateTopics. confluent-kafka is imported only when a command needs a cluster.
"""

from __future__ import annotations

import logging
import re

from offsetlog.cli.crashtest_cmd import UsageError
from offsetlog.cli.plan import Entry, Key
from offsetlog.errors import OffsetlogError

#: errors Kafka gives every partition of a group it refuses as a whole
GROUP_ERRORS = ("UNKNOWN_MEMBER_ID", "REBALANCE_IN_PROGRESS", "ILLEGAL_GENERATION",
                "STALE_MEMBER_EPOCH", "GROUP_AUTHORIZATION_FAILED", "COORDINATOR_NOT_AVAILABLE",
                "NOT_COORDINATOR", "GROUP_ID_NOT_FOUND")


class KafkaUnreachable(OffsetlogError):
    """The cluster did not answer within the timeout."""


class GroupRefused(OffsetlogError):
    """Kafka answered a whole group's request with an error (``code``: Kafka's name)."""

    def __init__(self, code: str, message: str) -> None:
        super().__init__(f"{code}: {message}")
        self.code = code


def read_properties(path: str) -> dict[str, str]:
    """A Java properties file (Kafka's ``--command-config``): ``key=value`` or ``key: value``
    lines, ``#`` and ``!`` comments. ``sasl.jaas.config`` with a username and password (PLAIN,
    SCRAM) becomes librdkafka's ``sasl.username`` and ``sasl.password``."""
    props: dict[str, str] = {}
    try:
        with open(path) as f:
            lines = f.read().splitlines()
    except OSError as e:
        raise UsageError(f"--command-config {path}: {e.strerror or e}") from None
    for line in lines:
        line = line.strip()
        if not line or line[0] in "#!":
            continue
        m = re.match(r"([^=:\s]+)\s*[=:]\s*(.*)$", line)
        if not m:
            raise UsageError(f"--command-config {path}: not a property: {line!r}")
        props[m.group(1)] = m.group(2).strip()
    jaas = props.pop("sasl.jaas.config", None)
    if jaas is not None:
        user = re.search(r'username\s*=\s*"([^"]*)"', jaas)
        password = re.search(r'password\s*=\s*"([^"]*)"', jaas)
        if user and password:
            props.setdefault("sasl.username", user.group(1))
            props.setdefault("sasl.password", password.group(1))
        elif "OAuthBearer" not in jaas:
            raise UsageError(f"--command-config {path}: sasl.jaas.config names no username "
                             "and password (use sasl.username and sasl.password)")
    return props


def _quiet_logger() -> logging.Logger:
    log = logging.getLogger("offsetlog.cli.kafka")
    log.propagate = False
    if not log.handlers:
        log.addHandler(logging.NullHandler())
    return log


class Cluster:
    """One Kafka cluster reached at ``bootstrap`` with client ``properties``; every call waits
    at most ``timeout`` seconds."""

    def __init__(self, bootstrap: str, properties: dict[str, str], timeout: float) -> None:
        from confluent_kafka import KafkaException
        from confluent_kafka.admin import AdminClient

        self.bootstrap = bootstrap
        self.timeout = timeout
        conf = {**properties, "bootstrap.servers": bootstrap, "logger": _quiet_logger(),
                "socket.timeout.ms": max(1000, int(timeout * 1000))}
        try:
            self.admin = AdminClient(conf)
        except (KafkaException, ValueError, TypeError) as e:
            raise UsageError(f"Kafka client settings: {e}") from None
        self.cluster_id = ""
        self.topics: dict[str, int] = {}

    def _opts(self) -> dict:
        return {"request_timeout": self.timeout}

    def connect(self) -> None:
        """Read the cluster's id and topics. :raises KafkaUnreachable: no answer in time"""
        from confluent_kafka import KafkaException

        try:
            md = self.admin.list_topics(timeout=self.timeout)
        except KafkaException as e:
            err = e.args[0] if e.args else e
            what = err.str() if hasattr(err, "str") else str(err)
            raise KafkaUnreachable(f"cannot reach Kafka at {self.bootstrap} within "
                                   f"{self.timeout:g} s: {what}") from None
        self.cluster_id = md.cluster_id or self.bootstrap
        self.topics = {name: len(t.partitions) for name, t in md.topics.items()
                       if not name.startswith("__") and t.error is None}

    def has(self, key: Key) -> bool:
        return key[1] < self.topics.get(key[0], 0)

    def _result(self, future):
        from confluent_kafka import KafkaException

        try:
            return future.result()
        except KafkaException as e:
            err = e.args[0] if e.args else None
            if err is not None and hasattr(err, "name"):
                raise GroupRefused(err.name(), err.str()) from None
            raise GroupRefused("UNKNOWN", str(e)) from None

    def group_offsets(self, group: str) -> dict[Key, Entry]:
        """The group's committed offsets on the cluster (OffsetFetch of all its partitions)."""
        from confluent_kafka import ConsumerGroupTopicPartitions

        fut = self.admin.list_consumer_group_offsets([ConsumerGroupTopicPartitions(group)],
                                                     **self._opts())[group]
        out = {}
        for tp in self._result(fut).topic_partitions:
            if tp.error is None and tp.offset >= 0:
                out[(tp.topic, tp.partition)] = Entry.of(tp.offset, tp.metadata, tp.leader_epoch)
        return out

    def alter(self, group: str, offsets: dict[Key, Entry]) -> dict[Key, str]:
        """Commit ``offsets`` for ``group`` as Kafka's admin client does (one OffsetCommit).

        :return: Kafka's error name per partition it refused (empty: all committed)
        :raises GroupRefused: the whole group was refused (members on it, say)
        """
        from confluent_kafka import ConsumerGroupTopicPartitions, TopicPartition

        tps = []
        for (t, p), e in sorted(offsets.items()):
            kw = {"metadata": e.metadata} if e.metadata else {}
            if e.leader_epoch is not None:
                kw["leader_epoch"] = e.leader_epoch
            tps.append(TopicPartition(t, p, e.offset, **kw))
        fut = self.admin.alter_consumer_group_offsets(
            [ConsumerGroupTopicPartitions(group, tps)], **self._opts())[group]
        errors, texts = {}, {}
        for tp in self._result(fut).topic_partitions:
            if tp.error is not None:
                errors[(tp.topic, tp.partition)] = tp.error.name()
                texts[tp.error.name()] = tp.error.str()
        if errors and len(set(errors.values())) == 1 and len(errors) == len(tps):
            code = next(iter(errors.values()))
            if code in GROUP_ERRORS:
                raise GroupRefused(code, texts[code])
        return errors

    def create_topics(self, wanted: dict[str, int]) -> dict[str, str]:
        """Create the topics (name -> partitions) with the broker's default replication.

        :return: topic -> error text for those not created
        """
        from confluent_kafka.admin import NewTopic

        if not wanted:
            return {}
        futs = self.admin.create_topics([NewTopic(t, n) for t, n in sorted(wanted.items())],
                                        **{"request_timeout": self.timeout,
                                           "operation_timeout": self.timeout})
        errors = {}
        for topic, fut in futs.items():
            try:
                self._result(fut)
            except GroupRefused as e:
                if e.code != "TOPIC_ALREADY_EXISTS":
                    errors[topic] = str(e)
        self.connect()  # the topics as they are now
        return errors

    def list_groups(self) -> dict[str, str]:
        """group id -> state of every consumer group (ListGroups)."""
        res = self._result(self.admin.list_consumer_groups(**self._opts()))
        out = {}
        for g in res.valid:
            state = getattr(g.state, "name", str(g.state))
            out[g.group_id] = state.title() if state.isupper() else state
        return out
