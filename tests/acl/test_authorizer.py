"""offsetlog.acl's authorizer: Kafka's StandardAuthorizer rules, case by case, and against a
plain model of them (hypothesis) that reads each rule off the binding, with no index."""

from __future__ import annotations

from hypothesis import given, settings
from hypothesis import strategies as st

from offsetlog.acl import (
    AclBinding,
    AclFilter,
    Authorizer,
    Operation,
    PatternType,
    Permission,
    ResourceType,
    binding_error,
    concrete,
    parse_super_users,
)

T, G, C, X = ResourceType.TOPIC, ResourceType.GROUP, ResourceType.CLUSTER, \
    ResourceType.TRANSACTIONAL_ID
LIT, PRE = PatternType.LITERAL, PatternType.PREFIXED
ALLOW, DENY = Permission.ALLOW, Permission.DENY
O = Operation
ALICE, BOB = "User:alice", "User:bob"


def acl(rtype=T, name="orders", pattern=LIT, principal=ALICE, host="*", op=O.READ,
        perm=ALLOW) -> AclBinding:
    return AclBinding(rtype, name, pattern, principal, host, op, perm)


def ok(acls, op=O.READ, rtype=T, name="orders", principal=ALICE, host="10.0.0.1", **kw):
    return Authorizer(acls, **kw).authorize(principal, host, op, rtype, name)


def test_no_acls_denies_unless_allow_everyone():
    assert not ok([])
    assert ok([], allow_if_no_acl=True)


def test_allow_everyone_only_where_no_acl_applies():
    # an ACL of another principal applies to the resource: no default allow any more
    assert not ok([acl(principal=BOB)], allow_if_no_acl=True)
    # an ACL of another resource does not
    assert ok([acl(name="other")], allow_if_no_acl=True)


def test_literal_prefixed_and_wildcard_patterns():
    assert ok([acl(name="orders")])
    assert not ok([acl(name="order")])  # a literal is the whole name
    assert ok([acl(name="ord", pattern=PRE)])
    assert not ok([acl(name="ordersx", pattern=PRE)])
    assert ok([acl(name="*")])
    assert not ok([acl(name="*", pattern=PRE)])  # "*" is only a wildcard as a literal
    assert ok([acl(name="*", pattern=PRE)], name="*x")


def test_principal_and_host():
    assert ok([acl(principal="User:*")])
    assert not ok([acl(principal=BOB)])
    assert ok([acl(host="10.0.0.1")])
    assert not ok([acl(host="10.0.0.2")])


def test_deny_wins_over_allow():
    assert not ok([acl(), acl(perm=DENY)])
    assert not ok([acl(name="*"), acl(name="or", pattern=PRE, perm=DENY)])
    assert not ok([acl(), acl(principal="User:*", host="10.0.0.1", perm=DENY)])


def test_implications_allow_only():
    for op in (O.READ, O.WRITE, O.DELETE, O.ALTER):
        assert ok([acl(op=op)], op=O.DESCRIBE)
    assert not ok([acl(op=O.CREATE)], op=O.DESCRIBE)
    assert ok([acl(op=O.ALTER_CONFIGS)], op=O.DESCRIBE_CONFIGS)
    assert not ok([acl(op=O.DESCRIBE)], op=O.READ)
    assert ok([acl(op=O.ALL)], op=O.WRITE)
    # a DENY of Read does not deny Describe; a DENY of All does
    assert ok([acl(op=O.READ), acl(op=O.READ, perm=DENY), acl(op=O.DESCRIBE)], op=O.DESCRIBE)
    assert not ok([acl(op=O.ALL, perm=DENY), acl(op=O.DESCRIBE)], op=O.DESCRIBE)


def test_super_users():
    users = parse_super_users("User:alice; User:admin")
    assert users == {"User:alice", "User:admin"}
    assert ok([acl(perm=DENY, op=O.ALL)], super_users=users)


def test_authorized_operations():
    a = Authorizer([acl(rtype=G, name="g", op=O.READ), acl(rtype=G, name="g", op=O.DELETE,
                                                           perm=DENY)])
    bits = a.authorized_operations(ALICE, "h", G, "g")
    assert bits == (1 << O.READ) | (1 << O.DESCRIBE)


def test_authorize_by_type():
    def by(acls, **kw):
        return Authorizer(acls, **kw).authorize_by_type(ALICE, "h", O.WRITE, T)
    assert not by([])
    assert by([], allow_if_no_acl=True)
    assert by([acl(op=O.WRITE)])
    assert by([acl(name="*", op=O.WRITE)])
    assert not by([acl(name="*", op=O.WRITE), acl(name="*", op=O.WRITE, perm=DENY)])
    assert not by([acl(op=O.WRITE), acl(op=O.WRITE, perm=DENY)])
    assert not by([acl(op=O.WRITE), acl(name="ord", pattern=PRE, op=O.WRITE, perm=DENY)])
    assert by([acl(op=O.WRITE), acl(name="x", pattern=PRE, op=O.WRITE, perm=DENY)])
    assert not by([acl(op=O.READ)])  # no implication here


def test_binding_errors_as_kafka_words_them():
    assert binding_error(acl()) is None
    assert "CLUSTER" in binding_error(acl(rtype=C, name="x"))
    assert binding_error(acl(rtype=C, name="kafka-cluster")) is None
    assert binding_error(acl(name="")) == "Invalid empty resource name"
    assert binding_error(acl(host="")) == "Host pattern cannot be null or empty"
    assert "no colon" in binding_error(acl(principal="alice"))
    assert concrete(acl())
    for bad in (acl(pattern=PatternType.MATCH), acl(pattern=PatternType.ANY), acl(op=O.ANY),
                acl(perm=Permission.ANY), acl(rtype=ResourceType.ANY), acl(op=99)):
        assert not concrete(bad)


def test_filters():
    b = acl(name="ord", pattern=PRE)
    assert AclFilter().matches(b)
    assert AclFilter(name="orders", pattern_type=PatternType.MATCH).matches(b)
    assert not AclFilter(name="orders", pattern_type=PatternType.ANY).matches(b)
    assert AclFilter(name="ord", pattern_type=PatternType.ANY).matches(b)
    assert AclFilter(name="orders", pattern_type=PatternType.MATCH).matches(acl(name="*"))
    assert not AclFilter(name="orders", pattern_type=LIT).matches(acl(name="*"))
    assert not AclFilter(principal=BOB).matches(b)
    assert AclFilter(operation=O.READ, permission=ALLOW).matches(b)
    assert AclFilter(pattern_type=0).unknown()


# -- against a plain model -----------------------------------------------------------------

NAMES = ["a", "ab", "abc", "b", "*"]
PRINCIPALS = [ALICE, BOB, "User:*"]
HOSTS = ["*", "h1", "h2"]
OPS = [O.ALL, O.READ, O.WRITE, O.CREATE, O.DELETE, O.ALTER, O.DESCRIBE, O.DESCRIBE_CONFIGS,
       O.ALTER_CONFIGS]

bindings = st.builds(AclBinding, st.sampled_from([T, G]), st.sampled_from(NAMES),
                     st.sampled_from([LIT, PRE]), st.sampled_from(PRINCIPALS),
                     st.sampled_from(HOSTS), st.sampled_from(OPS),
                     st.sampled_from([ALLOW, DENY]))


def model(acls, principal, host, op, rtype, name, supers, allow_if_none) -> bool:
    """Kafka's rules read plainly off each binding."""
    if principal in supers:
        return True

    def applies(a):
        if a.resource_type != rtype:
            return False
        if a.pattern_type == LIT:
            return a.name == name or a.name == "*"
        return name.startswith(a.name)

    def grants(a):
        if a.principal not in (principal, "User:*") or a.host not in ("*", host):
            return False
        if a.operation in (O.ALL, op):
            return True
        implied = {O.DESCRIBE: {O.READ, O.WRITE, O.DELETE, O.ALTER},
                   O.DESCRIBE_CONFIGS: {O.ALTER_CONFIGS}}.get(op, set())
        return a.permission == ALLOW and a.operation in implied

    relevant = [a for a in set(acls) if applies(a)]
    if any(a.permission == DENY and grants(a) for a in relevant):
        return False
    if any(a.permission == ALLOW and grants(a) for a in relevant):
        return True
    return allow_if_none and not relevant


@settings(max_examples=400, deadline=None)
@given(st.lists(bindings, max_size=8), st.sampled_from([ALICE, BOB]),
       st.sampled_from(["h1", "h2"]), st.sampled_from(OPS[1:]), st.sampled_from([T, G]),
       st.sampled_from(["a", "ab", "abc", "b", "x"]), st.booleans(), st.booleans())
def test_authorizer_agrees_with_the_model(acls, principal, host, op, rtype, name, alice_super,
                                          allow_if_none):
    supers = {ALICE} if alice_super else set()
    a = Authorizer(acls, super_users=supers, allow_if_no_acl=allow_if_none)
    assert a.authorize(principal, host, op, rtype, name) == model(
        acls, principal, host, op, rtype, name, supers, allow_if_none)
