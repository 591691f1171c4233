"""Transactional offset commits, sans-IO: the transaction state machine (``state``).

A transaction's pending offsets are replay state and live with the table
(``offsetlog.table.pending``); the store's side (locks, writes, roll-forward, the timeout
timer) and the ``Transaction`` handle users hold are ``offsetlog.store.transactions``.
Design: docs/TRANSACTIONS.md.
"""

from offsetlog.txn.state import (COMPLETE_ABORT, COMPLETE_COMMIT, EMPTY, ONGOING, PREPARE_ABORT,
                                 PREPARE_COMMIT, PREPARED, STATES, TxnMetadata)

__all__ = ["COMPLETE_ABORT", "COMPLETE_COMMIT", "EMPTY", "ONGOING", "PREPARE_ABORT",
           "PREPARE_COMMIT", "PREPARED", "STATES", "TxnMetadata"]
