"""Assignors by protocol name, so a group can turn the name it voted for into an assignor.

The four built-ins are registered on import. Register a class (a fresh instance is made on every
:func:`get_assignor`) or an instance (returned as is: it must then be safe to share, as assignors
without state are).
"""

from __future__ import annotations

from typing import TypeVar

from offsetlog.assignors.base import PartitionAssignor
from offsetlog.assignors.cooperative import CooperativeStickyAssignor
from offsetlog.assignors.errors import AssignorArgumentError, UnknownAssignorError
from offsetlog.assignors.range import RangeAssignor
from offsetlog.assignors.roundrobin import RoundRobinAssignor
from offsetlog.assignors.sticky import StickyAssignor

_registry: dict[str, type[PartitionAssignor] | PartitionAssignor] = {}

A = TypeVar("A", type[PartitionAssignor], PartitionAssignor)


def register_assignor(assignor: A, *, replace: bool = False) -> A:
    """Make ``assignor`` available under its ``name``; usable as a class decorator.

    :param assignor: a :class:`PartitionAssignor` subclass or instance
    :param replace: allow replacing what is registered under that name (the built-ins included);
        without it a second registration of a name is refused, so that two libraries cannot
        silently replace each other's assignor
    :return: ``assignor``, unchanged
    :raises TypeError: not a PartitionAssignor, or an abstract one
    :raises AssignorArgumentError: no name, or the name is taken and ``replace`` is false
    """
    if isinstance(assignor, type):
        if not issubclass(assignor, PartitionAssignor):
            raise TypeError(f"{assignor.__name__} is not a PartitionAssignor subclass")
        if assignor._abstract or getattr(assignor, "__abstractmethods__", None):
            raise TypeError(f"{assignor.__name__} is abstract: override assign (or assign_partitions)")
    elif not isinstance(assignor, PartitionAssignor):
        raise TypeError(f"expected a PartitionAssignor subclass or instance, not {assignor!r}")
    name = assignor.name
    if not isinstance(name, str) or not name:
        raise AssignorArgumentError(f"{assignor!r} has no name: set the class attribute `name`")
    current = _registry.get(name)
    if current is not None and current is not assignor and not replace:
        raise AssignorArgumentError(
            f"an assignor named {name!r} is already registered ({current!r}); pass replace=True")
    _registry[name] = assignor
    return assignor


def get_assignor(name: str) -> PartitionAssignor:
    """The assignor registered under ``name``.

    :raises UnknownAssignorError: nothing is registered under ``name`` (also a ``KeyError``)
    """
    entry = _registry.get(name)
    if entry is None:
        raise UnknownAssignorError(name, available_assignors())
    return entry() if isinstance(entry, type) else entry


def available_assignors() -> list[str]:
    """The registered names, sorted."""
    return sorted(_registry)


for _builtin in (RangeAssignor, RoundRobinAssignor, StickyAssignor, CooperativeStickyAssignor):
    register_assignor(_builtin)
