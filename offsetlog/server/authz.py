"""Per-request authorization: the server's ACL state and the checks handlers ask of it.

``ctx.acl`` is an ``AclState`` when ``authorizer.class.name`` is set, else None, and then
every check here allows (Kafka without an authorizer). The decision itself is
``offsetlog.acl.Authorizer``'s, over the store's ACL bindings; the state swaps in a new
authorizer whenever CreateAcls or DeleteAcls changed them (a request sees the ACLs as of one
moment: the reference is read once per check).
"""

from __future__ import annotations

import threading
from collections.abc import Iterable

from offsetlog.acl import CLUSTER_NAME, Authorizer, Operation, ResourceType, parse_super_users
from offsetlog.server.context import Call, Context

TOPIC, GROUP = ResourceType.TOPIC, ResourceType.GROUP
CLUSTER, TRANSACTIONAL_ID = ResourceType.CLUSTER, ResourceType.TRANSACTIONAL_ID
READ, WRITE, CREATE = Operation.READ, Operation.WRITE, Operation.CREATE
DELETE, ALTER, DESCRIBE = Operation.DELETE, Operation.ALTER, Operation.DESCRIBE
DESCRIBE_CONFIGS, IDEMPOTENT_WRITE = Operation.DESCRIBE_CONFIGS, Operation.IDEMPOTENT_WRITE

#: an authorized-operations field not asked for (INT32_MIN)
NOT_ASKED = -(2 ** 31)
#: Kafka without an authorizer allows every operation ACLs know of a resource type
_EVERY = {t: Authorizer(allow_if_no_acl=True).authorized_operations("", "", t, "x")
          for t in (TOPIC, GROUP, CLUSTER, TRANSACTIONAL_ID)}


class AclState:
    """The store's ACLs as an ``Authorizer``, rebuilt after each change."""

    def __init__(self, store, *, super_users: str = "", allow_if_no_acl: bool = False) -> None:
        self.store = store
        self.super_users = parse_super_users(super_users)
        self.allow_if_no_acl = allow_if_no_acl
        self.lock = threading.Lock()  # one change (and its rebuild) at a time
        self.authorizer = self._build()

    def _build(self) -> Authorizer:
        return Authorizer(self.store.acls.list(), super_users=self.super_users,
                          allow_if_no_acl=self.allow_if_no_acl)

    def refresh(self) -> None:
        """(with ``lock`` held, after the store's ACLs changed)"""
        self.authorizer = self._build()


def _host(call: Call) -> str:
    """The client's address as ACLs name it (Kafka's ``getHostAddress``): the connection
    writes it as Kafka's member hosts are written, ``/ADDRESS``."""
    host = call.client_host
    return host[1:] if host.startswith("/") else host


def allowed(ctx: Context, call: Call, operation: int, resource_type: int,
            name: str = CLUSTER_NAME) -> bool:
    state = ctx.acl
    if state is None:
        return True
    return state.authorizer.authorize(call.principal, _host(call), operation,
                                      resource_type, name)


def allowed_names(ctx: Context, call: Call, operation: int, resource_type: int,
                  names: Iterable[str]) -> set[str]:
    """Those of ``names`` the caller may perform ``operation`` on (Kafka's
    ``filterByAuthorized``)."""
    state = ctx.acl
    if state is None:
        return set(names)
    a = state.authorizer
    return {n for n in set(names)
            if a.authorize(call.principal, _host(call), operation, resource_type, n)}


def allowed_by_type(ctx: Context, call: Call, operation: int, resource_type: int) -> bool:
    state = ctx.acl
    if state is None:
        return True
    return state.authorizer.authorize_by_type(call.principal, _host(call), operation,
                                              resource_type)


def operations(ctx: Context, call: Call, asked: bool, resource_type: int,
               name: str = CLUSTER_NAME) -> int:
    """The authorized-operations field of a resource: ``NOT_ASKED`` unless ``asked``."""
    if not asked:
        return NOT_ASKED
    state = ctx.acl
    if state is None:
        return _EVERY[resource_type]
    return state.authorizer.authorized_operations(call.principal, _host(call),
                                                  resource_type, name)
