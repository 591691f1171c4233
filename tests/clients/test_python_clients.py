"""The Python clients as judges in the same sessions as the others, against offsetlog and
against Kafka: kafka-python 3, confluent-kafka (librdkafka) and aiokafka, each a member in a
child process (tests/clients/pymember.py). Their older tests (tests/server/) judge offsetlog
alone; here each outcome must also equal Kafka's.

librdkafka does not tell its generation, so its sessions compare assignments, not
generations; aiokafka has no cooperative assignor. kafka-python sometimes rebalances once
more than the others (docs/PROTOCOL.md, "What the clients showed us"), on either target, so
its generations are left out of the comparison.
"""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

from support.client_runners import MemberProcess
from support.client_sessions import cooperative_session, group_session, on_targets, same

SCRIPT = Path(__file__).parent / "pymember.py"


class PythonMembers:
    def __init__(self, client: str) -> None:
        self.client = client

    def member(self, bootstrap, group, topic, strategy, client_id, instance_id, session_ms):
        return MemberProcess([sys.executable, "-u", str(SCRIPT), self.client, bootstrap, group,
                              topic, strategy, client_id, instance_id or "-", str(session_ms)],
                             f"{self.client} {client_id}")


#: where the assignor puts a static member (the Java client's and kafka-python's range
#: order static members by instance id before dynamic ones; librdkafka's and aiokafka's
#: by member id)
STATIC_FIRST = {"kafka-python": True, "confluent": False, "aiokafka": False}


def without_generations(value):
    if isinstance(value, dict):
        return {k: without_generations(v) for k, v in value.items() if k != "generation"}
    return value


@pytest.mark.parametrize("client", ["kafka-python", "confluent", "aiokafka"])
def test_python_client_group_session(client, targets, gid):
    results = on_targets(targets, lambda t: group_session(PythonMembers(client), t, gid,
                                                          "orders", 4))
    for name, r in results.items():
        assert r["formed"]["assignment"] == {"a": [0, 1, 2, 3]}, name
        assert r["formed"]["described"] == {"state": "Stable", "protocol": "range"}, name
        assert r["joined"]["assignment"] == {"a": [0, 1], "b": [2, 3]}, name
        assert r["left"]["assignment"] == {"a": [0, 1, 2, 3]}, name
        assert r["joined_again"]["assignment"] == {"a": [0, 1], "c": [2, 3]}, name
        assert r["heartbeat_missed"]["assignment"] == {"a": [0, 1, 2, 3]}, name
        static = r["static_joined"]["assignment"]
        assert sorted(static["a"] + static["s"]) == [0, 1, 2, 3] and len(static["s"]) == 2
        rejoined = r["static_rejoined"]
        assert rejoined["partitions"] == static["s"], name
        assert rejoined["generation"] == r["static_joined"]["generation"], name
        assert not rejoined["others_rebalanced"] and rejoined["described_members"] == 2, name
        assert r["commit"]["error"] is None, name
        assert r["fetched"] == {static["a"][0]: 42, static["a"][1]: None}, name
    for r in results.values():
        r.pop("after_close")  # when the static member's session ends is timing
    same(results if client != "kafka-python" else without_generations(results),
         f"{client} group session")


@pytest.mark.parametrize("client", ["kafka-python", "confluent"])
def test_python_client_cooperative_sticky(client, targets, gid):
    results = on_targets(targets, lambda t: cooperative_session(PythonMembers(client), t, gid,
                                                                "wide", 6))
    for name, r in results.items():
        assert r["alone"] == [0, 1, 2, 3, 4, 5], name
        assert len(r["joined"]["a"]) == len(r["joined"]["b"]) == 3, name
        assert r["a_kept_throughout"] == r["joined"]["a"], name
        assert r["joined"]["generation"] in (2, None) or (
            client == "kafka-python" and r["joined"]["generation"] > 2), name
        assert r["protocol"] == "cooperative-sticky", name
        assert r["left"]["a"] == [0, 1, 2, 3, 4, 5], name
    same(results if client != "kafka-python" else without_generations(results),
         f"{client} cooperative-sticky session")
