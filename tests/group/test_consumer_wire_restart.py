"""``offsetlog serve`` killed with -9 and restarted keeps every consumer-protocol group's
epochs and assignments: its members carry on at their epochs, without a rebalance."""

from __future__ import annotations

from support.wire_raw import call
from support.wire_server import Server, raw_socket

HB, DESCRIBE = 68, 69


def beat(sock, member, epoch, owned=None, join=False):
    body = dict(group_id="g", member_id=member, member_epoch=epoch, topic_partitions=owned)
    if join:
        body.update(rebalance_timeout=30_000, subscribed_topic_names=["orders"],
                    topic_partitions=[])
    r = call(sock, HB, 1, **body)
    assert r.error_code == 0, r
    return r


def owned_of(r, before):
    if r.assignment is None:
        return before
    return [dict(topic_id=t.topic_id, partitions=list(t.partitions))
            for t in r.assignment.topic_partitions]


def described(sock):
    g = call(sock, DESCRIBE, 1, group_ids=["g"], include_authorized_operations=False).groups[0]
    return (g.group_state, g.group_epoch, g.assignment_epoch,
            sorted((m.member_id, m.member_epoch, tuple(sorted(
                (str(t.topic_id), tuple(sorted(t.partitions)))
                for t in m.assignment.topic_partitions))) for m in g.members))


def test_kill_9_keeps_the_group(tmp_path):
    server = Server(str(tmp_path / "store"), topics=("orders:4",)).start()
    try:
        sock = raw_socket(server)
        state = {}
        for m in ("a", "b"):
            r = beat(sock, m, 0, join=True)
            state[m] = (r.member_epoch, owned_of(r, []))
        for _ in range(3):
            for m in ("a", "b"):
                epoch, owned = state[m]
                r = beat(sock, m, epoch, owned)
                state[m] = (r.member_epoch, owned_of(r, owned))
        before = described(sock)
        assert before[0] == "Stable" and all(m[2] for m in before[3])
        sock.close()
        server.kill9()
        server.start()
        sock = raw_socket(server)
        assert described(sock) == before
        for m in ("a", "b"):
            epoch, owned = state[m]
            r = beat(sock, m, epoch, owned)
            assert (r.member_epoch, r.assignment) == (epoch, None)
        assert described(sock) == before
        sock.close()
    finally:
        if server.proc is not None:
            server.stop()
