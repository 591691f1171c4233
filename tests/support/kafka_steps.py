"""Building blocks of the differential sessions: requests as data (tests/support/kafka_diff)."""

from __future__ import annotations

import os

from offsetlog.group.consumer_protocol import encode_assignment, encode_subscription
from support.kafka_diff import Poll, Recv, Req, Send

SUB = encode_subscription(["orders"])
ASSIGN = encode_assignment([("orders", 0), ("orders", 1)])


def protocols(name="range", metadata=SUB):
    return [dict(name=name, metadata=metadata)]


def join_body(g, member="", *, inst=None, session=10_000, rebalance=10_000, ptype="consumer",
              protos=None, reason=None):
    return dict(group_id=g, session_timeout=session, rebalance_timeout=rebalance,
                member_id=member, group_instance_id=inst, protocol_type=ptype,
                protocols=protos if protos is not None else protocols(), reason=reason)


def ref(name, delta=0):
    """What an earlier step saved as ``name`` (``delta`` added: an epoch or a generation
    before or after the one saved)."""
    if delta:
        return lambda c: c[name] + delta
    return lambda c: c[name]


def join(g, v, *, as_="m", conn="a", inst=None, member="", **kw):
    """A member joining: from v4 (KIP-394) a dynamic member is first told MEMBER_ID_REQUIRED
    and joins again with the id it was given. Saves the member id and generation as
    ``as_`` and ``as_ + '_gen'``."""
    steps = []
    if v >= 4 and inst is None and member == "":
        steps.append(Req(11, v, join_body(g, member, inst=inst, **kw), conn=conn,
                         save={as_: lambda r: r.member_id}))
        member = ref(as_)
    steps.append(Req(11, v, join_body(g, member, inst=inst, **kw), conn=conn,
                     save={as_: lambda r: r.member_id, as_ + "_gen": lambda r: r.generation_id}))
    return steps


def sync(g, v, who="m", *, conn="a", assignments=None, inst=None, gen=None):
    return Req(14, v, dict(group_id=g, generation_id=gen if gen is not None else ref(who + "_gen"),
                           member_id=ref(who), group_instance_id=inst, protocol_type="consumer",
                           protocol_name="range", assignments=assignments or []), conn=conn)


def leader_sync(g, v, who="m", *, conn="a", inst=None):
    return sync(g, v, who, conn=conn, inst=inst,
                assignments=lambda c: [dict(member_id=c[who], assignment=ASSIGN)])


def heartbeat(g, v, who="m", *, conn="a", gen=None, inst=None, member=None):
    return Req(12, v, dict(group_id=g, generation_id=gen if gen is not None else ref(who + "_gen"),
                           member_id=member if member is not None else ref(who),
                           group_instance_id=inst), conn=conn)


def leave(g, v, who="m", *, conn="a", inst=None, member=None):
    m = member if member is not None else ref(who)
    return Req(13, v, dict(group_id=g, member_id=m,
                           members=lambda c: [dict(member_id=_val(m, c), group_instance_id=inst,
                                                   reason=None)]), conn=conn)


def _val(v, c):
    return v(c) if callable(v) else v


def describe(g, v, *, conn="a"):
    return Req(15, v, dict(groups=[g], include_authorized_operations=True), conn=conn)


def formed(g, v=5, who="m", conn="a", **kw):
    """One member joined and synced (it leads): a Stable group."""
    return join(g, v, as_=who, conn=conn, **kw) + [leader_sync(g, min(v, 5), who, conn=conn,
                                                                inst=kw.get("inst"))]


def commit_body(g, *, gen=-1, member="", inst=None, topic="orders", partition=0, offset=7,
                metadata="", epoch=-1, retention=-1):
    """``retention``: versions 2-4's ``retention_time_ms`` (kio's ``retention_time``)."""
    return dict(group_id=g, generation_id_or_member_epoch=gen, generation_id=gen,
                member_id=member, group_instance_id=inst, retention_time=retention,
                topics=[dict(name=topic, partitions=[dict(
                    partition_index=partition, committed_offset=offset,
                    committed_leader_epoch=epoch, committed_metadata=metadata,
                    commit_timestamp=-1)])])


def commit(g, v, conn="a", **kw):
    return Req(8, v, commit_body(g, **kw), conn=conn)


def fetch_body(g, topics=(("orders", [0, 1]),), *, stable=False):
    ts = None if topics is None else [dict(name=t, partition_indexes=p) for t, p in topics]
    return dict(group_id=g, topics=ts, require_stable=stable,
                groups=[dict(group_id=g, member_id=None, member_epoch=-1, topics=ts)])


def fetch(g, v, conn="a", topics=(("orders", [0, 1]),), stable=False):
    return Req(9, v, fetch_body(g, topics, stable=stable), conn=conn)


def await_state(g, state, *, conn="a"):
    """DescribeGroups until the group is in ``state``."""
    return Poll(15, 5, dict(groups=[g], include_authorized_operations=False),
                until=lambda r: str(r.groups[0].group_state) == state, conn=conn)


def session_counts(sessions: int, steps: int) -> tuple[int, int]:
    """(random sessions per run, steps per session) of a random-session suite: its defaults,
    or OFFSETLOG_DIFF_SESSIONS and OFFSETLOG_DIFF_STEPS for more or longer ones by hand."""
    return (int(os.environ.get("OFFSETLOG_DIFF_SESSIONS", sessions)),
            int(os.environ.get("OFFSETLOG_DIFF_STEPS", steps)))


def offset_delete(g, topic, partitions, *, conn="a"):
    return Req(47, 0, dict(group_id=g, topics=[dict(name=topic, partitions=[
        dict(partition_index=p) for p in partitions])]), conn=conn)


def delete_group(g, v, *, conn="a"):
    return Req(42, v, dict(groups_names=[g]), conn=conn)


def in_name_order(answers):
    """A ``compare`` view: OffsetFetch's (v8+: each group's) and OffsetDelete's topics in
    name order, their partitions by index (Kafka's order, of all of a group's offsets above
    all, is its hash map's)."""
    def sort(holder):
        if isinstance(holder.get("topics"), list) and all("name" in t for t in holder["topics"]):
            holder["topics"] = sorted(holder["topics"], key=lambda t: t["name"])
            for t in holder["topics"]:
                if isinstance(t.get("partitions"), list):
                    t["partitions"] = sorted(t["partitions"],
                                             key=lambda p: p.get("partition_index", 0))

    for a in answers:
        sort(a)
        for group in a.get("groups") or []:
            if isinstance(group, dict):
                sort(group)
    return answers


# -- transactions (InitProducerId, AddOffsetsToTxn, TxnOffsetCommit, EndTxn) -------------

def init(tid, v=4, *, timeout=60_000, pid=-1, epoch=-1, as_="p"):
    return Req(22, v, dict(transactional_id=tid, transaction_timeout=timeout, producer_id=pid,
                           producer_epoch=epoch),
               save={as_: lambda r: r.producer_id, as_ + "_epoch": lambda r: r.producer_epoch})


def add_offsets(tid, g, v=3, *, pid=None, epoch=None):
    return Req(25, v, dict(transactional_id=tid, producer_id=pid if pid is not None else ref("p"),
                           producer_epoch=epoch if epoch is not None else ref("p_epoch"),
                           group_id=g))


def txn_commit(tid, g, v=3, *, pid=None, epoch=None, topic="orders", offset=17, gen=-1,
               member=""):
    body = commit_body(g, topic=topic, offset=offset, gen=gen, member=member)
    body.update(transactional_id=tid, producer_id=pid if pid is not None else ref("p"),
                producer_epoch=epoch if epoch is not None else ref("p_epoch"))
    return Req(28, v, body)


def end(tid, committed, v=3, *, pid=None, epoch=None):
    return Req(26, v, dict(transactional_id=tid, producer_id=pid if pid is not None else ref("p"),
                           producer_epoch=epoch if epoch is not None else ref("p_epoch"),
                           committed=committed))


def txn_settled(tid):
    """ListTransactions until ``tid``'s transaction is no longer Prepare*: Kafka answers
    EndTxn before it writes the markers and completes the transaction, and a TxnOffsetCommit
    in between is INVALID_TXN_STATE or TRANSACTION_ABORTABLE by the race (seen at v4: the
    same session gave either, 1 run in 8); offsetlog completes it before it answers."""
    body = dict(state_filters=[], producer_id_filters=[], duration_filter=-1,
                transactional_id_pattern=tid)
    return Poll(66, 2, body, until=lambda r: not any(
        t.transaction_state.startswith("Prepare") for t in r.transaction_states
        if t.transactional_id == tid))


def stable_fetch(g, v=7, *, settled=True):
    """OffsetFetch with require_stable; ``settled``: asked again until no partition is
    UNSTABLE_OFFSET_COMMIT (Kafka writes a transaction's markers after EndTxn is answered)."""
    body = fetch_body(g, stable=True)
    if not settled:
        return Req(9, v, body)

    def done(r):
        parts = [p for t in (r.groups[0].topics if v >= 8 else r.topics) for p in t.partitions]
        return all(int(p.error_code) == 0 for p in parts)
    return Poll(9, v, body, until=done)


__all__ = ["Poll", "await_state", "Recv", "Req", "Send", "SUB", "ASSIGN", "join", "join_body",
           "sync", "leader_sync", "heartbeat", "leave", "describe", "formed", "commit",
           "commit_body", "fetch", "fetch_body", "ref", "protocols", "init", "add_offsets",
           "txn_commit", "end", "stable_fetch", "offset_delete", "delete_group", "in_name_order",
           "session_counts", "txn_settled"]
