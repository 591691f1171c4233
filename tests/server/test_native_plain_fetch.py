"""The native request loop's plain OffsetFetch (native/src/wire_fetch.rs): a fetch of groups
the store has routed goes from the frame to the answer with no Python call, and its answer is
the Python handler's (``offsetlog.server.offset_fetch``) byte for byte; every other fetch is
handed to the Python handler.

The loop runs in-process over a socket pair with a real store; the Python handler's answer to
the same frame comes from a real ``Connection``'s ``answer`` (its dispatch, the handler and
the codec), built without a socket."""

from __future__ import annotations

import struct
from types import SimpleNamespace

import pytest

from offsetlog import OffsetAndMetadata, OffsetStore, TopicPartition
from offsetlog.bench.wire_floors import exactly
from offsetlog.server.config import ServerConfig
from offsetlog.server.connection import Connection
from offsetlog.server.context import Context
from offsetlog.server.offsets import NATIVE_ARRAY_CODECS
from offsetlog.server.sasl import Session
from offsetlog.server.security_config import Listener, SecurityConfig
from support.native_loop import native_loop
from support.wire_raw import frame

pytestmark = pytest.mark.skipif(not NATIVE_ARRAY_CODECS,
                                reason="OffsetFetch is decoded by kio here")

#: groups with offsets, committed through the store's usual call (so routed and cached)
ROUTED = ["alpha", "beta", "gamma", "ünï"]
#: a group whose name the store has not routed: the Python handler answers it
UNROUTED = "never-committed"
#: topics (a non-ASCII one: the answer of every partition is in code point order)
TOPICS = ["orders", "pay.ments", "zeta", "émoji-😀", "Orders"]


class Conn:
    """``Connection``'s side of the loop: ``answer`` is the real Python path (counted)."""

    closing = False

    def __init__(self, store: OffsetStore) -> None:
        self.python_answers = 0
        real = Connection.__new__(Connection)  # (its dispatch and handlers; no socket)
        real.ctx = Context(store=store, config=ServerConfig(), topics=None, host="h", port=1)
        real.host = "test"
        real.session = Session(Listener("PLAINTEXT", "127.0.0.1", 0, "PLAINTEXT"),
                               SecurityConfig(), store)
        real.conns = SimpleNamespace(clock=lambda: 0)
        self._answer = real.answer

    def python(self, data: bytes):
        """The Python handler's answer to the frame ``data`` (its length prefix included):
        its bytes, or False (it closes the connection)."""
        return self._answer(data[4:])

    def answer(self, data: bytes):  # (the loop's call: the frame without its length)
        self.python_answers += 1
        return self._answer(data)


class NoTopics:
    """(the loop reads the topic registry for commits only)"""

    topics: dict = {}


@pytest.fixture
def loop(tmp_path, seeded_random):
    store = OffsetStore.open(tmp_path / "store", partitions=3)
    for group in ROUTED:
        for topic in TOPICS:
            parts = seeded_random.sample(range(6), 3)
            store.commit_sync(group, {TopicPartition(topic, p): seeded_random.randrange(1 << 40)
                                      for p in parts})
        # a metadata and a leader epoch (the Python path's commit), on a routed group
        store.commit_sync(group, {TopicPartition("orders", 7): OffsetAndMetadata(70, "note"),
                                  TopicPartition("zeta", 9): OffsetAndMetadata(90, "", 4)})
    conn = Conn(store)
    try:
        with native_loop(store, conn, NoTopics()) as sock:
            yield store, conn, sock
    finally:
        store.close()


def _exchange(sock, data: bytes) -> bytes:
    """The answer's bytes (its length prefix included) to the frame ``data``."""
    sock.sendall(data)
    size = struct.unpack(">i", exactly(sock, 4))[0]
    return struct.pack(">i", size) + exactly(sock, size)


def _fetch(version: int, groups, stable: bool = False, correlation_id: int = 1) -> bytes:
    """An OffsetFetch frame: ``groups`` of ``(group, topics or None, member, epoch)``."""
    def topics(ts):
        return None if ts is None else [dict(name=n, partition_indexes=ps) for n, ps in ts]
    if version >= 8:
        body = dict(groups=[dict(group_id=g, topics=topics(ts), member_id=m, member_epoch=e)
                            for g, ts, m, e in groups], require_stable=stable)
        if version < 9:
            for g in body["groups"]:
                del g["member_id"], g["member_epoch"]
    else:
        (g, ts, _, _), = groups
        body = dict(group_id=g, topics=topics(ts), require_stable=stable)
    return frame(9, version, correlation_id, **body)


def _random_topics(rnd, version: int):
    if version >= 2 and rnd.random() < 0.25:
        return None  # every partition the group has
    picked = [rnd.choice(TOPICS + ["unknown"]) for _ in range(rnd.randint(0, 4))]
    # (a topic named twice, a partition named twice, partitions with no offset, one no
    # commit can name: the topic "", a negative partition)
    picked += [""] * (rnd.random() < 0.1)
    return [(t, [rnd.randrange(-2, 10) for _ in range(rnd.randint(0, 4))]) for t in picked]


def test_plain_fetches_are_answered_natively_as_the_python_handler_answers(loop,
                                                                           seeded_random):
    store, conn, sock = loop
    rnd = seeded_random
    for i in range(300):
        version = rnd.randint(1, 9)
        count = rnd.randint(1, 3) if version >= 8 else 1
        groups = [(rnd.choice(ROUTED), _random_topics(rnd, version), None, -1)
                  for _ in range(count)]
        data = _fetch(version, groups, correlation_id=i)
        before = conn.python_answers
        answer = _exchange(sock, data)
        assert conn.python_answers == before, (version, groups)  # answered natively
        assert answer == conn.python(data), (version, groups)


@pytest.mark.parametrize("why, version, groups, stable", [
    ("require_stable", 7, [("alpha", [("orders", [0])], None, -1)], True),
    ("a group the store has not routed", 6, [(UNROUTED, [("orders", [0])], None, -1)], False),
    ("one group of several not routed", 8, [("alpha", None, None, -1),
                                            (UNROUTED, None, None, -1)], False),
    ("a KIP-848 member named", 9, [("alpha", [("orders", [0])], "member-1", 3)], False),
    ("a member epoch without a member", 9, [("alpha", [("orders", [0])], "", 0)], False),
])
def test_any_other_fetch_is_the_python_handlers(loop, why, version, groups, stable):
    store, conn, sock = loop
    data = _fetch(version, groups, stable)
    before = conn.python_answers
    assert _exchange(sock, data) == conn.python(data), why
    assert conn.python_answers == before + 1, why


def test_a_v9_fetch_naming_no_member_is_answered_natively(loop):
    store, conn, sock = loop
    data = _fetch(9, [("beta", [("zeta", [9, 0])], None, -1), ("alpha", None, "", -1)])
    answer = _exchange(sock, data)
    assert conn.python_answers == 0
    assert answer == conn.python(data)


def test_the_answer_follows_each_commit(loop):
    store, conn, sock = loop
    tp = TopicPartition("orders", 3)
    data = _fetch(6, [("gamma", [("orders", [3])], None, -1)])
    for offset in (11, 12, 13):
        store.commit_sync("gamma", {tp: offset})
        answer = _exchange(sock, data)
        assert answer == conn.python(data)
        assert struct.pack(">q", offset) in answer
    assert conn.python_answers == 0
