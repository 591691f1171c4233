"""Forming a consumer group through the store's group API, as the suites need one."""

from offsetlog import TopicPartition
from offsetlog.group.consumer_protocol import encode_assignment, encode_subscription

TP0 = TopicPartition("orders", 0)
SESSION = 10_000


def form_group(store, clock, group="g", clients=("c1",), topics=("orders",)):
    """Join every client, let the initial delay pass, sync; returns (generation, members)."""
    futs = [store.join_group(group, client_id=c, session_timeout_ms=SESSION,
                             rebalance_timeout_ms=SESSION,
                             protocols=[("range", encode_subscription(topics))])
            for c in clients]
    # The initial delay (3 s) is extended while members keep arriving, up to the rebalance
    # timeout: step the clock until every join is answered.
    for _ in range(SESSION // 1_000 + 1):
        if all(f.done() for f in futs):
            break
        clock.advance(1_000)
        store.poll_groups()
    joins = [f.result(timeout=10) for f in futs]
    for j in joins:
        assert j.error is None, j.error
    leader = next(j for j in joins if j.is_leader)
    assignments = {j.member_id: encode_assignment([TP0] if j is leader else []) for j in joins}
    syncs = [store.sync_group(group, member_id=j.member_id, generation_id=j.generation_id,
                              assignments=assignments if j is leader else None)
             for j in joins]
    for s in syncs:
        assert s.result(timeout=10).error is None
    return leader.generation_id, [j.member_id for j in joins]
