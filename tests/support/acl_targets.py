"""Two targets with Kafka's ACLs: the session's broker with the StandardAuthorizer
(``kafka_acl_broker``) and an ``offsetlog serve`` with ``authorizer.class.name`` set, the same
ACLs put on both before each phase of a session.

The requests are ``User:ANONYMOUS``'s on both (PLAINTEXT, no SASL). Kafka's ACLs are set by
its super user over SASL PLAIN (``admin_socket``); offsetlog's through the store, the server
stopped (it holds the store's lock) and started again on the same port: the server cannot
tell the two apart, and its ACL APIs are tested on their own.
"""

from __future__ import annotations

import time

from offsetlog import OffsetStore
from offsetlog.acl import AclBinding, AclFilter
from support.kafka_diff import diff, normalise, run
from support.wire_raw import call

ANONYMOUS = "User:ANONYMOUS"
EVERYTHING = dict(resource_type_filter=1, resource_name_filter=None, pattern_type_filter=1,
                  principal_filter=None, host_filter=None, operation=1, permission_type=1)
STANDARD = "org.apache.kafka.metadata.authorizer.StandardAuthorizer"


def kafka_set_acls(broker, acls: list[AclBinding]) -> None:
    with broker.admin_socket() as sock:
        call(sock, 31, 3, filters=[EVERYTHING])
        if acls:
            r = call(sock, 30, 3, creations=[dict(
                resource_type=a.resource_type, resource_name=a.name,
                resource_pattern_type=a.pattern_type, principal=a.principal, host=a.host,
                operation=a.operation, permission_type=a.permission) for a in acls])
            assert all(x.error_code.value == 0 for x in r.results), r
        deadline = time.monotonic() + 15
        while True:  # the broker's authorizer has them once DescribeAcls lists them
            r = call(sock, 29, 3, **EVERYTHING)
            have = {(res.resource_type, res.resource_name, res.pattern_type, a.principal,
                     a.host, a.operation, a.permission_type)
                    for res in r.resources for a in res.acls}
            if have == {tuple(a) for a in acls}:
                return
            assert time.monotonic() < deadline, f"Kafka's ACLs: {have}"
            time.sleep(0.05)


def offsetlog_set_acls(server, acls: list[AclBinding]) -> None:
    server.stop()
    with OffsetStore.open(server.directory) as s:
        s.acls.delete([AclFilter()])
        s.acls.create(acls)
    server.start()


def run_phases(port: int, phases, set_acls) -> list:
    """``phases``: ``[(acls, steps), ...]``; the answers of every phase's steps, in order."""
    answers = []
    for acls, steps in phases:
        set_acls(acls)
        answers += run(port, steps)[0]
    return answers


def compare_phases(kafka_broker, server, phases, *, check=None, view=None) -> list:
    """Run the phases on Kafka, then on offsetlog; assert the normalised answers are equal
    (``view``: the part compared); ``check(kafka_answers)``: what the case is about, asserted
    on Kafka's answers. Returns Kafka's normalised answers."""
    kafka = normalise(run_phases(kafka_broker.port, phases,
                                 lambda acls: kafka_set_acls(kafka_broker, acls)))
    ours = normalise(run_phases(server.port, phases,
                                lambda acls: offsetlog_set_acls(server, acls)))
    if view is not None:
        kafka, ours = view(kafka), view(ours)
    problems = diff(kafka, ours)
    assert not problems, "offsetlog answers differently from Kafka:\n  " + "\n  ".join(problems)
    if check is not None:
        check(kafka)
    return kafka
