"""Apache Kafka's StandardAuthorizer as the judge of offsetlog's: for each API the server
offers, a principal with and without each permission the API needs; the same ACLs created
over the wire on both targets by their super user, the answers compared field by field
(support/acl_targets.py). Every case runs twice: as ``User:alice``, authenticated with
SCRAM-SHA-512 on SASL_PLAINTEXT, and as ``User:ANONYMOUS`` on PLAINTEXT."""

from __future__ import annotations

import socket
import struct
import uuid

import pytest

from offsetlog.acl import AclBinding, Operation, PatternType, Permission, ResourceType
from offsetlog.bench.kafka_broker import ADMIN
from offsetlog.server.scram import make_credential
from offsetlog.store import OffsetStore
from support.acl_targets import ME, STANDARD, SUPER_USERS, USERS, AclTargets, Side, compare_phases
from support.kafka_diff import Req, at
from support.kafka_steps import commit_body, fetch, formed, heartbeat, join_body, leave
from support.sasl_raw import scram_login
from support.wire_raw import call
from support.wire_server import Server

TOPICS = ["orders:2", "secret:1"]
T, G, C, X = (ResourceType.TOPIC, ResourceType.GROUP, ResourceType.CLUSTER,
              ResourceType.TRANSACTIONAL_ID)
O = Operation


def allow(rtype, name, op, *, prefixed=False, perm=Permission.ALLOW, host="*", principal=ME):
    return AclBinding(rtype, name, PatternType.PREFIXED if prefixed else PatternType.LITERAL,
                      principal, host, op, perm)


def deny(rtype, name, op, **kw):
    return allow(rtype, name, op, perm=Permission.DENY, **kw)


@pytest.fixture(scope="module")
def acl_sides(kafka_acl_broker, tmp_path_factory):
    """Kafka's side and offsetlog's: the same topics, SCRAM users and super users."""
    with kafka_acl_broker.admin_socket() as sock:
        r = call(sock, 19, 7, topics=[dict(name=n, num_partitions=int(p), replication_factor=1,
                                           assignments=(), configs=())
                                      for n, p in (t.split(":") for t in TOPICS)],
                 timeout=30_000, validate_only=False)
        assert {x.error_code.value for x in r.topics} <= {0, 36}, r  # made, or there already
    directory = str(tmp_path_factory.mktemp("acl") / "store")
    with OffsetStore.open(directory) as store:
        for name, password in {**USERS, ADMIN[0]: ADMIN[1]}.items():
            store.registries.set_scram_credential(
                name, "SCRAM-SHA-512", make_credential("SCRAM-SHA-512", password))
    supers = ";".join(f"User:{u}" for u in (ADMIN[0], *SUPER_USERS))
    server = Server(directory, topics=TOPICS, config=[
        "listeners=PLAINTEXT://127.0.0.1:0,SASL_PLAINTEXT://127.0.0.1:0",
        "sasl.enabled.mechanisms=SCRAM-SHA-512", f"authorizer.class.name={STANDARD}",
        f"super.users={supers}"]).start()

    def our_admin():
        sock = socket.create_connection(("127.0.0.1", server.ports["SASL_PLAINTEXT"]),
                                        timeout=10)
        scram_login(sock, *ADMIN)
        return sock

    kafka = Side("Kafka", {"PLAINTEXT": kafka_acl_broker.port, **kafka_acl_broker.ports},
                 kafka_acl_broker.admin_socket)
    yield kafka, Side("offsetlog", dict(server.ports), our_admin)
    if server.proc is not None:
        server.stop()


@pytest.fixture(params=["alice", None], ids=["User:alice", "User:ANONYMOUS"])
def acl_targets(acl_sides, request):
    return AclTargets(*acl_sides, who=request.param)


@pytest.fixture
def named(acl_sides):
    """The targets with sessions as ``User:alice`` (for the cases about named principals)."""
    return AclTargets(*acl_sides, who="alice")


@pytest.fixture
def gid():
    return f"ag-{uuid.uuid4().hex[:10]}"


def errors_at(**paths):
    def check(answers):
        for path, value in paths.items():
            got = at(answers, path.replace("__", ".").lstrip("_"))
            assert got == value, f"{path}: {got!r}"
    return check


def one(acl_targets, acls, steps, **kw):
    return compare_phases(acl_targets, [(acls, steps)], **kw)


def two_topics_commit(g, v):
    body = commit_body(g)
    body["topics"] = [dict(name=t, partitions=[dict(
        partition_index=0, committed_offset=5, committed_leader_epoch=-1,
        committed_metadata="", commit_timestamp=-1)]) for t in ("orders", "secret")]
    return Req(8, v, body)


# -- offsets ---------------------------------------------------------------------------------

@pytest.mark.parametrize("v", [2, 7, 8, 9])
def test_offset_commit(acl_targets, gid, v):
    steps = [two_topics_commit(gid, v)]
    one(acl_targets, [], steps, check=errors_at(
        _0__topics__0__partitions__0__error_code="GROUP_AUTHORIZATION_FAILED"))
    one(acl_targets, [allow(G, gid, O.READ), allow(T, "orders", O.READ)], steps, check=errors_at(
        _0__topics__0__partitions__0__error_code="TOPIC_AUTHORIZATION_FAILED",  # first
        _0__topics__1__partitions__0__error_code="NONE"))
    # host restrictions: the client's address, or another
    one(acl_targets, [allow(G, gid, O.READ, host="127.0.0.1"), allow(T, "*", O.READ)], steps,
        check=errors_at(_0__topics__0__partitions__0__error_code="NONE"))
    one(acl_targets, [allow(G, gid, O.READ, host="10.9.9.9"), allow(T, "*", O.READ)], steps,
        check=errors_at(_0__topics__0__partitions__0__error_code="GROUP_AUTHORIZATION_FAILED"))
    one(acl_targets, [allow(G, "ag-", O.ALL, prefixed=True), allow(T, "*", O.READ),
                      deny(T, "sec", O.READ, prefixed=True)], steps, check=errors_at(
        _0__topics__0__partitions__0__error_code="TOPIC_AUTHORIZATION_FAILED",  # first
        _0__topics__1__partitions__0__error_code="NONE"))


@pytest.mark.parametrize("v", [1, 3, 7, 8, 9])
def test_offset_fetch(acl_targets, gid, v):
    both = (("orders", [0]), ("secret", [0]))
    committed = [allow(G, gid, O.READ), allow(T, "orders", O.READ), allow(T, "secret", O.READ)]
    phases = [
        (committed, [two_topics_commit(gid, 8)]),
        ([], [fetch(gid, v, topics=both)]),  # no Describe on the group
        ([allow(G, gid, O.DESCRIBE), allow(T, "orders", O.DESCRIBE)],
         [fetch(gid, v, topics=both)] + ([fetch(gid, v, topics=None)] if v >= 2 else [])),
    ]
    kafka = compare_phases(acl_targets, phases)
    assert "GROUP_AUTHORIZATION_FAILED" in repr(kafka[1])
    assert "TOPIC_AUTHORIZATION_FAILED" in repr(kafka[2])
    if v >= 2:  # every partition: only the describable topic's
        assert "secret" not in repr(kafka[3]) and "orders" in repr(kafka[3])


def test_offset_delete(acl_targets, gid):
    body = dict(group_id=gid, topics=[dict(name=t, partitions=[dict(partition_index=0)])
                                      for t in ("orders", "secret")])
    phases = [
        ([allow(G, gid, O.READ), allow(T, "*", O.READ)], [two_topics_commit(gid, 8)]),
        ([], [Req(47, 0, body)]),
        ([allow(G, gid, O.DELETE), allow(T, "orders", O.READ)], [Req(47, 0, body)]),
    ]
    kafka = compare_phases(acl_targets, phases)
    assert at(kafka, "1.error_code") == "GROUP_AUTHORIZATION_FAILED"
    assert "TOPIC_AUTHORIZATION_FAILED" in repr(kafka[2])


# -- groups ----------------------------------------------------------------------------------

@pytest.mark.parametrize("v", [0, 3, 4, 5])
def test_find_coordinator(acl_targets, gid, v):
    def fc(key_type):
        return Req(10, v, dict(key=gid, key_type=key_type, coordinator_keys=[gid]))
    steps = [fc(0), fc(1)]
    one(acl_targets, [], steps)
    one(acl_targets, [allow(G, gid, O.DESCRIBE), allow(X, gid, O.WRITE)], steps)


@pytest.mark.parametrize("v", [0, 4, 5, 9])
def test_join_sync_heartbeat_leave(acl_targets, gid, v):
    sv = min(v, 5)
    denied = [Req(11, v, join_body(gid))] + [heartbeat(gid, min(v, 4), gen=1, member="m"),
                                  leave(gid, sv, member="m"),
                                  Req(14, sv, dict(group_id=gid, generation_id=1, member_id="m",
                                                   group_instance_id=None,
                                                   protocol_type="consumer",
                                                   protocol_name="range", assignments=[]))]
    kafka = one(acl_targets, [allow(G, "other", O.READ)], denied)
    assert repr(kafka).count("GROUP_AUTHORIZATION_FAILED") == 4
    one(acl_targets, [allow(G, gid, O.READ)], formed(gid, v) + [heartbeat(gid, min(v, 4))])


@pytest.mark.parametrize("v", [0, 3, 5, 6])
def test_describe_and_list_groups(acl_targets, gid, v):
    other = gid + "-x"
    body = dict(groups=[gid, other], include_authorized_operations=True)
    phases = [
        ([allow(G, gid, O.READ)], formed(gid)),
        ([allow(G, gid, O.READ), allow(G, gid, O.DELETE, perm=Permission.DENY)],
         [Req(15, v, body), Req(16, min(v, 4), dict(states_filter=[], types_filter=[]))]),
        ([], [Req(15, v, body), Req(16, min(v, 4), dict(states_filter=[], types_filter=[]))]),
    ]
    kafka = compare_phases(acl_targets, phases)
    assert "GROUP_AUTHORIZATION_FAILED" in repr(kafka[-2])
    assert gid in repr(kafka[-3]) and gid not in repr(kafka[-1])


def test_delete_groups(acl_targets, gid):
    steps = [Req(42, 2, dict(groups_names=[gid, gid + "-x"]))]
    one(acl_targets, [allow(G, gid, O.DELETE)], steps, check=errors_at(
        _0__results__0__error_code="GROUP_ID_NOT_FOUND",
        _0__results__1__error_code="GROUP_AUTHORIZATION_FAILED"))


@pytest.mark.parametrize("v", [0, 1])
def test_consumer_group_heartbeat_and_describe(acl_targets, gid, v):
    steps = [Req(68, v, dict(group_id=gid, member_id="" if v == 0 else uuid.uuid4().hex[:22],
                             member_epoch=0, instance_id=None, rack_id=None,
                             rebalance_timeout=10_000, subscribed_topic_names=["orders"],
                             subscribed_topic_regex=None, server_assignor=None,
                             topic_partitions=[])),
             Req(69, v, dict(group_ids=[gid], include_authorized_operations=True))]
    one(acl_targets, [], steps, view=lambda a: [at(a, "0.error_code"), at(a, "1.groups.0")])


# -- topics ----------------------------------------------------------------------------------

@pytest.mark.parametrize("v", [1, 4, 8, 10, 12])
def test_metadata(acl_targets, v):
    named = dict(topics=[dict(name="orders", topic_id=None), dict(name="secret", topic_id=None)],
                 allow_auto_topic_creation=False, include_cluster_authorized_operations=True,
                 include_topic_authorized_operations=True)
    every = dict(named, topics=None)
    steps = [Req(3, v, named), Req(3, v, every)]
    one(acl_targets, [], steps)
    one(acl_targets, [allow(T, "orders", O.READ), allow(C, "kafka-cluster", O.DESCRIBE)], steps,
        check=lambda a: "TOPIC_AUTHORIZATION_FAILED" in repr(a[0]))


def test_metadata_auto_creation_needs_create(acl_targets, gid):
    body = dict(topics=[dict(name=gid, topic_id=None)], allow_auto_topic_creation=True,
                include_cluster_authorized_operations=False,
                include_topic_authorized_operations=False)
    one(acl_targets, [allow(T, gid, O.DESCRIBE)], [Req(3, 9, body)], check=errors_at(
        _0__topics__0__error_code="TOPIC_AUTHORIZATION_FAILED"))


@pytest.mark.parametrize("v", [1, 5, 8])
def test_list_offsets(acl_targets, v):
    body = dict(replica_id=-1, isolation_level=0, topics=[
        dict(name=t, partitions=[dict(partition_index=0, timestamp=-1, current_leader_epoch=-1,
                                      max_num_offsets=1)]) for t in ("orders", "secret")])
    one(acl_targets, [allow(T, "orders", O.DESCRIBE)], [Req(2, v, body)], check=errors_at(
        _0__topics__1__partitions__0__error_code="TOPIC_AUTHORIZATION_FAILED"))


def test_describe_configs(acl_targets):
    body = dict(resources=[dict(resource_type=2, resource_name="secret", configuration_keys=None),
                           dict(resource_type=4, resource_name="1", configuration_keys=None)],
                include_synonyms=False, include_documentation=False)
    one(acl_targets, [], [Req(32, 4, body)], check=errors_at(
        _0__results__0__error_code="TOPIC_AUTHORIZATION_FAILED",
        _0__results__1__error_code="CLUSTER_AUTHORIZATION_FAILED"))


@pytest.mark.parametrize("v", [2, 5, 7])
def test_create_topics_without_create(acl_targets, gid, v):
    body = dict(topics=[dict(name=gid, num_partitions=1, replication_factor=1, assignments=(),
                             configs=())], timeout=10_000, validate_only=True)
    one(acl_targets, [allow(T, "orders", O.CREATE)], [Req(19, v, body)], check=errors_at(
        _0__topics__0__error_code="TOPIC_AUTHORIZATION_FAILED"))
    # allowed to create, not to see the configs (validate_only: nothing is made)
    one(acl_targets, [allow(T, gid, O.CREATE)], [Req(19, v, body)],
        view=lambda a: [at(a, "0.topics.0.error_code"),
                        at(a, "0.topics.0.topic_config_error_code") if v >= 5 else None])


# -- transactions ----------------------------------------------------------------------------

@pytest.mark.parametrize("v", [0, 3, 5])
def test_init_producer_id(acl_targets, gid, v):
    def init(tid):
        return Req(22, v, dict(transactional_id=tid, transaction_timeout=60_000,
                               producer_id=-1, producer_epoch=-1))
    kafka = one(acl_targets, [], [init(gid), init(None)])
    assert [at(kafka, "0.error_code"), at(kafka, "1.error_code")] == [
        "TRANSACTIONAL_ID_AUTHORIZATION_FAILED", "CLUSTER_AUTHORIZATION_FAILED"]
    # no transactional id: Write on some topic is enough (authorizeByResourceType)
    one(acl_targets, [allow(T, "ord", O.WRITE, prefixed=True)], [init(None)],
        check=errors_at(_0__error_code="NONE"))
    one(acl_targets, [allow(T, "ord", O.WRITE, prefixed=True),
                      deny(T, "o", O.WRITE, prefixed=True)], [init(None)],
        check=errors_at(_0__error_code="CLUSTER_AUTHORIZATION_FAILED"))


def test_transaction_steps_need_the_transactional_id(acl_targets, gid):
    txn = dict(transactional_id=gid, producer_id=1, producer_epoch=0)
    steps = [Req(25, 3, dict(txn, group_id=gid)), Req(26, 3, dict(txn, committed=True)),
             Req(28, 3, dict(commit_body(gid), **txn)),
             Req(66, 1, dict(state_filters=[], producer_id_filters=[], duration_filter=-1))]
    # (DescribeTransactions: Kafka's answer of a refused id has start time -1, which kio
    # cannot decode; tests/server/test_wire_acls.py checks offsetlog's)
    kafka = one(acl_targets, [], steps)
    assert repr(kafka[:3]).count("TRANSACTIONAL_ID_AUTHORIZATION_FAILED") == 3
    # the transactional id but not the group
    kafka = one(acl_targets, [allow(X, gid, O.WRITE)], steps[:1] + steps[2:3])
    assert repr(kafka).count("GROUP_AUTHORIZATION_FAILED") == 2


def test_describe_producers(acl_targets):
    body = dict(topics=[dict(name=t, partition_indexes=[0]) for t in ("orders", "secret")])
    one(acl_targets, [allow(T, "orders", O.READ)], [Req(61, 0, body)], check=errors_at(
        _0__topics__1__partitions__0__error_code="TOPIC_AUTHORIZATION_FAILED"))


# -- the ACL APIs ----------------------------------------------------------------------------

def test_acl_apis_need_the_cluster(acl_targets, gid):
    creation = dict(resource_type=2, resource_name=gid, resource_pattern_type=3,
                    principal="User:bob", host="*", operation=3, permission_type=3)
    everything = dict(resource_type_filter=2, resource_name_filter=gid, pattern_type_filter=1,
                      principal_filter=None, host_filter=None, operation=1, permission_type=1)
    steps = [Req(30, 3, dict(creations=[creation])), Req(29, 3, everything),
             Req(31, 3, dict(filters=[everything]))]
    kafka = one(acl_targets, [], steps)
    assert repr(kafka).count("CLUSTER_AUTHORIZATION_FAILED") == 3
    bad = [dict(creation, resource_type=4), dict(creation, resource_name=""),
           dict(creation, principal="bob"), dict(creation, host="")]
    steps = [Req(30, v, dict(creations=[creation] + bad)) for v in (1, 2, 3)]
    steps += [Req(29, v, everything) for v in (1, 2, 3)]
    steps += [Req(30, 3, dict(creations=[dict(creation, operation=1)]))]  # ANY: the request fails
    steps += [Req(31, 3, dict(filters=[everything, everything]))]
    one(acl_targets, [allow(C, "kafka-cluster", O.ALTER), allow(C, "kafka-cluster", O.DESCRIBE)],
        steps, check=lambda a: "INVALID_REQUEST" in repr(a[0]))


# -- messages --------------------------------------------------------------------------------

@pytest.mark.parametrize("v", [4, 7, 12])
def test_fetch_needs_read(acl_targets, v):
    def fetch_records(topic):
        return Req(1, v, dict(replica_id=-1, max_wait=50, min_bytes=0, max_bytes=1 << 20,
                              isolation_level=0, session_id=0, session_epoch=-1, rack_id="",
                              forgotten_topics_data=[], topics=[dict(topic=topic, partitions=[
                                  dict(partition=0, current_leader_epoch=-1, fetch_offset=0,
                                       last_fetched_epoch=-1, log_start_offset=-1,
                                       partition_max_bytes=1 << 20)])]))
    one(acl_targets, [allow(T, "orders", O.READ)], [fetch_records("orders"),
                                                    fetch_records("secret")],
        check=errors_at(_0__responses__0__partitions__0__error_code="NONE",
                        _1__responses__0__partitions__0__error_code="TOPIC_AUTHORIZATION_FAILED"))


@pytest.mark.parametrize("v", [3, 9])
def test_produce_refused_for_want_of_write(acl_targets, gid, v):
    """Only the refusals are compared: offsetlog keeps no messages (Produce with Write is
    INVALID_REQUEST here, docs/PROTOCOL.md)."""
    def produce(tid, records=None):
        return Req(0, v, dict(transactional_id=tid, acks=1, timeout=1000, topic_data=[dict(
            name="orders", partition_data=[dict(index=0, records=records)])]))
    # a transactional batch's header (no records): offset, length, leader epoch, magic 2,
    # crc, attributes 0x10, last offset delta, timestamps, producer id 1, epoch 0, sequence
    batch = struct.pack(">qiibIhiqqqhii", 0, 49, -1, 2, 0, 0x10, 0, 0, 0, 1, 0, 0, 0)
    one(acl_targets, [allow(T, "orders", O.READ)],
        [produce(None), produce(gid), produce(gid, batch)], check=errors_at(
            _0__responses__0__partition_responses__0__error_code="TOPIC_AUTHORIZATION_FAILED",
            # the transactional id is checked only of transactional batches
            _1__responses__0__partition_responses__0__error_code="TOPIC_AUTHORIZATION_FAILED",
            _2__responses__0__partition_responses__0__error_code=(
                "TRANSACTIONAL_ID_AUTHORIZATION_FAILED")))


def test_consumer_group_heartbeat_needs_describe_on_the_subscribed_topics(acl_targets, gid):
    def hb(topics):
        return Req(68, 1, dict(group_id=gid, member_id=uuid.uuid4().hex[:22], member_epoch=0,
                               instance_id=None, rack_id=None, rebalance_timeout=10_000,
                               subscribed_topic_names=topics, subscribed_topic_regex=None,
                               server_assignor=None, topic_partitions=[]))
    one(acl_targets, [allow(G, gid, O.READ), allow(T, "orders", O.DESCRIBE)],
        [hb(["orders", "secret"])],
        view=lambda a: [at(a, "0.error_code"), at(a, "0.error_message")],
        check=lambda a: a == ["TOPIC_AUTHORIZATION_FAILED", None])


def test_consumer_group_describe_of_a_group_on_topics_not_describable(acl_targets, gid):
    member = uuid.uuid4().hex[:22]
    hb = Req(68, 1, dict(group_id=gid, member_id=member, member_epoch=0, instance_id=None,
                         rack_id=None, rebalance_timeout=10_000, subscribed_topic_names=["secret"],
                         subscribed_topic_regex=None, server_assignor=None, topic_partitions=[]))
    describe = Req(69, 1, dict(group_ids=[gid], include_authorized_operations=True))
    phases = [([allow(G, gid, O.READ), allow(T, "secret", O.DESCRIBE)], [hb]),
              ([allow(G, gid, O.DESCRIBE)], [describe])]
    compare_phases(acl_targets, phases, view=lambda a: at(a, "1.groups"),
                   check=lambda a: "TOPIC_AUTHORIZATION_FAILED" in repr(a))


# -- SCRAM credentials (docs/SECURITY.md) ----------------------------------------------------

def test_scram_credential_apis_need_the_cluster(acl_targets):
    """DescribeUserScramCredentials needs Describe on the cluster and AlterUserScramCredentials
    Alter on it: without them, every user of the request is refused (and nothing altered)."""
    user = f"u-{uuid.uuid4().hex[:8]}"
    steps = [Req(50, 0, dict(users=[dict(name=user)])),
             Req(51, 0, dict(deletions=[dict(name=user, mechanism=1)], upsertions=[]))]
    compare_phases(acl_targets, [([], steps),
                                  ([allow(C, "kafka-cluster", O.DESCRIBE),
                                    allow(C, "kafka-cluster", O.ALTER)], steps)],
                   check=errors_at(_0__results__0__error_code="CLUSTER_AUTHORIZATION_FAILED",
                                   _1__results__0__error_code="CLUSTER_AUTHORIZATION_FAILED",
                                   _2__results__0__error_code="RESOURCE_NOT_FOUND",
                                   _3__results__0__error_code="RESOURCE_NOT_FOUND"))


# -- named principals ------------------------------------------------------------------------

def test_super_users_by_name_need_no_acls(named, gid):
    """``carol`` is in super.users by name: everything is allowed without an ACL, the ACL
    APIs too; ``alice``, with the same (no) ACLs, is refused."""
    creation = dict(resource_type=2, resource_name=gid, resource_pattern_type=3,
                    principal="User:bob", host="*", operation=3, permission_type=3)
    steps = [two_topics_commit(gid, 8), fetch(gid, 8, topics=(("orders", [0]),)),
             Req(15, 5, dict(groups=[gid], include_authorized_operations=True)),
             Req(30, 3, dict(creations=[creation]))]
    kafka = compare_phases(named, [([], steps)], who="carol")
    assert "AUTHORIZATION_FAILED" not in repr(kafka), kafka
    kafka = compare_phases(named, [([], steps)], who="alice")
    assert repr(kafka).count("AUTHORIZATION_FAILED") >= 4, kafka


def test_a_deny_for_a_named_user_beats_a_wildcard_allow(named, gid):
    """``User:*`` may read every group and topic, but ``User:alice`` is denied the group:
    alice is refused, bob (only the wildcard's) commits."""
    acls = [allow(G, "*", O.READ, principal="User:*"), allow(T, "*", O.READ, principal="User:*"),
            deny(G, gid, O.READ, principal="User:alice")]
    steps = [two_topics_commit(gid, 8)]
    compare_phases(named, [(acls, steps)], who="alice", check=errors_at(
        _0__topics__0__partitions__0__error_code="GROUP_AUTHORIZATION_FAILED"))
    compare_phases(named, [(acls, steps)], who="bob", check=errors_at(
        _0__topics__0__partitions__0__error_code="NONE",
        _0__topics__1__partitions__0__error_code="NONE"))
    # a prefixed DENY of the topic for alice alone, under the wildcard's ALLOW
    acls = acls[:2] + [deny(T, "sec", O.READ, prefixed=True, principal="User:alice")]
    compare_phases(named, [(acls, steps)], who="alice", check=errors_at(
        _0__topics__0__partitions__0__error_code="TOPIC_AUTHORIZATION_FAILED",
        _0__topics__1__partitions__0__error_code="NONE"))


def test_acls_of_one_user_do_not_serve_another(named, gid):
    """alice's ACLs are alice's: bob, authenticated, is refused what she may do, and
    User:ANONYMOUS too; host restrictions apply to the named user's address."""
    acls = [allow(G, gid, O.READ, principal="User:alice"),
            allow(T, "orders", O.READ, principal="User:alice"),
            allow(T, "secret", O.READ, principal="User:alice", host="10.9.9.9")]
    steps = [two_topics_commit(gid, 8)]
    compare_phases(named, [(acls, steps)], who="alice", check=errors_at(
        _0__topics__0__partitions__0__error_code="TOPIC_AUTHORIZATION_FAILED",  # secret
        _0__topics__1__partitions__0__error_code="NONE"))
    for who in ("bob", None):
        compare_phases(named, [(acls, steps)], who=who, check=errors_at(
            _0__topics__0__partitions__0__error_code="GROUP_AUTHORIZATION_FAILED"))


def test_a_named_user_granted_the_cluster_manages_acls_and_users(named, gid):
    """Alter and Describe on the cluster granted to alice by name: she creates, lists and
    deletes ACLs and alters SCRAM credentials; bob, without them, cannot."""
    creation = dict(resource_type=3, resource_name=gid, resource_pattern_type=3,
                    principal="User:bob", host="*", operation=3, permission_type=3)
    match = dict(resource_type_filter=3, resource_name_filter=gid, pattern_type_filter=1,
                 principal_filter=None, host_filter=None, operation=1, permission_type=1)
    user = f"u-{uuid.uuid4().hex[:8]}"
    steps = [Req(30, 3, dict(creations=[creation])), Req(29, 3, match),
             Req(31, 3, dict(filters=[match])),
             Req(51, 0, dict(deletions=[dict(name=user, mechanism=2)], upsertions=[])),
             Req(50, 0, dict(users=[dict(name=user)]))]
    acls = [allow(C, "kafka-cluster", O.ALTER, principal="User:alice"),
            allow(C, "kafka-cluster", O.DESCRIBE, principal="User:alice")]
    kafka = compare_phases(named, [(acls, steps)], who="alice")
    assert "CLUSTER_AUTHORIZATION_FAILED" not in repr(kafka) and gid in repr(kafka[1])
    kafka = compare_phases(named, [(acls, steps)], who="bob")
    assert repr(kafka).count("CLUSTER_AUTHORIZATION_FAILED") >= 5, kafka


def test_describe_client_quotas_needs_describe_configs_on_the_cluster(acl_targets):
    """offsetlog has no quotas: Kafka with none set answers the same empty list, and refuses
    or rejects the same filters (``kafka-configs --describe --entity-type users`` asks)."""
    def comp(entity_type, match_type, match=None):
        return dict(entity_type=entity_type, match_type=match_type, match=match)
    filters = [[comp("user", 0, "bob")], [], [comp("user", 1)], [comp("client-id", 2)],
               [comp("ip", 0, "10.0.0.1")], [comp("nope", 0, "x")],
               [comp("user", 0, "a"), comp("user", 0, "b")], [comp("", 0, "x")],
               [comp("user", 7, "x")], [comp("user", 0, None)],
               [comp("ip", 0, "10.0.0.1"), comp("user", 0, "x")]]
    steps = [Req(48, v, dict(components=f, strict=False)) for v in (0, 1) for f in filters]
    kafka = one(acl_targets, [], steps)
    assert repr(kafka).count("CLUSTER_AUTHORIZATION_FAILED") == len(steps)
    kafka = one(acl_targets, [allow(C, "kafka-cluster", O.DESCRIBE_CONFIGS)], steps)
    assert [at(kafka, f"{i}.error_code") for i in range(len(filters))] == [
        "NONE"] * 5 + ["UNSUPPORTED_VERSION"] + ["INVALID_REQUEST"] * 5
