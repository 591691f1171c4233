"""The coordinator's side of the steady board (``offsetlog.log._native.SteadyBoard``; docs/GROUPS.md,
"Heartbeats the coordinator did not see yet"): what it tells the board of a member, and how it
counts the heartbeats the board passed without it.

The board is the coordinator's cache of steady members, read by the store's native paths; the
coordinator stays the only writer of group state (``RebalanceEngine`` clears the board when a
call may change a group, and takes its stamps before deciding anything).
"""

from __future__ import annotations

from collections.abc import Mapping

from offsetlog.group.group import Group
from offsetlog.group.state import STABLE
from offsetlog.group.timers import TIMER_SESSION, TimerQueue


def take_stamps(board, groups: Mapping[str, Group], timers: TimerQueue, keep: bool) -> None:
    """Count ``board``'s stamps as the heartbeats they were, each member's latest restarting its
    session from that time (never earlier than it runs; a member whose session is suspended,
    or who is gone, is left as it is), and forget the board's members unless ``keep``."""
    stamps = board.take(keep)
    if stamps is None:
        return
    for group_id, member_id, at in stamps:
        key = (TIMER_SESSION, group_id, member_id)
        deadline = timers.deadline(key)
        group = groups.get(group_id)
        member = group.members.get(member_id) if group is not None else None
        if deadline is not None and member is not None:
            timers.schedule(key, max(deadline, at + member.session_timeout_ms))


def steady_member(groups: Mapping[str, Group], timers: TimerQueue, group_id: str,
                  member_id: str) -> tuple[int, str | None, int, int] | None:
    """``(generation, group_instance_id, session_timeout_ms, session deadline)`` of
    ``member_id`` if its group is Stable and its session runs (what the board is told), else
    None."""
    group = groups.get(group_id)
    member = group.members.get(member_id) if group is not None else None
    if member is None or group.state is not STABLE:
        return None
    deadline = timers.deadline((TIMER_SESSION, group_id, member_id))
    if deadline is None:
        return None
    return group.generation, member.group_instance_id, member.session_timeout_ms, deadline
