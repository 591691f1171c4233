"""SCRAM credentials in the store: managed over the wire (confluent-kafka's admin calls,
DescribeUserScramCredentials / AlterUserScramCredentials) and offline (``offsetlog users``);
they survive kill -9, compaction and snapshots, and the password is never stored."""

from __future__ import annotations

import json
import subprocess
import sys

import pytest
from confluent_kafka.admin import (
    AdminClient,
    ScramCredentialInfo,
    ScramMechanism,
    UserScramCredentialDeletion,
    UserScramCredentialUpsertion,
)

from offsetlog import TopicPartition
from offsetlog.server.scram import make_credential
from offsetlog.store import OffsetStore

from .test_secure_clients import ck_conf, ck_error, ck_join_and_commit


def admin(server, certs, user="alice"):
    return AdminClient(ck_conf(server, certs, "SASL_SSL", "SCRAM-SHA-512", user))


def test_alter_and_describe_over_the_wire_then_kill_9(secure_server, certs, group_id):
    a = admin(secure_server, certs)
    futures = a.alter_user_scram_credentials([
        UserScramCredentialUpsertion("carol", ScramCredentialInfo(ScramMechanism.SCRAM_SHA_256,
                                                                  8192), b"carol-pw"),
        UserScramCredentialDeletion("bob", ScramMechanism.SCRAM_SHA_512),
    ])
    for f in futures.values():
        f.result(timeout=10)
    described = {u: f.result(timeout=10) for u, f in
                 a.describe_user_scram_credentials(["carol", "bob"]).items()}
    infos = {u: sorted((i.mechanism.name, i.iterations)
                       for i in d.scram_credential_infos) for u, d in described.items()}
    assert infos == {"carol": [("SCRAM_SHA_256", 8192)], "bob": [("SCRAM_SHA_256", 4096)]}
    # deleting what does not exist: RESOURCE_NOT_FOUND, as Kafka answers
    with pytest.raises(Exception, match="RESOURCE_NOT_FOUND|does not exist"):
        a.alter_user_scram_credentials([UserScramCredentialDeletion(
            "nobody", ScramMechanism.SCRAM_SHA_256)])["nobody"].result(timeout=10)
    with pytest.raises(Exception, match="UNACCEPTABLE_CREDENTIAL|Too few iterations"):
        a.alter_user_scram_credentials([UserScramCredentialUpsertion(
            "dave", ScramCredentialInfo(ScramMechanism.SCRAM_SHA_256, 100),
            b"pw")])["dave"].result(timeout=10)
    secure_server.kill9()
    secure_server.start()
    conf = ck_conf(secure_server, certs, "SASL_SSL", "SCRAM-SHA-256", "carol", "carol-pw")
    ck_join_and_commit(conf, group_id)
    # bob's SCRAM-SHA-512 credential is gone; his SCRAM-SHA-256 one still works
    text = ck_error(ck_conf(secure_server, certs, "SASL_SSL", "SCRAM-SHA-512", "bob"))
    assert "Authentication failed" in text
    ck_join_and_commit(ck_conf(secure_server, certs, "SASL_SSL", "SCRAM-SHA-256", "bob"),
                       group_id + "-bob")


def test_credentials_survive_snapshots_and_compaction(tmp_path):
    directory = str(tmp_path / "store")
    with OffsetStore.open(directory, partitions=2, segment_bytes=4096) as store:
        reg = store.registries
        for i in range(60):  # many versions of a few keys, over many segments
            reg.set_scram_credential(f"u{i % 3}", "SCRAM-SHA-256",
                                     make_credential("SCRAM-SHA-256", f"pw{i}"))
        reg.set_scram_credential("gone", "SCRAM-SHA-512", make_credential("SCRAM-SHA-512", "x"))
        reg.set_scram_credential("gone", "SCRAM-SHA-512", None)
        for i in range(40):
            store.commit_sync("g", {TopicPartition("t", 0): i})  # roll segments
        expected = reg.scram_credentials()
        assert set(expected) == {("u0", "SCRAM-SHA-256"), ("u1", "SCRAM-SHA-256"),
                                 ("u2", "SCRAM-SHA-256")}
        store.snapshot()
        results = store.compact()
        assert any(r.records_after < r.records_before for r in results), results
    with OffsetStore.open(directory) as store:
        assert store.registries.scram_credentials() == expected
    import shutil
    shutil.rmtree(tmp_path / "store" / "snapshots")  # replay from the (compacted) log alone
    with OffsetStore.open(directory) as store:
        assert store.registries.scram_credentials() == expected


def test_a_snapshot_without_credentials_has_no_section():
    from offsetlog.table import OffsetTable
    assert "user_scram_credentials" not in OffsetTable().snapshot_state()


def run_cli(*args, stdin=None):
    return subprocess.run([sys.executable, "-m", "offsetlog", *args], input=stdin,
                          capture_output=True, text=True, timeout=60)


def test_the_users_command(tmp_path):
    directory = str(tmp_path / "store")
    OffsetStore.open(directory).close()
    r = run_cli("users", directory, "add", "erin", "--mechanism", "SCRAM-SHA-256",
                "--mechanism", "SCRAM-SHA-512", "--password-stdin", stdin="erin pw\n")
    assert r.returncode == 0, r.stderr
    listed = json.loads(run_cli("users", directory, "list", "--json").stdout)
    assert listed == {"users": [
        {"user": "erin", "mechanism": "SCRAM-SHA-256", "iterations": 4096},
        {"user": "erin", "mechanism": "SCRAM-SHA-512", "iterations": 4096}]}
    with OffsetStore.open(directory) as store:
        from offsetlog.server.scram import check_password
        c = store.registries.scram_credential("erin", "SCRAM-SHA-512")
        assert check_password("SCRAM-SHA-512", c, b"erin pw")
    # the password is nowhere in the store's files
    for f in (tmp_path / "store").rglob("*"):
        if f.is_file():
            assert b"erin pw" not in f.read_bytes()
    r = run_cli("users", directory, "delete", "erin", "--mechanism", "SCRAM-SHA-256")
    assert r.returncode == 0, r.stderr
    assert [u["mechanism"] for u in json.loads(
        run_cli("users", directory, "list", "--json").stdout)["users"]] == ["SCRAM-SHA-512"]
    assert run_cli("users", directory, "delete", "nobody").returncode == 1
    assert run_cli("users", directory, "add").returncode == 2  # no name
    # no password argument exists
    assert run_cli("users", directory, "add", "x", "--password", "pw").returncode == 2


def test_users_is_refused_while_the_store_is_open(tmp_path):
    directory = str(tmp_path / "store")
    with OffsetStore.open(directory):
        r = run_cli("users", directory, "list")
        assert r.returncode == 1 and "open in another process" in r.stderr



def test_users_add_makes_a_new_store_and_the_others_refuse_a_missing_one(tmp_path):
    """A server's first users are added before its first start (the README's example), so
    ``add`` makes the store; ``list`` and ``delete`` of a directory that is not there fail."""
    directory = str(tmp_path / "new" / "store")
    assert run_cli("users", directory, "list").returncode == 2
    assert run_cli("users", directory, "delete", "erin").returncode == 2
    r = run_cli("users", directory, "add", "erin", "--password-stdin", stdin="erin pw\n")
    assert r.returncode == 0, r.stderr
    with OffsetStore.open(directory, create=False) as store:
        assert store.registries.scram_credential("erin", "SCRAM-SHA-512") is not None
