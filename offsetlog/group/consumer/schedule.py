"""When each consumer-protocol member is told to heartbeat next (docs/GROUPS.md, "Heartbeat
intervals").

Kafka answers every ConsumerGroupHeartbeat with ``group.consumer.heartbeat.interval.ms``. The
clients (the Java client's heartbeat manager, librdkafka, franz-go) take the interval from every
answer, so the answer can be the member's *next* interval rather than a constant, and a
partition moves at the members' heartbeats: an owner hears it must give a partition up at its
next heartbeat, the member it goes to hears it is free at its own. :class:`HeartbeatSchedule`
chooses, never above ``heartbeat_interval_ms`` (``normal``; ``short`` is
``reconciliation_heartbeat_interval_ms``, at most ``normal``):

* partitions to revoke (``unrevoked_partitions``): ``short``. Clients revoke and heartbeat at
  once, so this is for one that does not: its next heartbeat is what frees the partitions for
  the members waiting for them;
* partitions of its target still owned by another member (``unreleased_partitions``):
  ``short``, so it hears they are free soon after their owner has let them go, not up to a
  whole interval later. Not when every owner it waits for is a static member away for a while
  (epoch -2): nothing is released before that member comes back or its session ends;
* a member whose reconciliation (or join) ends in this heartbeat: its next heartbeat goes in
  the middle of the widest gap between the other members' expected heartbeats. Members that
  waited together settle together, and would otherwise heartbeat in lockstep ever after, so
  the group would hear of a change only once an interval; spread out, some member hears of it
  soon, and ``uniform`` gives freed partitions to the member due first (``due``);
* a member heartbeating before it is due (clients acknowledge a new assignment at once): the
  time left to when it is due, so its place stays where it was put;
* otherwise ``normal``, as Kafka answers.

Sans-IO like the coordinator that owns it: times are the coordinator's ``now_ms``. What it
keeps (when each member is expected) is not state: no record carries it and a restart forgets
it, after which members are answered as Kafka answers until they settle again.
"""

from __future__ import annotations

from offsetlog.group.consumer.config import ConsumerGroupConfig
from offsetlog.group.consumer.group import ConsumerGroup
from offsetlog.group.consumer.member import (
    LEAVE_STATIC_EPOCH,
    UNRELEASED_PARTITIONS,
    UNREVOKED_PARTITIONS,
    ConsumerMember,
)


class HeartbeatSchedule:
    """The intervals answered, and when each member is therefore expected. See the module
    docstring."""

    def __init__(self) -> None:
        #: (group, member) -> when its next heartbeat is expected: its last one plus the
        #: interval it was answered, ms
        self._due: dict[tuple[str, str], int] = {}

    def interval(self, config: ConsumerGroupConfig, group: ConsumerGroup,
                 member: ConsumerMember, now: int, *, settled: bool = False) -> int:
        """The ``heartbeat_interval_ms`` to answer ``member`` (as reconciled by this heartbeat;
        ``settled``: this heartbeat ended its reconciliation or its join), recorded as when it
        is expected next."""
        normal = config.heartbeat_interval_ms
        short = min(normal, config.reconciliation_heartbeat_interval_ms)
        out = self._interval(group, member, now, settled, short, normal)
        self._due[(group.group_id, member.member_id)] = now + out
        return out

    def _interval(self, group: ConsumerGroup, member: ConsumerMember, now: int,
                  settled: bool, short: int, normal: int) -> int:
        if member.state == UNREVOKED_PARTITIONS:
            return short
        if member.state == UNRELEASED_PARTITIONS:
            for tp in group.targets.get(member.member_id, frozenset()) - member.assigned:
                owner = group.members.get(group.owners.get(tp, ""))
                if owner is None or owner.member_epoch != LEAVE_STATIC_EPOCH:
                    return short
            return normal
        if settled:
            return self._spread(group, member.member_id, now, short, normal)
        due = self._due.get((group.group_id, member.member_id))
        if due is not None and now + short <= due <= now + normal:
            return due - now
        return normal

    def _spread(self, group: ConsumerGroup, member_id: str, now: int, short: int,
                normal: int) -> int:
        """The interval that puts the member's next heartbeat in the middle of the widest gap
        between the other members' expected heartbeats within ``[now + short, now + normal]``
        (the window's ends bound the first and last gaps; the later of equal gaps). A member
        alone in its group has no one to spread from: ``normal``."""
        if len(group.members) <= 1:
            return normal
        lo, hi = now + short, now + normal
        points = sorted(d for mid in group.members if mid != member_id
                        if (d := self._due.get((group.group_id, mid))) is not None
                        and lo < d < hi)
        edges = [lo, *points, hi]
        a, b = max(zip(edges, edges[1:]), key=lambda gap: (gap[1] - gap[0], gap[0]))
        return (a + b) // 2 - now

    def due(self, group: ConsumerGroup, here: str, now: int) -> dict[str, int]:
        """When each member is expected, for the assignor: ``here`` (whose request this is)
        now, the others at their next heartbeat or, if that is overdue, just after ``here``;
        members not expected at a known time (since a restart, classic members, static members
        away) are left out."""
        out = {mid: max(self._due[(group.group_id, mid)], now + 1)
               for mid in group.members if (group.group_id, mid) in self._due}
        out[here] = now
        return out

    def forget(self, group_id: str, member_id: str) -> None:
        """The member left, was removed or is away for a while (a static member's -2)."""
        self._due.pop((group_id, member_id), None)
