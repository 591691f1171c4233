"""The table layer: a log partition's in-memory state, which is the replay of its records.

``offset_table.OffsetTable`` holds committed offsets, group metadata and (in ``pending``)
transactional offsets not yet decided and transaction states; ``apply_batch`` is the only way
any of it changes, on the live write path and in recovery alike.
"""

from offsetlog.table.offset_table import OffsetTable
from offsetlog.table.pending import PendingTransactions

__all__ = ["OffsetTable", "PendingTransactions"]
