"""Transactional offset commits, sans-IO: the transaction state machine (``state``), the
coordinator's decisions (``coordinator``) and the table's pending offsets (``pending``).

The store's side (locks, writes, the timeout timer) is ``offsetlog.store.transactions``; the handle
users hold is ``offsetlog.store.transaction.Transaction``. Design: docs/TRANSACTIONS.md.
"""

from offsetlog.txn.state import (
                                 COMPLETE_ABORT,
                                 COMPLETE_COMMIT,
                                 EMPTY,
                                 ONGOING,
                                 PREPARE_ABORT,
                                 PREPARE_COMMIT,
                                 PREPARED,
                                 STATES,
                                 TxnMetadata,
)

__all__ = ["COMPLETE_ABORT", "COMPLETE_COMMIT", "EMPTY", "ONGOING", "PREPARE_ABORT",
           "PREPARE_COMMIT", "PREPARED", "STATES", "TxnMetadata"]
