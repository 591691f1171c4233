"""Operator tools over a closed store, read-only unless asked: ``inspect`` (scan, dump and
verify without taking the lock) and ``salvage`` (``offsetlog recover [--salvage]``)."""

__all__: list[str] = []
