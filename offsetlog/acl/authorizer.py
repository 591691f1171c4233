"""Kafka's StandardAuthorizer decision, sans-IO: an immutable index of ACL bindings and the
rules that judge one action (principal, host, operation, resource) against it.

The rules (``docs/SECURITY.md``, "ACLs"):

* a super user (``super.users``) is allowed everything;
* the ACLs that apply to a resource are its literal ones, the literal ``*`` of its type, and
  the prefixed ones whose name starts the resource's name;
* of those, an ACL matches when its principal is the caller's or ``User:*``, its host is the
  caller's address or ``*``, and its operation is the one asked, ``All``, or, for an ALLOW
  only, one that implies it (Read, Write, Delete and Alter imply Describe; AlterConfigs
  implies DescribeConfigs);
* a matching DENY decides (denied); else a matching ALLOW (allowed); else, when no ACL at all
  applies to the resource, ``allow.everyone.if.no.acl.found``; else denied.
"""

from __future__ import annotations

from collections.abc import Iterable

from offsetlog.acl.model import (
    OPERATIONS,
    WILDCARD,
    WILDCARD_PRINCIPAL,
    AclBinding,
    Operation,
    PatternType,
    Permission,
)

#: operations an ALLOW ACL grants besides its own
_IMPLIED_BY = {
    Operation.DESCRIBE: frozenset({Operation.READ, Operation.WRITE, Operation.DELETE,
                                   Operation.ALTER}),
    Operation.DESCRIBE_CONFIGS: frozenset({Operation.ALTER_CONFIGS}),
}
_NONE: frozenset = frozenset()


def parse_super_users(text: str) -> frozenset[str]:
    """``super.users``: principals separated by semicolons."""
    return frozenset(p.strip() for p in text.split(";") if p.strip())


def acl_matches(acl: AclBinding, principal: str, host: str, operation: int) -> bool | None:
    """True (allows), False (denies) or None (does not match) for an ACL already known to
    apply to the resource."""
    if acl.principal != principal and acl.principal != WILDCARD_PRINCIPAL:
        return None
    if acl.host != WILDCARD and acl.host != host:
        return None
    op = acl.operation
    if op != Operation.ALL and op != operation:
        if acl.permission != Permission.ALLOW or op not in _IMPLIED_BY.get(operation, _NONE):
            return None
    return acl.permission == Permission.ALLOW


class Authorizer:
    """The decision for one set of ACLs; build a new one when the ACLs change."""

    def __init__(self, acls: Iterable[AclBinding] = (), *,
                 super_users: Iterable[str] = (), allow_if_no_acl: bool = False) -> None:
        self.acls = tuple(sorted(set(acls)))
        self.super_users = frozenset(super_users)
        self.allow_if_no_acl = allow_if_no_acl
        self._literal: dict[tuple[int, str], list[AclBinding]] = {}
        self._prefixed: dict[int, list[AclBinding]] = {}
        for acl in self.acls:
            if acl.pattern_type == PatternType.LITERAL:
                self._literal.setdefault((acl.resource_type, acl.name), []).append(acl)
            elif acl.pattern_type == PatternType.PREFIXED:
                self._prefixed.setdefault(acl.resource_type, []).append(acl)

    def applying(self, resource_type: int, name: str) -> list[AclBinding]:
        """Every ACL that applies to the resource, whatever its principal, host or operation."""
        out = list(self._literal.get((resource_type, name), ()))
        if name != WILDCARD:
            out += self._literal.get((resource_type, WILDCARD), ())
        out += [a for a in self._prefixed.get(resource_type, ()) if name.startswith(a.name)]
        return out

    def authorize(self, principal: str, host: str, operation: int, resource_type: int,
                  name: str) -> bool:
        if principal in self.super_users:
            return True
        applying = self.applying(resource_type, name)
        allowed = False
        for acl in applying:
            result = acl_matches(acl, principal, host, operation)
            if result is False:
                return False
            if result:
                allowed = True
        if allowed:
            return True
        return not applying and self.allow_if_no_acl

    def authorized_operations(self, principal: str, host: str, resource_type: int,
                              name: str) -> int:
        """Kafka's authorized-operations field: bit ``1 << code`` per operation allowed."""
        bits = 0
        for op in OPERATIONS[resource_type]:
            if self.authorize(principal, host, op, resource_type, name):
                bits |= 1 << op
        return bits

    def authorize_by_type(self, principal: str, host: str, operation: int,
                          resource_type: int) -> bool:
        """Kafka's ``authorizeByResourceType``: may the principal perform ``operation`` on
        at least one resource of the type? (InitProducerId without a transactional id asks
        it of Write on topics.) Allowed when a made-up name is allowed (super users, no ACLs
        with ``allow.everyone.if.no.acl.found``), when a literal ``*`` ALLOW matches and no
        literal ``*`` DENY does, or when some ALLOW pattern is not covered by a DENY: a
        literal by the same literal or a prefixed DENY of a prefix of its name, a prefixed
        one by a prefixed DENY of a prefix of its name."""
        if self.authorize(principal, host, operation, resource_type, "hardcode"):
            return True
        deny_literal: set[str] = set()
        deny_prefix: set[str] = set()
        allows: list[AclBinding] = []
        wildcard_allow = False
        for acl in self.acls:
            if acl.resource_type != resource_type:
                continue
            if acl.host != WILDCARD and acl.host != host:
                continue
            if acl.principal != principal and acl.principal != WILDCARD_PRINCIPAL:
                continue
            if acl.operation not in (operation, Operation.ALL):
                continue
            literal = acl.pattern_type == PatternType.LITERAL
            if acl.permission == Permission.DENY:
                if literal and acl.name == WILDCARD:
                    return False
                (deny_literal if literal else deny_prefix).add(acl.name)
            elif literal and acl.name == WILDCARD:
                wildcard_allow = True
            else:
                allows.append(acl)
        if wildcard_allow:
            return True
        for acl in allows:
            if acl.pattern_type == PatternType.LITERAL and acl.name in deny_literal:
                continue
            if any(acl.name[:i] in deny_prefix for i in range(1, len(acl.name) + 1)):
                continue
            return True
        return False
