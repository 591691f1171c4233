"""Building blocks of the differential sessions: requests as data (tests/support/kafka_diff)."""

from __future__ import annotations

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


def ref(name):
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


__all__ = ["Poll", "await_state", "Recv", "Req", "Send", "SUB", "ASSIGN", "join", "join_body", "sync", "leader_sync",
           "heartbeat", "leave", "describe", "formed", "commit", "commit_body", "fetch",
           "fetch_body", "ref", "protocols"]
