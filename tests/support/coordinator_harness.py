"""A test harness for the coordinator: a clock that moves only when told, deterministic member
ids, and a log that keeps every record the coordinator asked to append (after a msgpack round
trip, as recovery would read it back), so a test can replay it into a fresh coordinator.

It also checks, on every call, that each request is answered exactly once.

>>> h = CoordinatorHarness()
>>> ids = h.stable_group("g", ["a", "b"])
>>> ids, h.describe("g").state, h.describe("g").generation
(['a-1', 'b-2'], 'Stable', 1)
>>> h.replayed().describe_group("g") == h.describe("g")
True
"""

from __future__ import annotations

import itertools
from collections.abc import Sequence

from offsetlog.group.config import GroupConfig
from offsetlog.group.coordinator import GroupCoordinator
from offsetlog.group.responses import GroupDescription, Response, Result
from offsetlog.log.framing import decode_payload, encode_payload

DEFAULT_SESSION_MS = 10_000
DEFAULT_PROTOCOLS = (("range", b"range-metadata"),)


class CoordinatorHarness:
    def __init__(self, *, start_ms: int = 1_000_000, **config) -> None:
        self.now = start_ms
        self._ids = itertools.count(1)
        self.config = GroupConfig(member_id_factory=self._next_member_id, **config)
        self.coordinator = GroupCoordinator(self.config)
        #: every record appended so far, decoded from its on-disk encoding
        self.log: list[list] = []
        #: every response so far, by the request id it answers
        self.answers: dict[int, Response] = {}

    def _next_member_id(self, prefix: str) -> str:
        return f"{prefix}-{next(self._ids)}"

    def _take(self, result: Result) -> Result:
        for response in result.responses:
            if response.request_id in self.answers:
                raise AssertionError(f"request {response.request_id} answered twice")
            self.answers[response.request_id] = response
        if result.records:
            deltas = [r[0] for r in result.records]
            if deltas != list(range(len(deltas))):
                raise AssertionError(f"record offset deltas {deltas} are not 0..n-1")
            self.log.extend(decode_payload(encode_payload(result.records)))
        return result

    # -- time ----------------------------------------------------------------------------

    def advance(self, ms: int) -> Result:
        """Move the clock and fire what is due."""
        self.now += ms
        return self._take(self.coordinator.poll(self.now))

    def advance_to(self, when_ms: int) -> Result:
        return self.advance(when_ms - self.now)

    # -- requests ------------------------------------------------------------------------

    def join(self, group_id: str, **kw) -> Result:
        kw.setdefault("session_timeout_ms", DEFAULT_SESSION_MS)
        kw.setdefault("protocols", DEFAULT_PROTOCOLS)
        return self._take(self.coordinator.join_group(group_id, now_ms=self.now, **kw))

    def sync(self, group_id: str, **kw) -> Result:
        return self._take(self.coordinator.sync_group(group_id, now_ms=self.now, **kw))

    def heartbeat(self, group_id: str, **kw) -> Result:
        return self._take(self.coordinator.heartbeat(group_id, now_ms=self.now, **kw))

    def leave(self, group_id: str, **kw) -> Result:
        return self._take(self.coordinator.leave_group(group_id, now_ms=self.now, **kw))

    def commit(self, group_id: str, **kw) -> None:
        """``validate_offset_commit``: raises if the commit is fenced."""
        self.coordinator.validate_offset_commit(group_id, now_ms=self.now, **kw)

    def answer(self, request_id: int) -> Response | None:
        return self.answers.get(request_id)

    # -- scenarios -----------------------------------------------------------------------

    def stable_group(self, group_id: str, client_ids: Sequence[str], *,
                     assignments: dict[str, bytes] | None = None, **join_kw) -> list[str]:
        """Join ``client_ids`` as new members at once, let the initial delay pass, and sync
        (leader first); return the member ids in join order. Assignments default to
        ``b"<member id>"``."""
        requests = [self.join(group_id, client_id=c, **join_kw).request_id for c in client_ids]
        self.advance(self.config.initial_rebalance_delay_ms)
        if len(client_ids) > 1:
            self.advance(self.config.initial_rebalance_delay_ms)  # the delay was extended
        joined = [self.answers[r] for r in requests]
        for r in joined:
            r.raise_for_error()
        ids = [r.member_id for r in joined]
        leader = joined[0].leader_id
        generation = joined[0].generation_id
        if assignments is None:
            assignments = {m: m.encode() for m in ids}
        self.sync(group_id, member_id=leader, generation_id=generation, assignments=assignments)
        for m in ids:
            if m != leader:
                self.sync(group_id, member_id=m, generation_id=generation)
        return ids

    # -- inspection ----------------------------------------------------------------------

    def describe(self, group_id: str) -> GroupDescription | None:
        return self.coordinator.describe_group(group_id)

    def replayed(self, *, now_ms: int | None = None) -> GroupCoordinator:
        """A fresh coordinator rebuilt from the log, as after a restart at ``now_ms``."""
        fresh = GroupCoordinator(GroupConfig(**{**self.config.__dict__,
                                                "member_id_factory": self._next_member_id}))
        for record in self.log:
            fresh.replay(record, now_ms=self.now if now_ms is None else now_ms)
        return fresh
