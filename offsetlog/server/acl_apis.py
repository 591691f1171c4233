"""CreateAcls (30), DescribeAcls (29) and DeleteAcls (31): Kafka's ACL admin APIs, as
``kafka-acls`` and the admin clients call them, over the store's ACL records
(``store.acls``).

As Kafka's broker answers them: without an authorizer, SECURITY_DISABLED; the caller needs
Alter on the cluster to create or delete ACLs and Describe on it to list them
(CLUSTER_AUTHORIZATION_FAILED); a binding Kafka would refuse is refused alone, with
INVALID_REQUEST and Kafka's message, and the rest are created in one batch.
"""

from __future__ import annotations

from offsetlog.acl import AclBinding, AclFilter, binding_error, concrete
from offsetlog.server import authz
from offsetlog.server import errors as E
from offsetlog.server.context import Call, Context
from offsetlog.server.work import run_blocking

NO_AUTHORIZER = "No Authorizer is configured."
NOT_AUTHORIZED = "Cluster authorization failed."


def _filter(f) -> AclFilter:
    return AclFilter(int(f.resource_type_filter), f.resource_name_filter,
                     int(f.pattern_type_filter), f.principal_filter, f.host_filter,
                     int(f.operation), int(f.permission_type))


def describe_acls(ctx: Context, call: Call, now_ms: int):
    if ctx.acl is None:
        return call.respond(error_code=E.SECURITY_DISABLED, error_message=NO_AUTHORIZER,
                            resources=())
    if not authz.allowed(ctx, call, authz.DESCRIBE, authz.CLUSTER):
        return call.respond(error_code=E.CLUSTER_AUTHORIZATION_FAILED,
                            error_message=NOT_AUTHORIZED, resources=())
    acl_filter = _filter(call.body)
    if acl_filter.unknown():
        return call.respond(error_code=E.INVALID_REQUEST,
                            error_message="The filter contains UNKNOWN elements", resources=())
    by_resource: dict[tuple, list] = {}
    for b in ctx.store.acls.list(acl_filter):
        by_resource.setdefault((b.resource_type, b.name, b.pattern_type), []).append(
            dict(principal=b.principal, host=b.host, operation=b.operation,
                 permission_type=b.permission))
    return call.respond(error_code=E.NONE, error_message="", resources=[
        dict(resource_type=t, resource_name=n, pattern_type=p, acls=acls)
        for (t, n, p), acls in by_resource.items()])


def create_acls(ctx: Context, call: Call, now_ms: int):
    creations = call.body.creations
    denied = _refused(ctx, call, authz.ALTER)
    if denied is not None:
        return call.respond(results=[dict(error_code=denied[0], error_message=denied[1])
                                     for _ in creations])
    bindings = [AclBinding(int(c.resource_type), c.resource_name,
                           int(c.resource_pattern_type), c.principal, c.host,
                           int(c.operation), int(c.permission_type)) for c in creations]
    if not all(concrete(b) for b in bindings):
        # Kafka cannot make a binding of a code that is a filter's (ANY, MATCH) or unknown:
        # the whole request fails, each creation UNKNOWN_SERVER_ERROR without a message
        return call.respond(results=[dict(error_code=E.UNKNOWN_SERVER_ERROR,
                                          error_message=None) for _ in bindings])
    errors = [binding_error(b) for b in bindings]
    valid = [b for b, e in zip(bindings, errors) if e is None]
    state = ctx.acl

    def create() -> None:
        with state.lock:
            try:
                if valid:
                    ctx.store.acls.create(valid)
            finally:
                state.refresh()

    def finish(outcome):
        failed = E.code_of(outcome.error) if outcome.error is not None else E.NONE
        return call.respond(results=[
            dict(error_code=E.INVALID_REQUEST, error_message=e) if e is not None
            # Kafka's message of a creation that succeeded is "", not null
            else dict(error_code=failed, error_message=str(outcome.error) if failed else "")
            for e in errors])
    return run_blocking(create, finish)


def delete_acls(ctx: Context, call: Call, now_ms: int):
    filters = [_filter(f) for f in call.body.filters]
    denied = _refused(ctx, call, authz.ALTER)
    if denied is not None:
        return call.respond(filter_results=[
            dict(error_code=denied[0], error_message=denied[1], matching_acls=())
            for _ in filters])
    known = [f for f in filters if not f.unknown()]
    state = ctx.acl

    def delete() -> list:
        with state.lock:
            try:
                return ctx.store.acls.delete(known)
            finally:
                state.refresh()

    def finish(outcome):
        if outcome.error is not None:
            code = E.code_of(outcome.error)
            return call.respond(filter_results=[
                dict(error_code=code, error_message=str(outcome.error), matching_acls=())
                for _ in filters])
        matched = iter(outcome.value)
        results = []
        for f in filters:
            if f.unknown():
                results.append(dict(error_code=E.INVALID_REQUEST,
                                    error_message="Unknown patternFilter.", matching_acls=()))
                continue
            results.append(dict(error_code=E.NONE, error_message=None, matching_acls=[
                dict(error_code=E.NONE, error_message=None, resource_type=b.resource_type,
                     resource_name=b.name, pattern_type=b.pattern_type,
                     principal=b.principal, host=b.host, operation=b.operation,
                     permission_type=b.permission) for b in next(matched)]))
        return call.respond(filter_results=results)
    return run_blocking(delete, finish)


def _refused(ctx: Context, call: Call, operation: int) -> tuple[int, str] | None:
    if ctx.acl is None:
        return E.SECURITY_DISABLED, NO_AUTHORIZER
    if not authz.allowed(ctx, call, operation, authz.CLUSTER):
        return E.CLUSTER_AUTHORIZATION_FAILED, NOT_AUTHORIZED
    return None
