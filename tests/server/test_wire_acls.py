"""offsetlog's ACLs on the wire, where no Kafka broker is needed to judge: the settings,
SECURITY_DISABLED without an authorizer, super users and allow.everyone.if.no.acl.found,
ACLs made over the wire surviving kill -9 of the server, and Kafka's own CLI
(``kafka-acls``: AclCommand from the cached jars) adding, listing and removing ACLs. What
each API checks is judged by Kafka in tests/kafka/test_diff_acls.py."""

from __future__ import annotations

import socket
import struct
import subprocess

import pytest

from offsetlog import OffsetStore
from offsetlog.acl import AclBinding
from offsetlog.server.config import ConfigError, ServerConfig
from support.kafka_broker import kafka_tools
from support.wire_raw import call, frame
from support.wire_server import Server

STANDARD = "authorizer.class.name=org.apache.kafka.metadata.authorizer.StandardAuthorizer"
EVERYTHING = dict(resource_type_filter=1, resource_name_filter=None, pattern_type_filter=1,
                  principal_filter=None, host_filter=None, operation=1, permission_type=1)
ALTER_CLUSTER = AclBinding(4, "kafka-cluster", 3, "User:ANONYMOUS", "*", 7, 3)
DESCRIBE_CLUSTER = ALTER_CLUSTER._replace(operation=8)


def test_settings():
    c = ServerConfig.parse([STANDARD, "super.users=User:a;User:b",
                            "allow.everyone.if.no.acl.found=true"])
    assert (c.authorizer.endswith("StandardAuthorizer"), c.super_users,
            c.allow_everyone_if_no_acl) == (True, "User:a;User:b", True)
    assert ServerConfig().authorizer == "" and not ServerConfig().allow_everyone_if_no_acl
    with pytest.raises(ConfigError):
        ServerConfig.parse(["authorizer.class.name=com.example.MyAuthorizer"])


def serve(tmp_path, *config, acls=()) -> Server:
    path = str(tmp_path / "store")
    if acls:
        with OffsetStore.open(path) as s:
            s.acls.create(acls)
    return Server(path, config=list(config)).start()


def connect(server: Server) -> socket.socket:
    return socket.create_connection(("127.0.0.1", server.port), timeout=10)


def test_without_an_authorizer_the_acl_apis_answer_security_disabled(tmp_path):
    server = serve(tmp_path)
    try:
        with connect(server) as sock:
            r = call(sock, 29, 3, **EVERYTHING)
            assert (int(r.error_code), r.error_message) == (54, "No Authorizer is configured.")
            r = call(sock, 30, 3, creations=[dict(
                resource_type=2, resource_name="t", resource_pattern_type=3,
                principal="User:a", host="*", operation=3, permission_type=3)])
            assert int(r.results[0].error_code) == 54
            r = call(sock, 31, 3, filters=[EVERYTHING])
            assert int(r.filter_results[0].error_code) == 54
            # and everything else is allowed, as today
            r = call(sock, 16, 4, states_filter=[])
            assert int(r.error_code) == 0
    finally:
        server.stop()


def commit_code(sock, group="g") -> int:
    r = call(sock, 8, 8, group_id=group, generation_id_or_member_epoch=-1, member_id="",
             group_instance_id=None, topics=[dict(name="orders", partitions=[dict(
                 partition_index=0, committed_offset=1, committed_leader_epoch=-1,
                 committed_metadata="")])])
    return int(r.topics[0].partitions[0].error_code)


@pytest.mark.parametrize("config, code", [
    ((), 30),  # no ACL: GROUP_AUTHORIZATION_FAILED
    (("super.users=User:ANONYMOUS",), 0),
    (("allow.everyone.if.no.acl.found=true",), 0),
    (("super.users=User:someone-else",), 30),
])
def test_super_users_and_allow_everyone(tmp_path, config, code):
    server = serve(tmp_path, STANDARD, *config)
    try:
        with connect(server) as sock:
            assert commit_code(sock) == code
    finally:
        server.stop()


def test_acls_made_over_the_wire_survive_kill_9(tmp_path):
    server = serve(tmp_path, STANDARD, acls=[ALTER_CLUSTER, DESCRIBE_CLUSTER])
    try:
        with connect(server) as sock:
            assert commit_code(sock) == 30
            r = call(sock, 30, 3, creations=[
                dict(resource_type=3, resource_name="g", resource_pattern_type=3,
                     principal="User:ANONYMOUS", host="*", operation=3, permission_type=3),
                dict(resource_type=2, resource_name="ord", resource_pattern_type=4,
                     principal="User:*", host="*", operation=2, permission_type=3)])
            assert [int(x.error_code) for x in r.results] == [0, 0]
            assert commit_code(sock) == 0  # in force at once
        server.kill9()
        server.start()
        with connect(server) as sock:
            assert commit_code(sock) == 0
            r = call(sock, 29, 3, **EVERYTHING)
            assert sorted((x.resource_type, x.resource_name) for x in r.resources) == [
                (2, "ord"), (3, "g"), (4, "kafka-cluster")]
            r = call(sock, 31, 3, filters=[dict(EVERYTHING, resource_type_filter=3)])
            assert [a.resource_name for a in r.filter_results[0].matching_acls] == ["g"]
            assert commit_code(sock) == 30  # deleted: refused again
    finally:
        if server.proc is not None:
            server.stop()


def test_describe_transactions_of_an_id_not_allowed(tmp_path):
    server = serve(tmp_path, STANDARD)
    try:
        with connect(server) as sock:
            # read by hand: its start time is -1, which kio refuses to decode. v0 is
            # flexible: length, correlation id, tagged fields, throttle time, the states'
            # compact length (count + 1), the first state's error code
            sock.sendall(frame(65, 0, transactional_ids=["t1"]))
            size = struct.unpack(">i", sock.recv(4, socket.MSG_WAITALL))[0]
            data = sock.recv(size, socket.MSG_WAITALL)
            assert data[4] == 0 and data[9] == 2  # no tags; one state
            assert struct.unpack(">h", data[10:12])[0] == 53
    finally:
        server.stop()


def acl_command(server: Server, *args: str) -> str:
    java, classpath = kafka_tools()
    r = subprocess.run([java, "-cp", classpath,
                        "org.apache.kafka.tools.AclCommand", "--bootstrap-server",
                        server.bootstrap, *args], capture_output=True, text=True, timeout=120)
    assert r.returncode == 0, r.stdout + r.stderr
    return r.stdout


def test_kafka_acls_adds_lists_and_removes(tmp_path):
    server = serve(tmp_path, STANDARD, acls=[ALTER_CLUSTER, DESCRIBE_CLUSTER])
    try:
        acl_command(server, "--add", "--allow-principal", "User:ANONYMOUS", "--operation",
                    "Read", "--topic", "orders", "--group", "g")
        listed = acl_command(server, "--list")
        assert "name=orders, patternType=LITERAL" in listed and "name=g," in listed
        with connect(server) as sock:
            assert commit_code(sock) == 0
        acl_command(server, "--remove", "--force", "--allow-principal", "User:ANONYMOUS",
                    "--operation", "Read", "--group", "g")
        assert "name=g," not in acl_command(server, "--list")
        with connect(server) as sock:
            assert commit_code(sock) == 30
    finally:
        server.stop()


def test_an_admin_client_creates_describes_and_deletes_acls(tmp_path):
    """kafka-python's admin client (its own CreateAcls/DescribeAcls/DeleteAcls versions)."""
    from kafka.admin import (
        ACL,
        ACLFilter,
        ACLOperation,
        ACLPermissionType,
        ACLResourcePatternType,
        KafkaAdminClient,
        ResourcePattern,
        ResourcePatternFilter,
        ResourceType,
    )

    server = serve(tmp_path, STANDARD, acls=[ALTER_CLUSTER, DESCRIBE_CLUSTER])
    admin = KafkaAdminClient(bootstrap_servers=server.bootstrap, client_id="acl-admin")
    try:
        acl = ACL(principal="User:ANONYMOUS", host="*", operation=ACLOperation.READ,
                  permission_type=ACLPermissionType.ALLOW,
                  resource_pattern=ResourcePattern(ResourceType.GROUP, "g",
                                                   ACLResourcePatternType.LITERAL))
        topic = ACL(principal="User:ANONYMOUS", host="*", operation=ACLOperation.READ,
                    permission_type=ACLPermissionType.ALLOW,
                    resource_pattern=ResourcePattern(ResourceType.TOPIC, "ord",
                                                     ACLResourcePatternType.PREFIXED))
        result = admin.create_acls([acl, topic])
        assert result["succeeded"] == [acl, topic] and not result["failed"]
        with connect(server) as sock:
            assert commit_code(sock) == 0
        groups = ACLFilter(principal=None, host=None, operation=ACLOperation.ANY,
                           permission_type=ACLPermissionType.ANY,
                           resource_pattern=ResourcePatternFilter(
                               ResourceType.GROUP, None, ACLResourcePatternType.ANY))
        listed, error = admin.describe_acls(groups)
        assert [a.resource_pattern.resource_name for a in listed] == ["g"]
        ((_, deleted, _),) = admin.delete_acls([groups])
        assert [a.resource_pattern.resource_name for a in deleted] == ["g"]
        assert admin.describe_acls(groups)[0] == []
    finally:
        admin.close()
        server.stop()
