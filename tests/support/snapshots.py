"""Stores for the snapshot suites: snapshots only when asked, and their tables to compare."""

from support import stores

P = 3  # log partitions of the test stores


def open_store(path, **kw):
    kw.setdefault("partitions", P)
    kw.setdefault("snapshot_interval_records", 0)
    kw.setdefault("snapshot_interval_ms", 0)
    return stores.open_store(path, **kw)


def tables(store) -> dict[int, dict]:
    return {part.index: part.table.as_dict() for part in store._parts}
