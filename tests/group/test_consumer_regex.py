"""Subscriptions by regular expression (SubscribedTopicRegex) in the consumer group
coordinator: RE2 syntax, whole-name matches, topics created later, invalid patterns, records
and replay."""

from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from offsetlog.group.consumer import ConsumerGroupConfig, ConsumerGroupCoordinator, regex
from offsetlog.group.consumer.errors import InvalidRegularExpressionError, InvalidRequestError

TOPICS = {"orders-eu": 2, "orders-us": 1, "payments": 3}


def tps(topic, *ps):
    return frozenset((topic, p) for p in ps)


class Client:
    """A well-behaved member: owns what its last assignment said and reports it."""

    def __init__(self, c, member_id, *, names=None, pattern=None, group="g"):
        self.c, self.member_id, self.names, self.pattern, self.group = (c, member_id, names,
                                                                        pattern, group)
        self.epoch, self.owned = 0, frozenset()

    def beat(self, now, topics=TOPICS, **kw):
        joining = self.epoch == 0
        r = self.c.heartbeat(
            self.group, member_id=self.member_id, member_epoch=self.epoch, topics=topics,
            now_ms=now, rebalance_timeout_ms=30_000 if joining else -1,
            subscribed_topic_names=self.names if joining else None,
            subscribed_topic_regex=self.pattern if joining else kw.pop("pattern", None),
            owned=frozenset() if joining else self.owned, **kw)
        resp = r.response
        if resp.error is None:
            self.epoch = resp.member_epoch
            if resp.assignment is not None:
                self.owned = resp.assignment
        return r


def settle(clients, now, topics=TOPICS, rounds=6):
    for i in range(rounds):
        for cl in clients:
            assert cl.beat(now + i, topics).response.error is None


def test_regex_matches_whole_topic_names_in_re2_syntax():
    assert regex.resolve("orders-.*", TOPICS) == {"orders-eu", "orders-us"}
    assert regex.resolve("orders", TOPICS) == frozenset()  # whole names, not a search
    assert regex.resolve("(?i)PAY.*", TOPICS) == {"payments"}
    assert regex.resolve("orders-(?P<region>eu|us)", TOPICS) == {"orders-eu", "orders-us"}


@pytest.mark.parametrize("bad", ["(", "a**", "(?=x)", "x\\1", "a{1001}", "\\C"])
def test_patterns_re2j_refuses_are_invalid_regular_expressions(bad):
    with pytest.raises(InvalidRegularExpressionError) as e:
        regex.check(bad)
    assert e.value.code == 128
    assert str(e.value).startswith(f"SubscribedTopicRegex `{bad}` is not a valid regular "
                                   "expression: ")


@pytest.mark.parametrize("bad, description", [
    ("(?P<n>a)(?P<n>b)", "duplicate capture group name"),
    ("[[:alpha:]](?P<x>a)|(?<x>b)", "duplicate capture group name"),
    ("(?P<é>x)", "invalid named capture"),
    ("\\C", "invalid escape sequence"),
    ("(?<=a)b", "invalid named capture"),
    ("a)", "regexp/syntax: internal error"),
    ("[a-", "missing closing ]"),
    ("a{1001}", "invalid repeat count"),
])
def test_what_re2j_says_of_a_refused_pattern(bad, description):
    """RE2/J's description (Kafka's message), not RE2's, where RE2/J refuses more than RE2
    too (a group name used twice or not ASCII, ``\\C``)."""
    with pytest.raises(InvalidRegularExpressionError) as e:
        regex.check(bad)
    assert str(e.value).endswith(f": {description}.")


def test_a_pattern_refused_now_still_matches_where_a_member_holds_it():
    """A member record of an older store may hold a pattern that is refused since (a group
    name used twice): it still resolves, as it did when it was taken."""
    assert regex.resolve("(?P<r>orders)-eu|(?P<r>pay)ments", TOPICS) == {"orders-eu",
                                                                         "payments"}


@pytest.mark.parametrize("good", ["(?P<n>a)[(?P<n>b)]", "\\Q(?P<n>a)\\E(?P<n>b)",
                                  "\\Q\\C\\E", "[]a](?P<n>x)",
                                  "[[:alpha:](?P<n>a)(?P<n>b)]", "[\\]](?P<m>x)(?P<n>y)"])
def test_what_only_looks_like_a_second_name_or_an_escape_is_taken(good):
    regex.check(good)


#: the pieces the scan for RE2/J's refusals looks at, so that many patterns that compile hold them
_TOKENS = ["(?P<", "(?<", "n", "m", "\u00e9", ">", "(", ")", "[", "]", "^", "[:alpha:]", ":]",
           "\\Q", "\\E", "\\C", "\\", "a", "*", "{2}", "|"]


@settings(max_examples=3000, deadline=None)
@given(st.text(alphabet="()[]{}<>?!=:^$*+|\\PQEC-_.,0123a\u00e9n", max_size=24)
       | st.lists(st.sampled_from(_TOKENS), max_size=12).map("".join))
def test_any_pattern_is_judged_without_an_error_of_its_own(pattern):
    """The scan for what RE2/J refuses runs on untrusted text: any pattern compiles or is
    refused with INVALID_REGULAR_EXPRESSION, nothing else."""
    try:
        regex.check(pattern)
    except InvalidRegularExpressionError:
        return
    assert regex.resolve(pattern, TOPICS) <= set(TOPICS)


def test_a_regex_member_gets_the_matching_topics():
    c = ConsumerGroupCoordinator()
    a = Client(c, "a", pattern="orders-.*")
    settle([a], 0)
    assert a.owned == tps("orders-eu", 0, 1) | tps("orders-us", 0)
    g = c.group("g")
    assert g.members["a"].subscribed_topic_regex == "orders-.*"
    assert set(g.subscription_metadata) == {"orders-eu", "orders-us"}


def test_a_topic_created_later_is_picked_up():
    c = ConsumerGroupCoordinator()
    a, b = Client(c, "a", pattern="orders-.*"), Client(c, "b", names=["payments"])
    settle([a, b], 0)
    epoch = c.group("g").group_epoch
    grown = {**TOPICS, "orders-asia": 2}
    settle([a, b], 100, grown)
    g = c.group("g")
    assert g.group_epoch == epoch + 1
    assert a.owned == (tps("orders-eu", 0, 1) | tps("orders-us", 0) | tps("orders-asia", 0, 1))
    assert b.owned == tps("payments", 0, 1, 2)
    assert g.members["a"].member_epoch == g.group_epoch


def test_names_and_regex_members_share_the_topics():
    c = ConsumerGroupCoordinator()
    clients = [Client(c, "a", pattern="orders-.*|payments"), Client(c, "b", names=["payments"]),
               Client(c, "r", pattern="orders-e.")]
    settle(clients, 0)
    owned = [tp for cl in clients for tp in cl.owned]
    assert len(owned) == len(set(owned))  # no partition owned twice
    assert set(owned) == tps("orders-eu", 0, 1) | tps("orders-us", 0) | tps("payments", 0, 1, 2)
    assert {t for t, _ in clients[2].owned} <= {"orders-eu"}
    assert {t for t, _ in clients[1].owned} <= {"payments"}


def test_an_invalid_regex_is_refused_and_writes_nothing():
    c = ConsumerGroupCoordinator()
    r = Client(c, "a", pattern="orders-(").beat(0)
    assert r.response.error_code == 128 and r.records == []
    assert c.group("g") is None
    a = Client(c, "a", pattern="orders-.*")
    settle([a], 10)
    r = a.beat(20, pattern="(?<=x)y")
    assert r.response.error_code == 128 and r.records == []
    assert c.group("g").members["a"].subscribed_topic_regex == "orders-.*"


def test_a_join_needs_names_or_a_regex():
    c = ConsumerGroupCoordinator()
    r = c.heartbeat("g", member_id="a", member_epoch=0, topics=TOPICS, now_ms=0,
                    rebalance_timeout_ms=1000, owned=frozenset())
    assert isinstance(r.response.error, InvalidRequestError)
    assert str(r.response.error) == ("Either SubscribedTopicNames or SubscribedTopicRegex must "
                                     "be non-null when (re-)joining.")


def test_changing_and_dropping_the_regex():
    c = ConsumerGroupCoordinator()
    a = Client(c, "a", pattern="orders-.*")
    settle([a], 0)
    epoch = c.group("g").group_epoch
    assert a.beat(10, pattern="pay.*").response.error is None
    settle([a], 20)
    assert a.owned == tps("payments", 0, 1, 2)
    assert c.group("g").group_epoch == epoch + 1
    assert a.beat(30, pattern="").response.error is None  # "": no regex any more
    settle([a], 40)
    g = c.group("g")
    assert a.owned == frozenset() and g.members["a"].subscribed_topic_regex is None
    assert g.subscription_metadata == {}


def test_replay_keeps_the_regex_and_a_fence_after_it_keeps_the_other_members_topics():
    c = ConsumerGroupCoordinator(ConsumerGroupConfig(session_timeout_ms=1000))
    a, b = Client(c, "a", pattern="orders-.*"), Client(c, "b", pattern="orders-.*")
    records = []
    for i in range(6):
        for cl in (a, b):
            records += cl.beat(i).records
    again = ConsumerGroupCoordinator(ConsumerGroupConfig(session_timeout_ms=1000))
    again.replay(records, now_ms=10)
    g, h = c.group("g"), again.group("g")
    assert {m: (x.subscribed_topic_regex, x.member_epoch, x.assigned)
            for m, x in h.members.items()} == {
        m: (x.subscribed_topic_regex, x.member_epoch, x.assigned) for m, x in g.members.items()}
    assert h.subscription_metadata == g.subscription_metadata
    # b's session ends after the replay: a's regex topics stay the group's subscription
    out = again.heartbeat("g", member_id="a", member_epoch=a.epoch, topics=TOPICS, now_ms=500,
                          owned=a.owned)
    assert out.response.error is None
    again.poll(1200)
    h = again.group("g")
    assert set(h.members) == {"a"}
    assert set(h.subscription_metadata) == {"orders-eu", "orders-us"}
