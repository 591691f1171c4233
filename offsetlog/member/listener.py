"""What a service is told when its partitions change (Kafka's ``ConsumerRebalanceListener``).

Every callback runs on the thread that calls :meth:`GroupMember.poll` (or ``close``), never on a
background thread, and receives a sorted list of partitions. docs/MEMBER.md says when each runs
under the eager and the cooperative protocol.
"""

from __future__ import annotations

import logging

from offsetlog.types import TopicPartition

log = logging.getLogger("offsetlog.member")


class RebalanceListener:
    """Subclass it and override what you need; every method does nothing by default.

    * :meth:`on_partitions_revoked` — you are giving these partitions up *cleanly*: the group
      still counts you as their owner, so this is the place to finish work and commit
      (``member.commit_sync()`` works here). Under the eager protocol it runs before every
      rebalance, with everything you own (possibly nothing); under the cooperative protocol only
      for the partitions that move to another member, and only if there are any.
    * :meth:`on_partitions_assigned` — these partitions are now yours; their positions start at
      the committed offsets. It runs after every completed rebalance, possibly with ``[]`` (under
      the cooperative protocol it lists only the partitions that are new to you).
    * :meth:`on_partitions_lost` — these partitions were taken from you *without* a clean
      hand-over: you were evicted (session timeout), left because ``poll`` was not called within
      ``max_poll_interval_ms``, or were fenced. Another member may own them already, so do not
      commit for them; drop whatever state you keep for them. Runs only with a non-empty list.
    """

    def on_partitions_revoked(self, partitions: list[TopicPartition]) -> None:
        """Called before ``partitions`` are handed over; commit here."""

    def on_partitions_assigned(self, partitions: list[TopicPartition]) -> None:
        """Called once ``partitions`` are this member's."""

    def on_partitions_lost(self, partitions: list[TopicPartition]) -> None:
        """Called when ``partitions`` were lost without a clean hand-over; do not commit them."""


def invoke(listener: RebalanceListener | None, method: str, partitions: list[TopicPartition],
           who: object) -> BaseException | None:
    """Call ``listener.<method>(partitions)``; what it raises is logged (naming ``who``) and
    returned, never propagated: the member goes on with the rebalance."""
    callback = getattr(listener, method, None)
    if callback is None:
        return None
    try:
        callback(list(partitions))
    except Exception as e:
        log.exception("%s: %s raised", who, method)
        return e
    return None


def note(errors: list[BaseException], error: BaseException | None) -> None:
    """Keep ``error``, if any, to raise once the rebalance step is done."""
    if error is not None:
        errors.append(error)
