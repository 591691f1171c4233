"""ACL bindings in the store: ACL records (type 12) through the one apply path, kept by
kill -9, compaction and snapshots, and a snapshot without ACLs written as before."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import textwrap

from offsetlog import OffsetStore, TopicPartition
from offsetlog.acl import AclBinding, AclFilter, Operation, PatternType, Permission, ResourceType
from offsetlog.compaction.rules import record_key
from offsetlog.log import records as rec
from offsetlog.table import OffsetTable
from support.snapshots import open_store, tables

T, G = ResourceType.TOPIC, ResourceType.GROUP
A = AclBinding(T, "orders", PatternType.LITERAL, "User:alice", "*", Operation.READ,
               Permission.ALLOW)
B = AclBinding(G, "app-", PatternType.PREFIXED, "User:alice", "10.0.0.1", Operation.READ,
               Permission.DENY)


def test_create_list_delete(tmp_path):
    with open_store(tmp_path) as s:
        s.acls.create([A, B, A])
        assert s.acls.list() == sorted([A, B])
        s.acls.create([A])  # present already: nothing new
        assert s.acls.list(AclFilter(resource_type=G)) == [B]
        deleted = s.acls.delete([AclFilter(resource_type=T), AclFilter(principal="User:alice")])
        assert deleted == [[A], sorted([A, B])]  # each filter's matches, as Kafka answers
        assert s.acls.list() == []
        assert s.acls.delete([AclFilter()]) == [[]]


def test_the_table_applies_acl_records_and_their_tombstones():
    table = OffsetTable()
    table.apply(0, rec.acl(0, tuple(A), {"created_timestamp": 1}))
    assert table.acls == {tuple(A): {"created_timestamp": 1}}
    table.apply(1, rec.acl(0, tuple(A), None))
    assert table.acls == {}


def test_compaction_key_is_the_whole_binding():
    ka = record_key(rec.acl(0, tuple(A), {"created_timestamp": 1}))
    kb = record_key(rec.acl(0, tuple(A._replace(host="h")), {"created_timestamp": 1}))
    assert ka is not None and kb is not None and ka != kb
    assert ka == record_key(rec.acl(0, tuple(A), None))  # a tombstone supersedes its binding


def test_acls_survive_compaction(tmp_path, clock):
    with open_store(tmp_path, segment_bytes=1024, clock=clock) as s:
        s.acls.create([A, B])
        s.acls.delete([AclFilter(resource_type=G)])
        s.acls.create([B])
        s.acls.delete([AclFilter(resource_type=G)])
        group = next(g for g in (f"g{i}" for i in range(100)) if s.partition_of(g) == 0)
        for i in range(200):  # roll segments of partition 0 past the ACL records
            s.commit_sync(group, {TopicPartition("t", i % 3): i})
        results = s.compact()
        (r0,) = [r for r in results if r.partition == 0]
        assert r0.records_after < r0.records_before  # the cleaning did drop something
        assert s.acls.list() == [A]
    with open_store(tmp_path) as s:
        assert s.acls.list() == [A]


def test_acls_survive_a_snapshot_and_a_store_without_any_writes_no_section(tmp_path):
    with open_store(tmp_path, snapshot_on_close=False) as s:
        s.commit_sync("g", {TopicPartition("t", 0): 1})
        assert "acls" not in s._parts[0].table.snapshot_state()  # old readers keep it
        s.acls.create([A, B])
        s.snapshot()
        live = tables(s)
    with open_store(tmp_path) as s:
        r = s.recovery_report
        assert r.snapshots_loaded and not r.snapshots_discarded
        assert r.partitions[0].records == 0  # the ACLs came from the snapshot, not the log
        assert s.acls.list() == sorted([A, B]) and tables(s) == live


CHILD = textwrap.dedent("""
    import sys, time
    from offsetlog import OffsetStore, TopicPartition
    from offsetlog.acl import AclBinding
    s = OffsetStore.open(sys.argv[1], partitions=3, fsync="always")
    s.acls.create([AclBinding(2, "orders", 3, "User:alice", "*", 3, 3)])
    s.acls.create([AclBinding(3, "app-", 4, "User:alice", "10.0.0.1", 3, 2)])
    s.acls.delete([])
    print("created", flush=True)
    time.sleep(60)
""")


def test_acls_survive_kill_9(tmp_path):
    path = str(tmp_path / "store")
    child = subprocess.Popen([sys.executable, "-c", CHILD, path], stdout=subprocess.PIPE,
                             text=True, env={**os.environ, "PYTHONPATH": os.getcwd()})
    try:
        assert child.stdout.readline().strip() == "created"
    finally:
        child.send_signal(signal.SIGKILL)
        child.wait()
    with OffsetStore.open(path, partitions=3) as s:
        assert s.acls.list() == sorted([A, B])


def test_format_md_documents_the_acl_record_byte_for_byte():
    import re

    import msgpack

    text = open(os.path.join(os.path.dirname(__file__), "..", "..", "docs", "FORMAT.md"),
                encoding="utf-8").read()
    block = text.split("#### `ACL` (type 12)", 1)[1].split("```", 2)[1]
    out = b""
    for token in re.findall(r'"[^"]*"|\S+', block):
        out += token[1:-1].encode() if token.startswith('"') else bytes([int(token, 16)])
    record = rec.acl(0, tuple(A), {"created_timestamp": 1_700_000_000_000})
    assert out == msgpack.packb(list(record), use_bin_type=True)
