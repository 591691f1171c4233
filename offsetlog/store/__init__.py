"""The store layer: ``OffsetStore`` composes the layers below into the engine users open.

``store`` is the facade (open, commit, fetch, delete, expire, close); it owns one part per
concern, each holding its own state: ``group_commit`` (the leader protocol, the only path by
which records reach a log and its table), ``groups`` (the group coordinators' requests and
timer), ``transactions`` (transactional offset commits; ``transaction`` is the handle users
hold), ``snapshots`` (LMDB snapshots of the tables), ``cleaning`` (when and how the cleaner
runs). ``opening`` reads a directory back; ``config`` holds every setting and its default.
"""

from offsetlog.store.config import StoreConfig
from offsetlog.store.store import OffsetStore
from offsetlog.store.transactions import Transaction

__all__ = ["OffsetStore", "StoreConfig", "Transaction"]
