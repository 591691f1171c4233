"""The steady board against the coordinator alone: random sessions of joins, syncs,
heartbeats, commits, leaves and time passing, run twice, once with every Heartbeat and
commit check asked of the board first (as the wire's request loop and the store ask it,
the coordinator publishing what it answers with no error, as ``store.groups`` does) and
once with the coordinator answering everything. Each answer and the group after each step
must be the same.

As in the server, whose timer thread polls the coordinator, due deadlines fire before each
step in both runs (the coordinator fires them itself at the start of a call; the board does
not, and a heartbeat passed there right after another member's session lapsed would be
answered before that eviction, as Kafka's timer-driven expiry answers it)."""

from __future__ import annotations

from hypothesis import example, given, settings
from hypothesis import strategies as st

from offsetlog.log import _native
from support.coordinator_harness import CoordinatorHarness

GROUP = "g"

_STEPS = {
    "heartbeat": st.tuples(st.just("heartbeat"), st.integers(0, 5),
                           st.sampled_from([0, 0, 0, 1, -1]),
                           st.sampled_from(["own", None, "i-2"])),
    "advance": st.tuples(st.just("advance"), st.integers(0, 6_000)),
    "commit": st.tuples(st.just("commit"), st.integers(0, 5), st.sampled_from([0, 0, 1]),
                        st.sampled_from(["own", None])),
    "join": st.tuples(st.just("join"), st.sampled_from([None, "i-1", "i-2"])),
    "rejoin": st.tuples(st.just("rejoin"), st.integers(0, 5)),
    "sync": st.tuples(st.just("sync"), st.integers(0, 5)),
    "leave": st.tuples(st.just("leave"), st.integers(0, 5)),
}
#: heartbeats and time most (the board's business), the group's changes now and then
_WEIGHTS = {"heartbeat": 8, "advance": 4, "commit": 2, "join": 1, "rejoin": 1, "sync": 1,
            "leave": 1}
steps = st.lists(st.sampled_from([k for k, n in _WEIGHTS.items() for _ in range(n)])
                 .flatmap(_STEPS.__getitem__), max_size=40)


class Side:
    def __init__(self, board: bool) -> None:
        self.h = CoordinatorHarness()
        self.board = _native.SteadyBoards(1).partition(0) if board else None
        self.h.coordinator.steady = self.board

    def heartbeat(self, member: str, generation: int, instance: str | None):
        if self.board is not None and self.board.check(GROUP, member, generation, instance,
                                                       self.h.now):
            return None
        result = self.h.heartbeat(GROUP, member_id=member, generation_id=generation,
                                  group_instance_id=instance)
        error = result.response.error
        if self.board is not None and error is None and not result.records:
            steady = self.h.coordinator.steady_member(GROUP, member)
            if steady is not None:
                self.board.publish(GROUP, member, *steady)
        return type(error).__name__ if error is not None else None

    def commit(self, member: str, generation: int, instance: str | None):
        if self.board is not None and self.board.check(GROUP, member, generation, instance,
                                                       self.h.now):
            return None
        try:
            self.h.commit(GROUP, member_id=member, generation_id=generation,
                          group_instance_id=instance)
        except Exception as e:
            return type(e).__name__
        return None


def _run(side: Side, step, members: list, instances: dict):
    """One step on ``side``; its answer (an error's name, or None)."""
    h = side.h
    kind = step[0]
    if kind == "advance":
        h.advance(step[1])
        return None
    h.advance(0)  # (the timer's pass: due deadlines fire first)
    group = h.describe(GROUP)
    generation = group.generation if group is not None else 0
    if kind == "join":
        r = h.join(GROUP, client_id="c", group_instance_id=step[1])
        return "parked" if r.response is None else _name(r.response.error)
    if not members:
        return None
    member = members[step[1] % len(members)]
    if kind == "rejoin":
        r = h.join(GROUP, client_id="c", member_id=member,
                   group_instance_id=instances.get(member))
        return "parked" if r.response is None else _name(r.response.error)
    if kind == "sync":
        assignments = ({m.member_id: b"" for m in group.members}
                       if group is not None and group.leader == member else None)
        r = h.sync(GROUP, member_id=member, generation_id=generation,
                   group_instance_id=instances.get(member), assignments=assignments)
        return "parked" if r.response is None else _name(r.response.error)
    if kind == "leave":
        return _name(h.leave(GROUP, member_id=member).response.error)
    instance = instances.get(member) if step[3] == "own" else step[3]
    if kind == "heartbeat":
        return side.heartbeat(member, generation + step[2], instance)
    return side.commit(member, generation + step[2], instance)


def _name(error):
    return type(error).__name__ if error is not None else None


def _view(h: CoordinatorHarness):
    """The group, and every JoinGroup's and SyncGroup's answer so far in request order
    (parked ones are answered later; request ids differ, the board side asking fewer)."""
    answers = [(type(a).__name__, _name(a.error), getattr(a, "member_id", None),
                getattr(a, "generation_id", None))
               for _, a in sorted(h.answers.items())
               if type(a).__name__ in ("JoinGroupResponse", "SyncGroupResponse")]
    return answers, h.describe(GROUP)


@settings(max_examples=400, deadline=None)
@given(steps)
# (one member's session lapses while the other heartbeats on the board: the deadline that
# evicts it must clear the board, or the other is told NONE in a rebalancing group)
@example([("heartbeat", 0, 0, "own"), ("heartbeat", 1, 0, "own"), ("advance", 6_000),
          ("heartbeat", 0, 0, "own"), ("advance", 6_000), ("heartbeat", 0, 0, "own")])
def test_the_board_answers_as_the_coordinator_would(session):
    with_board, alone = Side(board=True), Side(board=False)
    # (a Stable group of two members to start from: random steps rarely build one)
    members = [side.h.stable_group(GROUP, ["a", "b"]) for side in (with_board, alone)][0]
    instances: dict[str, str] = {}
    for step in session:
        answers = [_run(side, step, members, instances) for side in (with_board, alone)]
        assert answers[0] == answers[1], step
        assert _view(with_board.h) == _view(alone.h), step
        # the members the coordinator named so far (the same on both sides, as checked)
        for response in alone.h.answers.values():
            member = getattr(response, "member_id", None)
            if member and member not in members and response.error is None:
                members.append(member)
                group = alone.h.describe(GROUP)
                for m in group.members if group is not None else ():
                    if m.member_id == member and m.group_instance_id is not None:
                        instances[member] = m.group_instance_id
