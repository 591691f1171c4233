"""kafkajs 2.x (Node.js) against the server: a consumer joins a group, commits offsets as
its member and fetches them back with the admin client; two consumers rebalance on join and
leave; transactional offsets, and the admin's setOffsets and resetOffsets.

kafkajs is installed on first use with npm into ``tests/server/.kafkajs/`` (git-ignored)
and reused after; the test is skipped when node or npm is missing or the install fails
(no registry reachable), so ``make test`` passes on a machine without them.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
from pathlib import Path

import pytest

from support.wire_clients import described, kp_consumer

HERE = Path(__file__).parent
PREFIX = HERE / ".kafkajs"
SCRIPT = HERE / "kafkajs_group.js"
VERSION = "kafkajs@2"


@pytest.fixture(scope="module")
def node() -> str:
    node, npm = shutil.which("node"), shutil.which("npm")
    if node is None or npm is None:
        pytest.skip("node and npm are needed for the kafkajs test")
    if not (PREFIX / "node_modules" / "kafkajs" / "package.json").exists():
        PREFIX.mkdir(exist_ok=True)
        try:
            # short fetch timeouts: offline, npm would otherwise retry for minutes
            r = subprocess.run([npm, "install", "--prefix", str(PREFIX), "--no-audit",
                                "--no-fund", "--no-save", "--silent", "--fetch-retries=1",
                                "--fetch-timeout=30000", VERSION],
                               capture_output=True, text=True, timeout=180)
        except subprocess.TimeoutExpired:
            pytest.skip(f"npm install {VERSION} timed out")
        if r.returncode != 0:
            pytest.skip(f"npm install {VERSION} failed: {r.stderr.strip()[-500:]}")
    return node


def test_kafkajs_joins_commits_and_fetches(node, server, group_id):
    env = dict(os.environ, NODE_PATH=str(PREFIX / "node_modules"))
    r = subprocess.run([node, str(SCRIPT), server.bootstrap, group_id, "orders"],
                       capture_output=True, text=True, timeout=120, env=env)
    assert r.returncode == 0, r.stderr[-3000:]
    out = json.loads(r.stdout.strip().splitlines()[-1])
    # kafkajs saw itself join (alone: it leads) and got every partition
    assert out["memberId"] and out["leaderId"] == out["memberId"]
    assert out["protocol"] == "RoundRobinAssigner"
    assert sorted(out["assignment"]["orders"]) == [0, 1, 2, 3]
    assert out["described"] == "Stable"
    fetched = {int(p["partition"]): int(p["offset"]) for t in out["fetched"]
               for p in t["partitions"]}
    assert fetched[0] == 42 and fetched[1] == 7
    # what another client library reads
    from kafka import TopicPartition as KTP

    c = kp_consumer(server, group_id)
    try:
        assert c.committed(KTP("orders", 0)) == 42 and c.committed(KTP("orders", 1)) == 7
    finally:
        c.close()
    # it left the group on disconnect
    assert described(server, group_id)["state"] == "Empty"


def test_kafkajs_transactions_and_offset_admin(node, server, group_id):
    """kafkajs's sendOffsets in a committed and an aborted transaction, then the admin's
    setOffsets and resetOffsets, which commit through a member of their own: resetOffsets
    commits -2 (kafkajs's marker for "earliest", which its consumers resolve), and Kafka
    stores a negative offset as it stores any other."""
    env = dict(os.environ, NODE_PATH=str(PREFIX / "node_modules"))
    r = subprocess.run([node, str(HERE / "kafkajs_admin_txn.js"), server.bootstrap, group_id,
                        "orders", f"tx-{group_id}"],
                       capture_output=True, text=True, timeout=120, env=env)
    assert r.returncode == 0, r.stderr[-3000:]
    lines = r.stdout.strip().splitlines()
    assert lines, f"kafkajs printed nothing: {r.stderr[-3000:]}"
    steps = {k: {int(p): o for p, o in v.items()} for k, v in json.loads(lines[-1]).items()}
    assert steps["committed"] == {0: 55, 1: -1, 2: -1, 3: -1}
    assert steps["aborted"] == steps["committed"]
    assert steps["set"] == {0: 55, 1: -1, 2: 9, 3: -1}
    assert steps["reset"] == {0: -2, 1: -2, 2: -2, 3: -2}
    assert described(server, group_id)["state"] == "Empty"


def test_kafkajs_group_rebalances_on_join_and_leave(node, server, group_id):
    env = dict(os.environ, NODE_PATH=str(PREFIX / "node_modules"))
    r = subprocess.run([node, str(HERE / "kafkajs_rebalance.js"), server.bootstrap, group_id,
                        "orders"], capture_output=True, text=True, timeout=120, env=env)
    assert r.returncode == 0, r.stderr[-3000:]
    steps = json.loads(r.stdout.strip().splitlines()[-1])
    assert sorted(steps["alone"]["a"]["partitions"]) == [0, 1, 2, 3]
    both = steps["both"]
    # a join: each partition owned by exactly one of the two, and the first one still leads
    assert sorted(both["a"]["partitions"] + both["b"]["partitions"]) == [0, 1, 2, 3]
    assert both["a"]["partitions"] and both["b"]["partitions"]
    assert both["a"]["leader"] and not both["b"]["leader"]
    # a leave: everything back to the one left
    assert sorted(steps["after"]["a"]["partitions"]) == [0, 1, 2, 3]
    assert described(server, group_id)["state"] == "Empty"
