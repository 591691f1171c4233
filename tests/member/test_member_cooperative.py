"""Incremental cooperative rebalancing (KIP-429) with cooperative-sticky members."""

from __future__ import annotations

from offsetlog.assignors import RebalanceProtocol
from offsetlog.group.consumer_protocol import decode_assignment
from offsetlog.member import MemberState
from support.member_harness import GROUP, Harness, Recorder, check_exact_cover, partitions

ALL = partitions("t", 6)
COOP = ("cooperative-sticky",)


class Processing:
    """The service: after every poll it processes one record of each partition it owns and
    commits. Every commit is logged with what the member and the group were doing then."""

    def __init__(self, harness) -> None:
        self.harness = harness
        self.commits: list[tuple[str, int, str, str, frozenset]] = []
        self.failures: list[tuple[str, BaseException]] = []

    def __call__(self, m) -> None:
        owned = m.assignment()
        if not owned:
            return
        for tp in owned:
            m.record_consumed(tp, (m.position(tp) or 0) + 1)
        state, generation = m.state, m.generation_id
        group_state = self.harness.store.describe_group(GROUP).state
        try:
            m.commit_sync()
        except Exception as e:  # noqa: BLE001 - the test asserts there are none
            self.failures.append((m.member_id, e))
            return
        self.commits.append((m.member_id, generation, str(state), group_state,
                             frozenset(owned)))


def test_cooperative_rebalance_moves_only_what_it_must_and_commits_never_fail(harness):
    work = harness.work = Processing(harness)
    at_revocation, at_assignment = {}, {}

    def revoking(m, parts):
        at_revocation.update({tp: m.position(tp) for tp in parts})

    def assigned(m, parts):
        at_assignment.update({tp: m.position(tp) for tp in parts})

    a = harness.member("a", assignors=COOP, listener=Recorder(on_revoked=revoking))
    b = harness.member("b", assignors=COOP, listener=Recorder(on_revoked=revoking))
    assert a.rebalance_protocol is RebalanceProtocol.COOPERATIVE
    harness.run_until(harness.stable)
    check_exact_cover([a, b], ALL)
    gen = a.generation_id
    before = {a: a.assignment(), b: b.assignment()}
    harness.run_for(2_000)
    for m in (a, b):
        m.listener.clear()
    commits_before = len(work.commits)

    c = harness.member("c", assignors=COOP, listener=Recorder(on_assigned=assigned))
    harness.run_until(lambda: harness.stable() and len(c.assignment()) == 2)
    check_exact_cover([a, b, c], ALL)
    assert work.failures == []

    # two rebalances: the first only revokes, the second assigns what was revoked
    assert a.generation_id == b.generation_id == c.generation_id == gen + 2
    moved = {m: before[m] - m.assignment() for m in (a, b)}
    kept = {m: before[m] & m.assignment() for m in (a, b)}
    assert all(len(moved[m]) == 1 and len(kept[m]) == 2 for m in (a, b))
    assert c.assignment() == moved[a] | moved[b]
    for m in (a, b):  # only the partition that moves is revoked; nothing is lost
        assert m.listener.events == [("revoked", sorted(moved[m]), gen + 1),
                                     ("assigned", [], gen + 1),
                                     ("assigned", [], gen + 2)]
    assert c.listener.events == [("assigned", [], gen + 1),
                                 ("assigned", sorted(moved[a] | moved[b]), gen + 2)]

    # the kept partitions were committed throughout: in every generation, and while the
    # group was rebalancing
    during = work.commits[commits_before:]
    for m in (a, b):
        mine = [x for x in during if x[0] == m.member_id]
        assert {g for _, g, _, _, owned in mine if kept[m] <= owned} >= {gen, gen + 1, gen + 2}
        assert any(gs != "Stable" or s != str(MemberState.STABLE) for _, _, s, gs, _ in mine)
    # a moved partition's new owner starts where the old one stopped
    assert at_assignment == at_revocation and len(at_revocation) == 2
    harness.run_for(2_000)
    assert work.failures == []


def test_handover_offsets_follow_the_partition(harness):
    """A partition that moves is committed by its old owner before it is revoked (here by the
    service's own commits; see test_member_autocommit for auto-commit), and its new owner
    starts from that offset."""
    work = harness.work = Processing(harness)
    a = harness.member("a", assignors=COOP)
    harness.run_until(harness.stable)
    harness.run_for(3_000)
    positions = {tp: a.position(tp) for tp in a.assignment()}
    harness.work = None  # a's processing stops; what it consumed is committed
    c = harness.member("c", assignors=COOP)
    harness.run_until(lambda: harness.stable() and len(c.assignment()) == 3)
    for tp in c.assignment():
        assert c.position(tp) == positions[tp]
    for tp in a.assignment():
        assert a.position(tp) == positions[tp]
    assert work.failures == []


def test_leaving_cooperative_member_hands_its_partitions_over_in_one_rebalance(harness):
    a, b, c = (harness.member(n, assignors=COOP) for n in "abc")
    harness.run_until(harness.stable)
    gen = a.generation_id
    keep_a, keep_b = a.assignment(), b.assignment()
    for m in (a, b):
        m.listener.clear()
    c.close()
    harness.run_until(harness.stable)
    check_exact_cover([a, b], ALL)
    assert a.generation_id == gen + 1  # nothing to revoke: no follow-up rebalance
    assert keep_a <= a.assignment() and keep_b <= b.assignment()
    assert [k for k, _, _ in a.listener.events] == ["assigned"]


def test_unsubscribing_a_topic_revokes_only_its_partitions(harness):
    harness.topics = {"t": 2, "u": 2}
    a = harness.member("a", assignors=COOP, topics=["t", "u"])
    harness.run_until(harness.stable)
    assert a.assignment() == partitions("t", 2) | partitions("u", 2)
    a.listener.clear()
    a.subscribe(["t"], a.listener)
    harness.run_until(harness.stable)
    assert a.assignment() == partitions("t", 2)
    assert [(k, p) for k, p, _ in a.listener.events] == [
        ("revoked", sorted(partitions("u", 2))), ("assigned", [])]


def test_static_member_restarted_before_revoking_does_not_strand_partitions(store_dir, clock):
    """A static member gets an assignment that takes a partition away (held back from its new
    owner until it revokes it) and its process dies before revoking. The restart takes its
    place in the Stable group (KIP-345: no rebalance) and owns nothing, so it never revokes
    and never rejoins; nor will anyone else. Kafka leaves the partition unowned until some
    other rebalance; the coordinator here sees the old subscription's claim held back and
    rebalances at the replacement."""
    h = Harness(store_dir, clock)
    try:
        s = h.member("s", assignors=COOP, group_instance_id="inst-s")
        d = h.member("d", assignors=COOP)
        h.run_until(h.stable)
        held = s.assignment()
        h.stalled.add(id(d))  # d dies: the next join phase waits for it until the deadline
        h.member("c", assignors=COOP)
        h.member("e", assignors=COOP)
        while s.state is not MemberState.PREPARING_REBALANCE:
            h.step()
        h.not_polling.add(id(s))  # s's JoinGroup is sent; it will not apply the answer
        while h.store.describe_group(GROUP).state != "Stable":
            h.step()
        h.remove(d)  # d's process is gone for good
        assert s.rebalance_in_progress and s.assignment() == held  # the answer waits for poll
        others = set().union(*(m.assignment() for m in h.live() if m is not s))
        group = h.store._parts[h.store.partition_of(GROUP)].coordinator._groups[GROUP]
        assigned_s = set(decode_assignment(group.members[s.member_id].assignment))
        assert held - others - assigned_s  # held back for s to revoke: the case in point
        s.close()  # the process dies; it restarts under the same instance id
        h.member("s2", assignors=COOP, group_instance_id="inst-s")
        h.run_until(h.stable)
        check_exact_cover(h.live(), ALL)
    finally:
        h.close()
