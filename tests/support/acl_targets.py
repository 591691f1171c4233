"""Two targets with Kafka's ACLs and SASL: the session's broker with the StandardAuthorizer
and SCRAM users (``kafka_acl_broker``), and an ``offsetlog serve`` with the same users,
``authorizer.class.name`` and ``super.users``; the same ACLs put on both before each phase of
a session, over the wire, by the super user ``User:admin`` (CreateAcls, DeleteAcls).

A session runs as one principal on both (``who``): a SASL user (SCRAM-SHA-512 on a
SASL_PLAINTEXT listener: ``User:alice``...), or ``None``, ``User:ANONYMOUS`` on PLAINTEXT.
The tests write their bindings for :data:`ME`, which stands for the session's principal.
"""

from __future__ import annotations

import dataclasses
import functools
import socket
import time
from typing import Callable

from offsetlog.acl import AclBinding
from support.kafka_diff import diff, normalise, run
from support.sasl_raw import scram_login
from support.wire_raw import call

ANONYMOUS = "User:ANONYMOUS"
#: stands for the principal the session runs as (replaced before the ACLs are created)
ME = "User:ME"
#: the SASL users of both targets: name -> password (``admin`` is the super user, as
#: ``carol`` is by name in ``super.users``; ``alice`` and ``bob`` are plain users)
USERS = {"alice": "alice-secret", "bob": "bob-secret", "carol": "carol-secret"}
SUPER_USERS = ("carol",)
EVERYTHING = dict(resource_type_filter=1, resource_name_filter=None, pattern_type_filter=1,
                  principal_filter=None, host_filter=None, operation=1, permission_type=1)
STANDARD = "org.apache.kafka.metadata.authorizer.StandardAuthorizer"


@dataclasses.dataclass
class Side:
    """One target: its listeners' ports (``PLAINTEXT``, ``SASL_PLAINTEXT``) and a way to
    open a connection of its super user."""
    name: str
    ports: dict[str, int]
    admin: Callable[[], socket.socket]

    def session(self, who: str | None):
        """(port, login) of a session as ``who`` (None: ANONYMOUS on PLAINTEXT)."""
        if who is None:
            return self.ports["PLAINTEXT"], None
        return self.ports["SASL_PLAINTEXT"], functools.partial(
            scram_login, user=who, password=USERS[who])


@dataclasses.dataclass
class AclTargets:
    kafka: Side
    ours: Side
    who: str | None  #: the principal sessions run as by default

    def principal(self, who: str | None = "") -> str:
        who = self.who if who == "" else who
        return ANONYMOUS if who is None else f"User:{who}"


def set_acls(side: Side, acls: list[AclBinding]) -> None:
    """Make ``acls`` the target's only ACLs (DeleteAcls of everything, CreateAcls), and wait
    until its authorizer has them (Kafka's brokers learn them from the metadata log)."""
    with side.admin() as sock:
        call(sock, 31, 3, filters=[EVERYTHING])
        if acls:
            r = call(sock, 30, 3, creations=[dict(
                resource_type=a.resource_type, resource_name=a.name,
                resource_pattern_type=a.pattern_type, principal=a.principal, host=a.host,
                operation=a.operation, permission_type=a.permission) for a in acls])
            assert all(x.error_code.value == 0 for x in r.results), (side.name, r)
        deadline = time.monotonic() + 15
        while True:  # the authorizer has them once DescribeAcls lists them
            r = call(sock, 29, 3, **EVERYTHING)
            have = {(res.resource_type, res.resource_name, res.pattern_type, a.principal,
                     a.host, a.operation, a.permission_type)
                    for res in r.resources for a in res.acls}
            if have == {tuple(a) for a in acls}:
                return
            assert time.monotonic() < deadline, f"{side.name}'s ACLs: {have}"
            time.sleep(0.05)


def run_phases(side: Side, phases, who: str | None, principal: str) -> list:
    """``phases``: ``[(acls, steps), ...]``; the answers of every phase's steps, in order."""
    port, login = side.session(who)
    answers = []
    for acls, steps in phases:
        set_acls(side, [a._replace(principal=principal) if a.principal == ME else a
                        for a in acls])
        answers += run(port, steps, login=login)[0]
    return answers


def compare_phases(targets: AclTargets, phases, *, who: str | None = "", check=None,
                   view=None) -> list:
    """Run the phases on Kafka, then on offsetlog, as ``who`` (default: the targets');
    assert the normalised answers are equal (``view``: the part compared);
    ``check(kafka_answers)``: what the case is about, asserted on Kafka's answers. Returns
    Kafka's normalised answers."""
    who = targets.who if who == "" else who
    principal = targets.principal(who)
    kafka = normalise(run_phases(targets.kafka, phases, who, principal))
    ours = normalise(run_phases(targets.ours, phases, who, principal))
    if view is not None:
        kafka, ours = view(kafka), view(ours)
    problems = diff(kafka, ours)
    assert not problems, ("offsetlog answers differently from Kafka "
                          f"({principal}):\n  " + "\n  ".join(problems))
    if check is not None:
        check(kafka)
    return kafka
