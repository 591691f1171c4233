"""The consumer-protocol client matrix's pieces (tests/clients/test_consumer_protocol_matrix.py):
pools of real client members (Kafka's Java client, several in one JVM; confluent-kafka, in
this process), a raw member whose heartbeats the test drives (so it can stop heartbeating),
and the server's books read through ConsumerGroupDescribe and OffsetFetch.

A pool's members are named by their ``client.id``, which is how the server's books name them
too (ConsumerGroupDescribe's ``client_id``)."""

from __future__ import annotations

import socket
import time

from support.client_runners import MemberProcess
from support.wire_raw import call

HB, DESCRIBE, OFFSET_FETCH = 68, 69, 9


class ProcessPool:
    """Members in one child process that speaks the protocol of
    tests/clients/java/ConsumerMembers.java (its franz-go twin: ``franzgo members848``)."""

    def __init__(self, cmd: list[str], label: str, names) -> None:
        self.proc = MemberProcess(cmd, label)
        self.names = list(names)
        self.views: dict[str, set] = {n: set() for n in names}

    def _events(self) -> None:
        self.proc.drain()
        for ev in self.proc.seen:
            if ev["event"] == "assigned":
                self.views[ev["member"]] = set(ev["partitions"])
        self.proc.seen.clear()

    def look(self) -> dict[str, set]:
        self._events()
        return {n: self.views[n] for n in self.names}

    def start(self, name: str) -> None:
        self.names.append(name)
        self.views[name] = set()
        self.proc.send(f"start {name}")

    def close(self, name: str) -> None:
        self.proc.send(f"close {name}")
        self.proc.wait_for(lambda e: e["event"] == "closed" and e["member"] == name,
                           what=f"{name} closed")
        self.names.remove(name)

    def commit(self, name: str, offset: int) -> set:
        """Commit ``offset`` for each partition ``name`` owns: the partitions committed.
        :raises AssertionError: the client's commit failed"""
        self.proc.send(f"commit {name} {offset}")
        ev = self.proc.wait_for(lambda e: e["event"] == "committed" and e["member"] == name,
                                what=f"{name}'s commit")
        assert ev["error"] is None, ev
        for e in self.proc.seen:  # assignments seen while waiting
            if e["event"] == "assigned":
                self.views[e["member"]] = set(e["partitions"])
        self.proc.seen.clear()
        return set(ev["partitions"])

    def stop(self) -> None:
        try:
            self.proc.send("exit")
            self.proc.proc.wait(40)
        except Exception:  # noqa: BLE001 - already gone, or stuck: killed below
            pass
        if self.proc.proc.poll() is None:
            self.proc.proc.kill()


def java_pool(java, bootstrap: str, group: str, topics, assignor: str, names) -> ProcessPool:
    """Members of Kafka's Java client, several KafkaConsumers in one JVM."""
    return ProcessPool(java.command("ConsumerMembers", bootstrap, group, ",".join(topics),
                                    assignor, *names), "java", names)


def franzgo_pool(binary: str, bootstrap: str, group: str, topics, assignor: str,
                 names) -> ProcessPool:
    """Members of franz-go (kgo.ServerSideBalancer), one kgo.Client each, in one process."""
    return ProcessPool([binary, "members848", bootstrap, group, ",".join(topics), assignor,
                        *names], "franz-go", names)


class ConfluentPool:
    """Members of confluent-kafka (librdkafka) with ``group.protocol=consumer``, in this
    process; ``look`` polls each once."""

    def __init__(self, bootstrap: str, group: str, topics, assignor: str, names) -> None:
        self.bootstrap, self.group, self.topics, self.assignor = bootstrap, group, topics, assignor
        self.members: dict = {}
        for n in names:
            self.start(n)

    @property
    def names(self) -> list[str]:
        return list(self.members)

    def start(self, name: str) -> None:
        import confluent_kafka

        c = confluent_kafka.Consumer({
            "bootstrap.servers": self.bootstrap, "group.id": self.group,
            "group.protocol": "consumer", "group.remote.assignor": self.assignor,
            "client.id": name, "enable.auto.commit": False,
            "topic.metadata.refresh.interval.ms": 1000, "reconnect.backoff.max.ms": 500})
        c.subscribe(list(self.topics))
        self.members[name] = c

    def look(self) -> dict[str, set]:
        for c in self.members.values():
            c.poll(0.05)
        return {n: {f"{tp.topic}:{tp.partition}" for tp in c.assignment()}
                for n, c in self.members.items()}

    def close(self, name: str) -> None:
        self.members.pop(name).close()

    def commit(self, name: str, offset: int) -> set:
        import confluent_kafka

        c = self.members[name]
        tps = [confluent_kafka.TopicPartition(tp.topic, tp.partition, offset)
               for tp in c.assignment()]
        if tps:
            for r in c.commit(offsets=tps, asynchronous=False):
                assert r.error is None, r
        return {f"{tp.topic}:{tp.partition}" for tp in tps}

    def stop(self) -> None:
        for c in self.members.values():
            c.close()
        self.members.clear()


class RawMember:
    """A member that heartbeats only when the test says (``beat``), as a client would: it
    reports what it owns and takes what it is given. Stop calling ``beat`` and it is a member
    that stopped heartbeating."""

    def __init__(self, port: int, group: str, name: str, topics, assignor: str) -> None:
        self.port, self.group, self.name = port, group, name
        self.topics, self.assignor = list(topics), assignor
        self.member_id = f"{group}-{name}"
        self.epoch, self.owned = 0, []
        self.sock: socket.socket | None = None

    def beat(self) -> None:
        try:
            if self.sock is None:
                self.sock = socket.create_connection(("127.0.0.1", self.port), timeout=5)
            body = dict(group_id=self.group, member_id=self.member_id,
                        member_epoch=self.epoch, instance_id=None, rack_id=None,
                        topic_partitions=self.owned)
            if self.epoch == 0:
                body.update(rebalance_timeout=30_000, subscribed_topic_names=self.topics,
                            server_assignor=self.assignor, topic_partitions=[])
            r = call(self.sock, HB, 1, **body)
        except OSError:  # the server is down (a kill -9 case): the next beat reconnects
            self.sock = None
            return
        assert r.error_code == 0, r
        self.epoch = r.member_epoch
        if r.assignment is not None:
            self.owned = [dict(topic_id=t.topic_id, partitions=list(t.partitions))
                          for t in r.assignment.topic_partitions]

    def close(self) -> None:
        if self.sock is not None:
            self.sock.close()
            self.sock = None


class Books:
    """The server's view of one group (ConsumerGroupDescribe) and its offsets (OffsetFetch),
    through a connection that reconnects after a restart."""

    def __init__(self, port: int, group: str) -> None:
        self.port, self.group = port, group
        self.sock: socket.socket | None = None

    def _call(self, *args, **body):
        for attempt in range(50):
            try:
                if self.sock is None:
                    self.sock = socket.create_connection(("127.0.0.1", self.port), timeout=5)
                return call(self.sock, *args, **body)
            except OSError:
                self.sock = None
                time.sleep(0.1)
        raise AssertionError(f"no answer from 127.0.0.1:{self.port}")

    def describe(self):
        g = self._call(DESCRIBE, 1, group_ids=[self.group],
                       include_authorized_operations=False).groups[0]
        assert g.error_code == 0, g
        return g

    def members(self, g=None) -> dict:
        """member id -> (client id, epoch, assignment, target), assignments as
        ``{"topic:p"}``; checked: no partition in two members' assignments."""
        g = g or self.describe()
        out, owner = {}, {}
        for m in g.members:
            mine = {f"{t.topic_name}:{p}" for t in m.assignment.topic_partitions
                    for p in t.partitions}
            for tp in mine:
                assert tp not in owner, (f"{tp} owned by {owner[tp]} and {m.client_id} "
                                         f"at epoch {g.group_epoch}")
                owner[tp] = m.client_id
            target = {f"{t.topic_name}:{p}" for t in m.target_assignment.topic_partitions
                      for p in t.partitions}
            out[m.member_id] = (m.client_id, m.member_epoch, mine, target)
        return out

    def committed(self, partitions: set) -> dict:
        """``{"topic:p": offset}`` of ``partitions`` (an admin's fetch: no member)."""
        topics: dict = {}
        for tp in partitions:
            t, p = tp.rsplit(":", 1)
            topics.setdefault(t, []).append(int(p))
        r = self._call(OFFSET_FETCH, 9, require_stable=False, groups=[dict(
            group_id=self.group, member_id=None, member_epoch=-1,
            topics=[dict(name=t, partition_indexes=sorted(ps)) for t, ps in topics.items()])])
        return {f"{t.name}:{p.partition_index}": p.committed_offset
                for t in r.groups[0].topics for p in t.partitions}

    def close(self) -> None:
        if self.sock is not None:
            self.sock.close()
            self.sock = None
