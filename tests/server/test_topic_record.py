"""The TOPIC record (type 5): the wire server's topic registry, persisted in the log."""

from __future__ import annotations

import os
import re

import msgpack
import pytest

from offsetlog import OffsetStore
from offsetlog.compaction.rules import record_key as cleaner_key
from offsetlog.errors import InvalidTopicError, TopicAlreadyExistsError
from offsetlog.log.format import RecordType
from offsetlog.log.records import TOPIC, topic
from offsetlog.table import OffsetTable

DOC = os.path.join(os.path.dirname(__file__), "..", "..", "docs", "FORMAT.md")
TOPIC_ID = bytes(range(0, 256, 17))  # 00 11 22 .. ff


def test_documented_example_is_what_msgpack_writes():
    text = open(DOC, encoding="utf-8").read()
    block = text.split("#### `TOPIC` (type 5)", 1)[1].split("```", 2)[1]
    out = bytearray()
    for token in re.findall(r'"[^"]*"|[0-9a-f]{2}', block):
        if token.startswith('"'):
            word = token[1:-1].encode()
            out += word
        else:
            out += bytes.fromhex(token)
    record = topic(0, "orders", {"partitions": 3, "topic_id": TOPIC_ID,
                                 "created_timestamp": 1_700_000_000_000})
    assert msgpack.packb(list(record), use_bin_type=True) == bytes(out)
    assert RecordType.TOPIC == TOPIC == 5


def test_table_applies_topics_and_snapshots_them():
    t = OffsetTable()
    value = {"partitions": 2, "topic_id": TOPIC_ID, "created_timestamp": 1}
    t.apply(0, topic(0, "a", value))
    assert t.topics == {"a": value}
    state = msgpack.unpackb(msgpack.packb(t.snapshot_state(), use_bin_type=True), raw=False)
    assert OffsetTable.from_snapshot_state(state).topics == {"a": value}
    del state["topic_registry"]  # a snapshot from before type 5: no topics, still loads
    assert OffsetTable.from_snapshot_state(state).topics == {}
    t.apply(1, topic(0, "a", None))
    assert t.topics == {}


def test_the_cleaner_keys_topics_by_name():
    assert cleaner_key(topic(0, "a", None)) == (TOPIC, "a")


def test_registry_survives_reopen_with_and_without_snapshots(store_dir):
    with OffsetStore.open(store_dir, partitions=4) as s:
        v = s.create_topic("orders", 3, topic_id=TOPIC_ID)
        with pytest.raises(TopicAlreadyExistsError):
            s.create_topic("orders", 5, topic_id=os.urandom(16))
    with OffsetStore.open(store_dir) as s:  # from the snapshot written on close
        assert s.topics() == {"orders": v}
    with OffsetStore.open(store_dir, snapshots=False) as s:  # from the log alone
        assert s.topics() == {"orders": v}
        s.compact()
        assert s.topics() == {"orders": v}


@pytest.mark.parametrize("name,partitions,tid", [
    ("", 1, TOPIC_ID), ("..", 1, TOPIC_ID), ("a/b", 1, TOPIC_ID), ("x" * 250, 1, TOPIC_ID),
    ("ok", 0, TOPIC_ID), ("ok", 1, bytes(16)), ("ok", 1, b"short")])
def test_bad_topics_are_refused_and_nothing_is_written(store_dir, name, partitions, tid):
    with OffsetStore.open(store_dir, partitions=2) as s:
        with pytest.raises(InvalidTopicError):
            s.create_topic(name, partitions, topic_id=tid)
        assert s.topics() == {}
