"""Subscriptions by regular expression (KIP-848's SubscribedTopicRegex) judged by Apache
Kafka: the same raw heartbeat sessions against the real broker and ``offsetlog serve``.

Each case makes its own topics on both targets (names carry the group id, so no other case's
topics match). A member subscribed by regex and one by name settle (range assignor, whose
assignment is deterministic on both); a topic the regex matches is then created and both
targets must hand it to the regex member (Kafka refreshes a group's regexes at most every
10 s, so the wait is bounded but long); a regex that does not compile is refused with
INVALID_REGULAR_EXPRESSION on both. ConsumerGroupDescribe shows the regex on both."""

from __future__ import annotations

import socket
import time

import pytest

from support.wire_raw import call

HB, DESCRIBE = 68, 69
kafka_admin = pytest.importorskip("kafka.admin")


def create_topics(port: int, specs: dict) -> None:
    admin = kafka_admin.KafkaAdminClient(bootstrap_servers=f"127.0.0.1:{port}",
                                         client_id="regex-topics")
    try:
        admin.create_topics([kafka_admin.NewTopic(n, p, 1) for n, p in specs.items()],
                            timeout_ms=30_000)
        deadline = time.monotonic() + 30
        while not set(specs) <= set(admin.list_topics()):
            assert time.monotonic() < deadline, f"topics {specs} not there"
            time.sleep(0.1)
    finally:
        admin.close()


class Member:
    def __init__(self, port, group, member_id, *, names=None, pattern=None):
        self.sock = socket.create_connection(("127.0.0.1", port), timeout=10)
        self.group, self.member_id, self.names, self.pattern = group, member_id, names, pattern
        self.epoch, self.owned = 0, []

    def join_body(self):
        return dict(group_id=self.group, member_id=self.member_id, member_epoch=0,
                    instance_id=None, rebalance_timeout=30_000, server_assignor="range",
                    subscribed_topic_names=self.names, subscribed_topic_regex=self.pattern,
                    topic_partitions=[])

    def beat(self):
        if self.epoch == 0:
            body = self.join_body()
        else:
            body = dict(group_id=self.group, member_id=self.member_id,
                        member_epoch=self.epoch, instance_id=None, topic_partitions=self.owned)
        r = call(self.sock, HB, 1, **body)
        assert r.error_code == 0, r
        self.epoch = r.member_epoch
        if r.assignment is not None:
            self.owned = [dict(topic_id=t.topic_id, partitions=list(t.partitions))
                          for t in r.assignment.topic_partitions]

    def holds(self):
        return {(t["topic_id"], p) for t in self.owned for p in t["partitions"]}


def _assignment(a):
    return sorted((t.topic_name, p) for t in a.topic_partitions for p in t.partitions)


def settle(members, done, timeout_s=60.0):
    """Heartbeat as well-behaved clients until the group is Stable at its targets and
    ``done(view)``; no partition owned by two members at any heartbeat."""
    deadline = time.monotonic() + timeout_s
    while True:
        for m in members:
            m.beat()
            held: dict = {}
            for other in members:
                for tp in other.holds():
                    assert tp not in held, f"{tp} owned twice"
                    held[tp] = other.member_id
        g = call(members[0].sock, DESCRIBE, 1, group_ids=[members[0].group],
                 include_authorized_operations=False).groups[0]
        view = {"state": g.group_state, "members": sorted(
            (m.member_id, m.subscribed_topic_regex, sorted(m.subscribed_topic_names),
             _assignment(m.assignment), _assignment(m.target_assignment))
            for m in g.members)}
        if (g.group_state == "Stable" and g.group_epoch == g.assignment_epoch
                and all(m.member_epoch == g.assignment_epoch for m in g.members)
                and all(a == t for *_, a, t in view["members"]) and done(view)):
            return view
        if time.monotonic() > deadline:
            raise AssertionError(f"the group did not settle: {view}")
        time.sleep(0.2)


def scenario(port: int, group: str) -> list:
    p = group  # the topics of this case
    create_topics(port, {f"{p}-orders-eu": 2, f"{p}-orders-us": 1, f"{p}-pay": 2})
    a = Member(port, group, f"{group}-a", pattern=f"{p}-orders-.*")
    b = Member(port, group, f"{group}-b", names=[f"{p}-pay"])
    # Kafka resolves a new regex off the request path: the group may be Stable for a while
    # with the regex member holding nothing; wait for every member to have its partitions
    views = [settle([a, b], lambda v: all(m[3] for m in v["members"]))]
    create_topics(port, {f"{p}-orders-asia": 3, f"{p}-other": 1})
    views.append(settle([a, b], lambda v: any(f"{p}-orders-asia" in repr(m[3])
                                              for m in v["members"]), timeout_s=90))
    bad = Member(port, group, f"{group}-c", pattern=f"{p}-orders-(")
    r = call(bad.sock, HB, 1, **bad.join_body())
    views.append((int(r.error_code), r.member_epoch))
    for m in (a, b, bad):
        m.sock.close()
    return [repr(v).replace(group, "G") for v in views]


def test_regex_subscription_settles_picks_up_new_topics_and_refuses_bad_patterns(targets, gid):
    kafka_port, ours_port = targets
    theirs = scenario(kafka_port, gid)
    ours = scenario(ours_port, gid)
    assert ours == theirs
    assert "G-orders-asia" in ours[1] and "G-other" not in ours[1]
    assert ours[2] == "(128, 0)"


#: patterns of every kind RE2 and RE2/J parse: accepted ones, each error RE2/J reports, and
#: where RE2/J is stricter than RE2 (``\C``, group names, a name used twice)
PATTERNS = [
    "orders-.*", r"\pL+", r"\p{Greek}", r"\PL", r"\p{^Greek}", r"\Qa.b\E", r"\Qab", r"\Q",
    "(?i)ORDERS.*", "(?im-s:a)", "(?U)o.*", "(?s).*", r"\A.*\z", "[[:alpha:]-z]",
    "[[:^alpha:]]", "[]a]", "[^]a]", r"[\]](?P<n>x)", "(?P<n>o).*", "(?<n>o).*",
    "(?P<a1>x)(?P<A1>y)", "(?<1a>x)", "(?P<n>a)[(?P<n>b)]", "[[:alpha:](?P<n>a)(?P<n>b)]",
    r"\Q(?P<n>a)\E(?P<n>b)", r"\Q\C\E", "a{1000}", "x{1000,}", "(a{500}){2}", "a{,3}",
    "a{x}", "{", "", "()", "(?)", "é+", r"\x{41}", r"\0",
    # refused by both
    "(?=o)rders", r"(o)\1", r"\C", r"\Ca", "(?'n'o).*", "a*+", "x?*", "a{2}{3}", "a{1001}",
    "x{2,1}", "*", "[a-", "[^]", "(a", "(?:a", ")", "(a))", "a|)", "a\\", "[z-a]",
    "[[:foo:]]", "[a-[:alpha:]]", r"[a-\d]", r"\p{Foo}", r"\pX", r"\p", r"\Z", r"\e", r"\x{",
    r"\x{110000}", r"\u0041", r"\k<n>", "(?<!a)b", "(?<=a)b", "(?P=n)", "(?Pa)", "(?P<>a)",
    "(?<n", "(?P<n!>a)", "(?i-)", "(?#c)o.*",
    # refused by RE2/J alone
    "(?P<n>a)(?P<n>b)", "(?<n>a)(?P<n>b)", "(?P<n>a)|(?P<n>b)", "(?P<n>(?P<n>a))",
    "[[:alpha:]](?P<x>a)(?<x>b)", "(?P<é>x)",
]


def verdicts(port: int, group: str, patterns) -> list:
    """Each pattern's (code, message) as a joining member's regex; left again if taken."""
    with socket.create_connection(("127.0.0.1", port), timeout=10) as sock:
        out = []
        for i, pattern in enumerate(patterns):
            g, m = f"{group}-{i}", f"{group}-m{i}"
            r = call(sock, HB, 1, group_id=g, member_id=m, member_epoch=0, instance_id=None,
                     rebalance_timeout=30_000, server_assignor="range",
                     subscribed_topic_names=None, subscribed_topic_regex=pattern,
                     topic_partitions=[])
            out.append((pattern, int(r.error_code), r.error_message))
            if r.error_code == 0:
                call(sock, HB, 1, group_id=g, member_id=m, member_epoch=-1, instance_id=None,
                     topic_partitions=None)
        return out


def test_which_patterns_compile_and_what_is_said_of_the_rest(targets, gid):
    """Every pattern of ``PATTERNS`` is taken or refused as Kafka does, with its message."""
    kafka = verdicts(targets[0], gid, PATTERNS)
    ours = verdicts(targets[1], gid + "-o", PATTERNS)
    assert [k for k, o in zip(kafka, ours) if k != o] == []
    refused = {p: message for p, code, message in kafka if code}
    assert "(?P<n>a)(?P<n>b)" in refused and "orders-.*" not in refused
    assert refused[r"\C"].endswith(": invalid escape sequence.")


def test_nested_repeats_past_re2s_limit(targets, gid):
    """Difference (docs/PROTOCOL.md): RE2 refuses nested repeat counts whose product passes
    1,000, which RE2/J compiles."""
    patterns = ["((a{10}){10}){11}", "(a{1000}){2}"]
    kafka = verdicts(targets[0], gid, patterns)
    ours = verdicts(targets[1], gid + "-o", patterns)
    assert [code for _, code, _ in kafka] == [0, 0]
    assert [(code, message.rsplit(": ", 1)[1]) for _, code, message in ours] == [
        (128, "invalid repeat count.")] * 2
