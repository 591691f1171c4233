"""Property tests of the consumer group protocol's model (KIP-848), sans-IO.

* assignors: every partition of a subscribed topic goes to exactly one member subscribed to it;
  balance (homogeneous groups within one partition; heterogeneous: no member could take a
  partition from one with two more); stickiness (a member keeps its partitions up to its
  quota);
* the coordinator under random joins, heartbeats, leaves, static leaves, topic growth and time:
  no partition is owned by two members at once (coordinator side, and client side among the
  members still in the group); every owned partition has an assignment epoch no later than
  its member's; targets partition the subscribed partitions; replaying the
  records gives the same groups; with every member heartbeating, the group becomes Stable with
  each member owning exactly its target.

Hypothesis runs derandomized, so the examples are the same on every run.
"""

from __future__ import annotations

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from offsetlog.group.consumer import ConsumerGroupConfig, ConsumerGroupCoordinator
from offsetlog.group.consumer.assignors import AssignorMember, range_assign, uniform_assign

SETTINGS = settings(max_examples=150, deadline=None, derandomize=True,
                    suppress_health_check=[HealthCheck.too_slow])
TOPIC_NAMES = ("a", "b", "c")


def check_covering(members, topics, out):
    seen = {}
    for mid, ps in out.items():
        for t, p in ps:
            assert t in members[mid].topics and t in topics and 0 <= p < topics[t]
            assert (t, p) not in seen, f"{(t, p)} given to {seen[(t, p)]} and {mid}"
            seen[(t, p)] = mid
    wanted = {(t, p) for m in members.values() for t in m.topics if t in topics
              for p in range(topics[t])}
    assert set(seen) == wanted


assignor_input = st.tuples(
    st.dictionaries(st.sampled_from([f"m{i}" for i in range(8)]),
                    st.tuples(st.frozensets(st.sampled_from(TOPIC_NAMES), min_size=1),
                              st.sampled_from([None, "i1", "i2", "i3"])),
                    min_size=1),
    st.dictionaries(st.sampled_from(TOPIC_NAMES), st.integers(0, 9), min_size=1),
    st.booleans(),
    st.randoms(use_true_random=False),
)


def build(raw, homogeneous):
    members_raw, topics, _, _ = raw
    subs = next(iter(members_raw.values()))[0]
    used_instances = set()
    members = {}
    for mid, (topics_of, instance) in members_raw.items():
        if instance in used_instances:
            instance = None
        used_instances.add(instance)
        members[mid] = AssignorMember(mid, subs if homogeneous else topics_of, instance)
    return members, topics


def random_current(members, topics, rnd):
    """A valid earlier assignment: each partition to at most one member, some to nobody."""
    current = {mid: set() for mid in members}
    for t in TOPIC_NAMES:
        for p in range(topics.get(t, 0) + 2):  # some partitions that no longer exist
            owner = rnd.choice([None, *sorted(members)])
            if owner is not None:
                current[owner].add((t, p))
    return {mid: frozenset(ps) for mid, ps in current.items()}


@SETTINGS
@given(assignor_input)
def test_uniform_covers_balances_and_sticks(raw):
    homogeneous, rnd = raw[2], raw[3]
    members, topics = build(raw, homogeneous)
    current = random_current(members, topics, rnd)
    # without and with when each member's next heartbeat is due (some not known): the order
    # of the free choices changes, covering, balance and what each member keeps do not
    due = {mid: rnd.randrange(10) for mid in sorted(members) if rnd.random() < 0.8}
    for hint in (None, due):
        check_uniform(members, topics, current, hint)


def check_uniform(members, topics, current, due):
    out = uniform_assign(members, topics, current, due)
    check_covering(members, topics, out)
    sizes = {mid: len(ps) for mid, ps in out.items()}
    if len({frozenset(m.topics & topics.keys()) for m in members.values()}) == 1:
        assert max(sizes.values()) - min(sizes.values()) <= 1
        total = sum(sizes.values())
        quota = total // len(members)
        for mid, m in members.items():
            valid = {(t, p) for t, p in current[mid] if t in m.topics and p < topics.get(t, 0)}
            assert len(out[mid] & valid) >= min(len(valid), quota)
    else:
        for mid, ps in out.items():
            for t, _ in ps:
                for other, m in members.items():
                    if t in m.topics:
                        assert sizes[mid] - sizes[other] <= 1
    # the same input gives the same output
    assert uniform_assign(members, topics, current, due) == out


@SETTINGS
@given(assignor_input)
def test_range_covers_and_gives_each_member_a_range(raw):
    members, topics = build(raw, raw[2])
    out = range_assign(members, topics, {})
    check_covering(members, topics, out)
    for ps in out.values():
        for t in {t for t, _ in ps}:
            got = sorted(p for tt, p in ps if tt == t)
            assert got == list(range(got[0], got[-1] + 1))
            n = sum(1 for m in members.values() if t in m.topics)
            assert len(got) in (topics[t] // n, topics[t] // n + 1)


class Sim:
    """Clients that behave: each owns what its last assignment said, reports it, drops
    everything when told it is fenced or unknown."""

    def __init__(self, session_timeout_ms=10_000):
        self.c = ConsumerGroupCoordinator(ConsumerGroupConfig(
            session_timeout_ms=session_timeout_ms, max_size=5))
        self.records: list = []
        self.topics = {"a": 4, "b": 3}
        self.now = 0
        self.clients: dict[str, dict] = {}

    def beat(self, mid, subscription=None, instance=None, assignor=None):
        cl = self.clients.setdefault(mid, {"epoch": 0, "owned": frozenset(),
                                           "subs": subscription, "instance": instance})
        if cl["epoch"] in (-1, -2):
            cl["epoch"] = 0
        joining = cl["epoch"] == 0
        r = self.c.heartbeat(
            "g", member_id=mid, member_epoch=cl["epoch"], topics=self.topics, now_ms=self.now,
            instance_id=cl["instance"], rebalance_timeout_ms=5_000 if joining else -1,
            subscribed_topic_names=cl["subs"] if joining else None,
            server_assignor=assignor if joining else None,
            owned=frozenset() if joining else cl["owned"])
        self.records.extend(r.records)
        resp = r.response
        if resp.error is not None:
            cl["epoch"], cl["owned"] = 0, frozenset()
            return resp
        cl["epoch"] = resp.member_epoch
        if resp.assignment is not None:
            cl["owned"] = resp.assignment
        return resp

    def leave(self, mid, static):
        cl = self.clients.get(mid)
        if cl is None or cl["epoch"] <= 0:
            return
        epoch = -2 if static and cl["instance"] else -1
        r = self.c.heartbeat("g", member_id=mid, member_epoch=epoch, topics=self.topics,
                             now_ms=self.now, instance_id=cl["instance"])
        self.records.extend(r.records)
        cl["owned"] = frozenset()
        cl["epoch"] = epoch if r.response.error is None else 0

    def advance(self, ms):
        self.now += ms
        self.records.extend(self.c.poll(self.now).records)

    def check(self):
        group = self.c.group("g")
        if group is None:
            return
        owners = {}
        for mid, m in group.members.items():
            assert not m.assigned & m.pending_revocation
            for tp in m.owned():
                assert tp not in owners, f"{tp} owned by {owners[tp]} and {mid}"
                owners[tp] = mid
            # every partition it owns has the epoch it was given at (KIP-1251), none later
            # than the member's own: so a commit at an older epoch is only ever taken for a
            # partition the member owns now
            epochs = dict(m.assignment_epochs)
            assert set(epochs) == m.owned(), (mid, epochs, m.owned())
            assert all(e >= 1 and (m.member_epoch <= 0 or e <= m.member_epoch)
                       for e in epochs.values()), (mid, m.member_epoch, epochs)
        assert owners == group.owners
        # client side: the members still in the group own disjoint sets, each within what
        # the coordinator thinks it owns
        held = {}
        for mid, cl in self.clients.items():
            if mid in group.members:
                assert cl["owned"] <= group.members[mid].owned()
                for tp in cl["owned"]:
                    assert tp not in held
                    held[tp] = mid
        if group.assignment_epoch == group.group_epoch and group.members:
            seen = set()
            for mid, target in group.targets.items():
                assert not target & seen
                seen |= target
                subs = set(group.members[mid].subscribed_topics)
                assert all(t in subs for t, _ in target)
            wanted = {(t, p) for t in group.subscription_metadata
                      for p in range(group.subscription_metadata[t])}
            assert seen == wanted


SUBSCRIPTIONS = [("a",), ("a", "b"), ("b",), ("a", "b", "nope")]
op = st.one_of(
    st.tuples(st.just("join"), st.integers(0, 5), st.sampled_from(SUBSCRIPTIONS),
              st.sampled_from([None, None, "I1", "I2"]),
              st.sampled_from([None, "uniform", "range"])),
    st.tuples(st.just("beat"), st.integers(0, 5)),
    st.tuples(st.just("beat"), st.integers(0, 5)),
    st.tuples(st.just("leave"), st.integers(0, 5), st.booleans()),
    st.tuples(st.just("grow"), st.sampled_from(["a", "b"])),
    st.tuples(st.just("advance"), st.sampled_from([1, 1_000, 4_000, 9_999, 10_000])),
)


@settings(max_examples=200, deadline=None, derandomize=True,
          suppress_health_check=[HealthCheck.too_slow])
@given(st.lists(op, max_size=40))
def test_random_sequences_keep_ownership_exclusive_and_converge(ops):
    sim = Sim()
    for o in ops:
        if o[0] == "join":
            mid = f"m{o[1]}"
            if mid not in sim.clients or sim.clients[mid]["epoch"] in (0, -1, -2):
                sim.clients.pop(mid, None)
                sim.beat(mid, subscription=o[2], instance=o[3], assignor=o[4])
        elif o[0] == "beat":
            if f"m{o[1]}" in sim.clients:
                sim.beat(f"m{o[1]}")
        elif o[0] == "leave":
            sim.leave(f"m{o[1]}", o[2])
        elif o[0] == "grow":
            sim.topics[o[1]] += 1
        else:
            sim.advance(o[1])
        sim.check()
    fresh = ConsumerGroupCoordinator()
    fresh.replay(sim.records, now_ms=sim.now)
    assert fresh.groups == sim.c.groups
    # everyone still in heartbeats (no time passes): the group settles
    group = sim.c.group("g")
    if group is None:
        return
    live = [mid for mid in sorted(group.members) if group.members[mid].member_epoch >= 0
            and sim.clients.get(mid, {}).get("epoch", 0) > 0]
    for _ in range(4 * len(group.members) + 4):
        for mid in live:
            if mid in group.members:
                sim.beat(mid)
            sim.check()
    static_gone = [m for m in group.members.values() if m.member_epoch < 0]
    if not static_gone and all(mid in live for mid in group.members):
        assert group.state() in ("Stable", "Empty")
        for mid in group.members:
            assert group.members[mid].assigned == group.targets.get(mid, frozenset())
            assert sim.clients[mid]["owned"] == group.members[mid].assigned
