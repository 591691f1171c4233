"""What every assignor shares: the member's :class:`Subscription`, the rebalance protocols, and
:class:`PartitionAssignor`, the base class that checks inputs and outputs around the one method
a subclass writes.

Like Kafka's ``AbstractPartitionAssignor``, the base class does the grunt work: it drops topics
that nobody subscribes to or that have no partitions (Kafka only ever hands its assignors the
subscribed topics it has metadata for), calls :meth:`PartitionAssignor.assign_partitions`, and
returns one sorted list per member. Assignors are pure: no clock, no randomness, no I/O, so the
same input always gives the same output.
"""

from __future__ import annotations

from abc import ABC
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from enum import StrEnum
from typing import ClassVar

from offsetlog.assignors.errors import AssignorArgumentError, InvalidAssignmentError
from offsetlog.types import TopicPartition

#: generation_id of a member that has never been assigned anything (Kafka's DEFAULT_GENERATION)
NO_GENERATION = -1


class RebalanceProtocol(StrEnum):
    """How members hand partitions over during a rebalance.

    ``EAGER``: every member revokes everything before the group rebalances.
    ``COOPERATIVE``: members keep what they own; a partition that must move is first revoked by
    its owner and assigned in a follow-up rebalance (Kafka's incremental cooperative rebalancing).
    """

    EAGER = "eager"
    COOPERATIVE = "cooperative"

    @property
    def id(self) -> int:
        """Kafka's protocol id: the higher, the more advanced (chosen when several are common)."""
        return 0 if self is RebalanceProtocol.EAGER else 1


def _is_int(v: object) -> bool:
    return isinstance(v, int) and not isinstance(v, bool)


def _as_partition(tp: object) -> TopicPartition:
    if isinstance(tp, TopicPartition):
        return tp
    if isinstance(tp, tuple) and len(tp) == 2 and isinstance(tp[0], str) and _is_int(tp[1]):
        return TopicPartition(tp[0], tp[1])
    raise TypeError(f"expected a TopicPartition, not {tp!r}")


@dataclass(frozen=True)
class Subscription:
    """What one member tells the group leader when it joins (Kafka's ``Subscription``).

    Lists are accepted and stored as tuples (topics without repeats), so a subscription is
    immutable and hashable and no two instances share a default.

    :param topics: the topics the member wants partitions of
    :param user_data: opaque bytes for custom assignors; the built-in ones ignore it
    :param owned_partitions: the partitions the member holds now (its last assignment); the
        sticky assignors keep as many of them as balance allows
    :param generation_id: the group generation ``owned_partitions`` was assigned in;
        ``-1`` (the default) means unknown. When two members claim one partition, the claim of
        the higher generation wins.
    :param group_instance_id: the static member id (``group.instance.id``), if any; range and
        roundrobin order static members by it so their assignment survives restarts

    >>> s = Subscription(["orders", "orders"], owned_partitions=[("orders", 0)], generation_id=3)
    >>> s.topics, s.owned_partitions
    (('orders',), (TopicPartition(topic='orders', partition=0),))
    """

    # Sequence: callers pass lists (SPEC.md); what is stored is always a tuple
    topics: Sequence[str]
    user_data: bytes | None = None
    owned_partitions: Sequence[TopicPartition] = ()
    generation_id: int = NO_GENERATION
    group_instance_id: str | None = None

    def __post_init__(self) -> None:
        if isinstance(self.topics, str):  # Subscription("t0") would otherwise mean t, 0
            raise TypeError("topics must be a list of topic names, not a single str")
        topics = tuple(dict.fromkeys(self.topics))  # a subscription is a set; keep first-seen order
        for topic in topics:
            if not isinstance(topic, str):
                raise TypeError(f"topic names must be str, not {topic!r}")
        owned = tuple(_as_partition(tp) for tp in self.owned_partitions)
        user_data = self.user_data
        if user_data is not None:
            if not isinstance(user_data, (bytes, bytearray, memoryview)):
                raise TypeError(f"user_data must be bytes or None, not {type(user_data).__name__}")
            user_data = bytes(user_data)
        if not _is_int(self.generation_id):
            raise TypeError(f"generation_id must be an int, not {self.generation_id!r}")
        if self.group_instance_id is not None and not isinstance(self.group_instance_id, str):
            raise TypeError(f"group_instance_id must be a str or None, not {self.group_instance_id!r}")
        object.__setattr__(self, "topics", topics)
        object.__setattr__(self, "owned_partitions", owned)
        object.__setattr__(self, "user_data", user_data)


#: what :meth:`PartitionAssignor.assign` returns: member id -> its partitions, sorted
Assignment = dict[str, list[TopicPartition]]


class PartitionAssignor(ABC):
    """Base class of every assignor. Subclasses set :attr:`name`, optionally
    :attr:`supported_protocols`, and override ``assign(partitions_per_topic, subscriptions)``
    as in Kafka's ``AbstractPartitionAssignor``.

    Example (a custom assignor that gives everything to the first member by id)::

        @register_assignor
        class FirstTakesAll(PartitionAssignor):
            name = "first-takes-all"

            def assign(self, partitions_per_topic, subscriptions):
                first = min(subscriptions)
                return {first: [TopicPartition(t, p)
                                for t in subscriptions[first].topics if t in partitions_per_topic
                                for p in range(partitions_per_topic[t])]}

    The checks stay around what a subclass writes: a class that defines ``assign`` (and inherits
    no concrete :meth:`assign_partitions`) has it moved to :meth:`assign_partitions` when the
    class is created, and the base class's ``assign`` (inputs checked, topics nobody subscribes to
    dropped, the result checked, every member present, lists sorted) calls it. Overriding
    :meth:`assign_partitions` instead (the built-ins do) is the same thing spelled directly.
    """

    #: the protocol name members vote on ("range", "roundrobin", ...)
    name: ClassVar[str] = ""
    #: the rebalance protocols this assignor can run under, most preferred first
    supported_protocols: ClassVar[tuple[RebalanceProtocol, ...]] = (RebalanceProtocol.EAGER,)

    def assign(self, partitions_per_topic: Mapping[str, int],
               subscriptions: Mapping[str, Subscription]) -> Assignment:
        """Assign the partitions of the subscribed topics to the members.

        :param partitions_per_topic: topic -> partition count; topics nobody subscribes to are
            ignored, and subscribed topics missing here (unknown to the cluster) get no partitions
        :param subscriptions: member id -> :class:`Subscription`
        :return: member id -> sorted list of partitions, with every member of ``subscriptions``
            present (possibly with ``[]``)
        :raises TypeError: malformed arguments
        :raises AssignorArgumentError: a negative partition count (also a ``ValueError``)
        :raises InvalidAssignmentError: :meth:`assign_partitions` returned an impossible result
        """
        counts = _check_partition_counts(partitions_per_topic)
        subs = _check_subscriptions(subscriptions)
        subscribed = {topic for sub in subs.values() for topic in sub.topics}
        counts = {topic: n for topic, n in counts.items() if n > 0 and topic in subscribed}
        raw = self.assign_partitions(counts, subs)
        return _finish(self, raw, counts, subs)

    def assign_partitions(self, partitions_per_topic: dict[str, int],
                          subscriptions: dict[str, Subscription]) -> Mapping[str, Iterable[TopicPartition]]:
        """The assignment itself (Kafka's ``AbstractPartitionAssignor.assign``).

        Not an ``abstractmethod``, so that type checkers take a subclass that overrides
        ``assign`` instead for the concrete class it is; :meth:`__new__` refuses a subclass
        that overrides neither.

        :param partitions_per_topic: only topics some member subscribes to, each with at least
            one partition
        :param subscriptions: member id -> subscription (a fresh dict the method may keep)
        :return: member id -> partitions; members left out get ``[]``; order does not matter
        """
        raise NotImplementedError(f"{type(self).__name__} overrides neither assign nor "
                                  "assign_partitions")

    #: True while neither ``assign`` nor ``assign_partitions`` is overridden
    _abstract: ClassVar[bool] = True

    def __new__(cls, *args: object, **kwargs: object) -> "PartitionAssignor":
        if cls._abstract:
            raise TypeError(f"Can't instantiate abstract class {cls.__name__}: override "
                            "assign(partitions_per_topic, subscriptions)")
        return super().__new__(cls)

    def __init_subclass__(cls, **kwargs: object) -> None:
        super().__init_subclass__(**kwargs)
        base = PartitionAssignor.__dict__["assign_partitions"]
        own = cls.__dict__.get("assign")
        if own is not None and getattr(cls, "assign_partitions") is base:
            # Kafka's spelling: the subclass's assign is the assignment itself.
            cls.assign_partitions = own  # type: ignore[method-assign]
            cls.assign = PartitionAssignor.assign  # type: ignore[method-assign]
        cls._abstract = getattr(cls, "assign_partitions") is base

    def __repr__(self) -> str:
        return f"{type(self).__name__}()"


def _check_partition_counts(partitions_per_topic: Mapping[str, int]) -> dict[str, int]:
    if not isinstance(partitions_per_topic, Mapping):
        raise TypeError("partitions_per_topic must be a mapping of topic -> partition count")
    counts: dict[str, int] = {}
    for topic, n in partitions_per_topic.items():
        if not isinstance(topic, str):
            raise TypeError(f"topic names must be str, not {topic!r}")
        if not _is_int(n):
            raise TypeError(f"partition count of {topic!r} must be an int, not {n!r}")
        if n < 0:
            raise AssignorArgumentError(f"partition count of {topic!r} must not be negative: {n}")
        counts[topic] = n
    return counts


def _check_subscriptions(subscriptions: Mapping[str, Subscription]) -> dict[str, Subscription]:
    if not isinstance(subscriptions, Mapping):
        raise TypeError("subscriptions must be a mapping of member id -> Subscription")
    for member_id, sub in subscriptions.items():
        if not isinstance(member_id, str):
            raise TypeError(f"member ids must be str, not {member_id!r}")
        if not isinstance(sub, Subscription):
            raise TypeError(f"subscription of {member_id!r} must be a Subscription, not {type(sub).__name__}")
    return dict(subscriptions)


def _finish(assignor: PartitionAssignor, raw: Mapping[str, Iterable[TopicPartition]],
            counts: dict[str, int], subs: dict[str, Subscription]) -> Assignment:
    """Check what an assignor returned and normalise it: every member present, lists sorted.

    A partition handed to two members would be consumed twice, and one handed to a member that
    does not subscribe to its topic would be ignored by that member; both are bugs worth failing
    loudly on rather than passing on to the group.
    """
    result: Assignment = {member_id: [] for member_id in subs}
    owner: dict[TopicPartition, str] = {}
    for member_id, partitions in raw.items():
        if member_id not in result:
            raise InvalidAssignmentError(f"{assignor!r} assigned partitions to unknown member {member_id!r}")
        topics = frozenset(subs[member_id].topics)
        mine = result[member_id]
        for tp in partitions:
            if type(tp) is not TopicPartition:
                tp = _as_partition(tp)
            topic, partition = tp
            if topic not in topics or not 0 <= partition < counts.get(topic, 0):
                if not 0 <= partition < counts.get(topic, 0):
                    raise InvalidAssignmentError(f"{assignor!r} assigned {tp}, which does not exist")
                raise InvalidAssignmentError(
                    f"{assignor!r} assigned {tp} to {member_id!r}, which does not subscribe to {topic!r}")
            if tp in owner:
                raise InvalidAssignmentError(
                    f"{assignor!r} assigned {tp} twice ({owner[tp]!r}, {member_id!r})")
            owner[tp] = member_id
            mine.append(tp)
    for partitions in result.values():
        partitions.sort()
    return result
