"""The calls ``OffsetStore`` hands straight to the part that owns their state: the classic
group protocol's (``groups.Groups``, docs/GROUPS.md) and the transactions'
(``transactions.Transactions``, docs/TRANSACTIONS.md).

A base class of ``OffsetStore``, kept apart so that ``store.py`` holds the commit path, the
reads and the lifecycle; the calls are documented here, where they are defined.
"""

from __future__ import annotations

from collections.abc import Iterable
from concurrent.futures import Future

from offsetlog.group import GroupDescription, MemberIdentity
from offsetlog.store.groups import Groups
from offsetlog.store.transactions import Transaction, Transactions
from offsetlog.txn.state import TxnMetadata


class GroupAndTransactionCalls:
    """``OffsetStore``'s group and transaction calls (it sets ``_groups`` and
    ``_transactions`` when it opens)."""

    _groups: Groups
    _transactions: Transactions

    # -- consumer groups (offsetlog.store.groups, docs/GROUPS.md) ---------------------------

    def join_group(self, group_id: str, *, protocols: Iterable[tuple[str, bytes]],
                   member_id: str = "", group_instance_id: str | None = None,
                   client_id: str = "", client_host: str = "",
                   session_timeout_ms: int = 45_000, rebalance_timeout_ms: int | None = 300_000,
                   protocol_type: str = "consumer", require_known_member_id: bool = False
                   ) -> Future:
        """JoinGroup. The future resolves to a ``JoinGroupResponse`` when the join phase ends
        (for a new group, after ``initial_rebalance_delay_ms`` of the store's clock)."""
        return self._groups.join_group(
            group_id, protocols=protocols, member_id=member_id,
            group_instance_id=group_instance_id, client_id=client_id, client_host=client_host,
            session_timeout_ms=session_timeout_ms, rebalance_timeout_ms=rebalance_timeout_ms,
            protocol_type=protocol_type, require_known_member_id=require_known_member_id)

    def sync_group(self, group_id: str, *, member_id: str, generation_id: int,
                   group_instance_id: str | None = None, protocol_type: str | None = None,
                   protocol_name: str | None = None,
                   assignments: dict[str, bytes] | None = None) -> Future:
        """SyncGroup: resolves to a ``SyncGroupResponse`` with this member's assignment once
        the leader's assignment is durable."""
        return self._groups.sync_group(
            group_id, member_id=member_id, generation_id=generation_id,
            group_instance_id=group_instance_id, protocol_type=protocol_type,
            protocol_name=protocol_name, assignments=assignments)

    def heartbeat(self, group_id: str, *, member_id: str, generation_id: int,
                  group_instance_id: str | None = None) -> Future:
        """Heartbeat: resolves to a ``HeartbeatResponse`` (``RebalanceInProgressError`` in
        ``.error`` tells the member to rejoin)."""
        return self._groups.heartbeat(group_id, member_id=member_id,
                                      generation_id=generation_id,
                                      group_instance_id=group_instance_id)

    def leave_group(self, group_id: str, *, member_id: str = "",
                    members: Iterable[MemberIdentity] | None = None) -> Future:
        """LeaveGroup for one member, or a batch by identity (KIP-345)."""
        return self._groups.leave_group(group_id, member_id=member_id, members=members)

    def describe_group(self, group_id: str) -> GroupDescription | None:
        """State, generation, protocol, leader and members of a managed group, or None."""
        return self._groups.describe_group(group_id)

    def list_groups(self) -> list[tuple[str, str, str]]:
        """``(group_id, state, protocol_type)`` of every group, sorted (Kafka's listing:
        an offsets-only group is ``Empty``, protocol type ``""``)."""
        return self._groups.list_groups()

    def poll_groups(self, now_ms: int | None = None) -> None:
        """Fire the coordinators' due deadlines now (as the timer thread does on its own)."""
        self._groups.poll_groups(now_ms)

    # -- transactions (offsetlog.store.transactions, docs/TRANSACTIONS.md) ------------------

    def init_transactions(self, transactional_id: str, *, keep_prepared: bool = False,
                          transaction_timeout_ms: int | None = None,
                          expected_producer: tuple[int, int] | None = None) -> Transaction:
        """Start (or take over) the transactional producer ``transactional_id``.

        Each call bumps the id's epoch, which fences every older handle (their later calls
        raise ``ProducerFencedError``). A transaction an older handle left open is aborted;
        with ``keep_prepared=True`` a *prepared* one is kept instead and the returned handle
        is in it (``txn.prepared``), to be finished with ``commit()`` or ``abort()``.

        :param transaction_timeout_ms: how long a transaction may stay open (not prepared)
            before the store aborts it; default the store's ``transaction_timeout_ms``
        :param expected_producer: ``(producer_id, epoch)`` of a producer bumping its own
            epoch (KIP-360): the current pair, or a retry of such a bump (docs/TRANSACTIONS.md)
        :raises ProducerFencedError: ``expected_producer`` is stale; nothing was written
        :return: the handle, with ``producer_id`` and ``producer_epoch``
        """
        return self._transactions.init_transactions(
            transactional_id, keep_prepared=keep_prepared,
            transaction_timeout_ms=transaction_timeout_ms, expected_producer=expected_producer)

    def poll_transactions(self, now_ms: int | None = None) -> int:
        """Abort every open transaction older than its timeout now, and return how many
        (prepared ones never time out; the timer does this every
        ``transaction_check_interval_ms``)."""
        return self._transactions.poll(now_ms)

    def resume_transaction(self, transactional_id: str) -> Transaction | None:
        """The id's handle as its durable state stands (no epoch bump), or None if unknown."""
        return self._transactions.resume(transactional_id)

    def allocate_producer_id(self) -> int:
        """A producer id never handed out before (for an idempotent producer's InitProducerId)."""
        return self._transactions.allocate_producer_id()

    def transaction_state(self, transactional_id: str) -> TxnMetadata | None:
        """``transactional_id``'s durable metadata (state, producer id and epoch, the log
        partitions its open transaction touched; docs/TRANSACTIONS.md), or None."""
        return self._transactions.state(transactional_id)

    def transaction_states(self) -> list[TxnMetadata]:
        """``transaction_state`` of every transactional id the store knows, by id."""
        return self._transactions.states()
