"""Random request sequences against the coordinator, checking what must always hold:

* every request is answered exactly once (the harness refuses a second answer; at the end,
  after every deadline has passed, nothing is left unanswered);
* whenever the group is at rest (Stable or Empty), replaying the log gives the same group;
* generations never go back, and a Stable group's leader and protocol make sense.

Hypothesis runs derandomized, so the examples are the same on every run.
"""

from __future__ import annotations

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from offsetlog.errors import OffsetlogError
from offsetlog.group import MemberIdentity
from support.coordinator_harness import CoordinatorHarness

PROTOCOL_SETS = [
    [("range", b"r1")],
    [("range", b"r2"), ("roundrobin", b"o")],
    [("roundrobin", b"o"), ("range", b"r1")],
    [("sticky", b"s")],
]

op = st.one_of(
    st.tuples(st.just("join_new"), st.integers(0, 3), st.sampled_from([None, "i1", "i2"]),
              st.integers(0, 3), st.booleans()),
    st.tuples(st.just("rejoin"), st.integers(0, 9), st.integers(0, 3)),
    st.tuples(st.just("rejoin"), st.integers(0, 6), st.just(0)),  # same protocols as most
    st.tuples(st.just("sync"), st.integers(0, 9), st.sampled_from([0, 0, 0, -1])),
    st.tuples(st.just("sync"), st.just(0), st.just(0)),  # the leader's SyncGroup
    st.tuples(st.just("heartbeat"), st.integers(0, 9)),
    st.tuples(st.just("leave"), st.integers(0, 9)),
    st.tuples(st.just("leave_instance"), st.sampled_from(["i1", "i2", "i3"])),
    st.tuples(st.just("commit"), st.integers(0, 9), st.integers(-1, 0)),
    st.tuples(st.just("advance"),
              st.sampled_from([0, 1, 500, 3_000, 3_000, 6_000, 9_999, 10_000, 45_000])),
)


def run(ops):
    h = CoordinatorHarness(start_ms=1_000_000)
    # start from a Stable group of two dynamic members and a static one
    requests = [h.join("g", client_id="a").request_id, h.join("g", client_id="b").request_id,
                h.join("g", client_id="s", group_instance_id="i1").request_id]
    h.advance(6_000)
    known = [h.answer(r).member_id for r in requests]  # member ids handed out so far
    h.sync("g", member_id=known[0], generation_id=1, assignments={m: b"x" for m in known})
    issued: list[int] = list(h.answers)
    last_generation = 1

    def member(i):
        """Mostly a current member (leader first), sometimes a stale or unknown id."""
        desc = h.describe("g")
        current = [desc.leader] + [m.member_id for m in desc.members] if desc and desc.leader \
            else []
        if i < 7 and current:
            return current[i % len(current)]
        return known[i % len(known)] if known else "nobody"

    def instance_of(mid):
        for m in (h.describe("g").members if h.describe("g") else ()):
            if m.member_id == mid:
                return m.group_instance_id
        return None

    for o in ops:
        kind = o[0]
        desc = h.describe("g")
        generation = desc.generation if desc else 0
        if kind == "join_new":
            _, client, instance, protocols, require = o
            r = h.join("g", client_id=f"c{client}", group_instance_id=instance,
                       protocols=PROTOCOL_SETS[protocols], require_known_member_id=require)
        elif kind == "rejoin":
            mid = member(o[1])
            r = h.join("g", member_id=mid, group_instance_id=instance_of(mid),
                       protocols=PROTOCOL_SETS[o[2]])
        elif kind == "sync":
            mid = member(o[1])
            r = h.sync("g", member_id=mid, generation_id=generation + o[2],
                       group_instance_id=instance_of(mid),
                       assignments={m: m.encode() for m in known})
        elif kind == "heartbeat":
            mid = member(o[1])
            r = h.heartbeat("g", member_id=mid, generation_id=generation,
                            group_instance_id=instance_of(mid))
        elif kind == "leave":
            mid = member(o[1])
            r = h.leave("g", member_id=mid, group_instance_id=instance_of(mid))
        elif kind == "leave_instance":
            r = h.leave("g", members=[MemberIdentity("", o[1])])
        elif kind == "commit":
            mid = member(o[1])
            try:
                h.commit("g", member_id=mid, generation_id=generation + o[2],
                         group_instance_id=instance_of(mid))
            except OffsetlogError:
                pass
            r = None
        else:
            r = h.advance(o[1])
        if r is not None:
            if r.request_id is not None:
                issued.append(r.request_id)
            for resp in r.responses:
                mid = getattr(resp, "member_id", "")
                if mid and mid not in known:
                    known.append(mid)
        desc = h.describe("g")
        if desc is not None:
            assert desc.generation >= last_generation
            last_generation = desc.generation
            if desc.generation == 0:  # never written (e.g. only a pending member id)
                assert h.replayed().describe_group("g") is None
            elif desc.state in ("Stable", "Empty"):
                assert h.replayed().describe_group("g") == desc
            if desc.state == "Stable":
                ids = [m.member_id for m in desc.members]
                assert desc.leader in ids and desc.protocol is not None
    # let every deadline pass: all sessions lapse, every parked request gets its answer
    while (deadline := h.coordinator.next_deadline()) is not None:
        h.advance_to(max(deadline, h.now))
    assert sorted(h.answers) == sorted(issued)
    desc = h.describe("g")
    assert desc is None or desc.state == "Empty"


@settings(derandomize=True, max_examples=600, deadline=None,
          suppress_health_check=[HealthCheck.too_slow])
@given(st.lists(op, min_size=5, max_size=60))
def test_random_request_sequences_keep_the_invariants(ops):
    run(ops)
