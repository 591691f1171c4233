import sys

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from offsetlog import OffsetAndMetadata, OffsetStore, TopicPartition
from offsetlog.errors import (
    IllegalGenerationError,
    InvalidCommitError,
    InvalidGroupIdError,
    InvalidTopicError,
    OffsetlogError,
    OffsetMetadataTooLargeError,
)
from offsetlog.log._native import KeyCache
from offsetlog.log.records import KEYS_CACHED
from offsetlog.validation import check_offsets, utf16_length

TP = TopicPartition("t", 0)


@pytest.fixture
def store(store_dir, clock):
    with OffsetStore.open(store_dir, partitions=3, clock=clock) as s:
        yield s


def offset_commit_records(group, offsets, timestamp, metadata_max, keys=None):
    """The records a commit call's fields build (what the leader writes), and their bound."""
    from offsetlog.log.records import offset_commit_fields, records_from_fields
    fields, nbytes = offset_commit_fields(group, offsets, timestamp, metadata_max, keys)
    return tuple(records_from_fields(fields)), nbytes


def assert_nothing_written(store):
    assert store.groups() == []
    assert all(p["next_offset"] == 0 for p in store.stats())


@pytest.mark.parametrize("group", ["", None, 5, b"g"])
def test_bad_group_id(store, group):
    with pytest.raises(InvalidGroupIdError):
        store.commit_sync(group, {TP: 1})
    assert_nothing_written(store)


@pytest.mark.parametrize("offsets,error", [
    ({("t", 0): 1}, InvalidCommitError),  # a plain tuple is not a TopicPartition
    ({"t": 1}, InvalidCommitError),
    ({TopicPartition("", 0): 1}, InvalidTopicError),
    ({TopicPartition(5, 0): 1}, InvalidTopicError),
    ({TopicPartition("t", -1): 1}, InvalidCommitError),
    ({TopicPartition("t", True): 1}, InvalidCommitError),
    ({TP: -1}, InvalidCommitError),
    ({TP: 1.0}, InvalidCommitError),
    ({TP: True}, InvalidCommitError),
    ({TP: "5"}, InvalidCommitError),
    ({TP: OffsetAndMetadata(-2)}, InvalidCommitError),
    ({TP: OffsetAndMetadata(1, 5)}, InvalidCommitError),
    ({TP: OffsetAndMetadata(1, "", -7)}, InvalidCommitError),
    ({TP: OffsetAndMetadata(1, "", "3")}, InvalidCommitError),
    ([(TP, 1)], InvalidCommitError),
    # beyond Kafka's types (int64 offsets, int32 partitions and epochs): such a commit used to
    # be written (or fail in msgpack with OverflowError), and the Spark source, whose
    # partition and leader_epoch columns are INT, then failed on the whole store
    ({TP: 2**63}, InvalidCommitError),
    ({TP: OffsetAndMetadata(2**64)}, InvalidCommitError),
    ({TopicPartition("t", 2**31): 1}, InvalidCommitError),
    ({TopicPartition("t", 2**64): OffsetAndMetadata(1)}, InvalidCommitError),
    ({TP: OffsetAndMetadata(1, "", 2**31)}, InvalidCommitError),
])
def test_bad_offsets_are_rejected_and_write_nothing(store, offsets, error):
    with pytest.raises(error):
        store.commit_sync("g", offsets)
    with pytest.raises(error):
        store.commit_async("g", offsets)
    assert_nothing_written(store)


def test_one_bad_offset_rejects_the_whole_call(store):
    offsets = {TopicPartition("t", i): i for i in range(10)}
    offsets[TopicPartition("t", 10)] = -1
    with pytest.raises(InvalidCommitError):
        store.commit_sync("g", offsets)
    assert_nothing_written(store)


def test_metadata_limit_counts_utf16_units(store):
    store.commit_sync("g", {TP: OffsetAndMetadata(1, "a" * 4096)})
    assert store.committed("g", TP).metadata == "a" * 4096
    # 2048 emoji are 4096 UTF-16 units: at the limit. One more ASCII char is over.
    store.commit_sync("g", {TP: OffsetAndMetadata(2, "😀" * 2048)})
    with pytest.raises(OffsetMetadataTooLargeError) as e:
        store.commit_sync("g", {TP: OffsetAndMetadata(3, "😀" * 2048 + "a")})
    assert (e.value.length, e.value.limit, e.value.code) == (4097, 4096, 12)
    with pytest.raises(OffsetMetadataTooLargeError):
        store.commit_sync("g", {TP: OffsetAndMetadata(3, "a" * 4097)})
    assert store.committed("g", TP).offset == 2


def test_utf16_length():
    assert utf16_length("abc") == 3
    assert utf16_length("é") == 1
    assert utf16_length("😀") == 2


def test_errors_share_one_root_and_carry_kafka_codes():
    assert issubclass(InvalidCommitError, OffsetlogError)
    assert issubclass(InvalidCommitError, ValueError)
    assert InvalidGroupIdError.code == 24
    assert IllegalGenerationError.code == 22


def test_unmanaged_groups_accept_only_generation_minus_one(store):
    # Kafka: a group the coordinator does not manage takes commits outside a generation only.
    with pytest.raises(IllegalGenerationError):
        store.commit_sync("g", {TP: 1}, generation_id=3, member_id="m")
    with pytest.raises(IllegalGenerationError):
        store.commit_async("g", {TP: 1}, generation_id=0)
    with pytest.raises(IllegalGenerationError):
        store.commit_sync("g", {TP: 1}, generation_id="1")
    assert_nothing_written(store)
    # ... and, like Kafka, it ignores a member id sent with generation -1
    store.commit_sync("g", {TP: 1}, member_id="m")
    assert store.committed("g", TP).offset == 1


def test_empty_commit_is_a_no_op(store):
    store.commit_sync("g", {})
    assert store.commit_async("g", {}).result(timeout=5) is None
    assert_nothing_written(store)


def test_the_largest_kafka_values_are_accepted(store):
    tp = TopicPartition("t", 2**31 - 1)
    store.commit_sync("g", {tp: 2**63 - 1, TP: OffsetAndMetadata(2**63 - 1, "", 2**31 - 1)})
    assert store.fetch("g") == {tp: OffsetAndMetadata(2**63 - 1),
                                TP: OffsetAndMetadata(2**63 - 1, "", 2**31 - 1)}


def test_leader_epoch_minus_one_means_none(store):
    store.commit_sync("g", {TP: OffsetAndMetadata(5, "", -1)})
    assert store.committed("g", TP) == OffsetAndMetadata(5, "", None)


@settings(max_examples=300, deadline=None)
@given(st.dictionaries(
    st.builds(TopicPartition, st.text(min_size=1, max_size=5), st.integers(0, 2**31 - 1)),
    st.one_of(st.integers(0, 2**63 - 1),
              st.builds(OffsetAndMetadata, st.integers(0, 2**63 - 1), st.text(max_size=5),
                        st.one_of(st.none(), st.integers(-1, 10)))),
    max_size=4))
def test_the_commit_fast_path_builds_the_records_the_checked_path_builds(offsets):
    """``offset_commit_fields`` takes the usual dict-of-ints the short way; whatever the
    shape, its records (and their bytes) equal those of check_offsets + offset_commit."""
    from offsetlog.log.framing import encode_payload
    from offsetlog.log.records import offset_commit
    expected = tuple(offset_commit(i, "g", t, p, o, metadata=m, leader_epoch=e,
                                   commit_timestamp=1234)
                     for i, (t, p, o, m, e) in enumerate(check_offsets(offsets,
                                                                       metadata_max=4096)))
    got, nbytes = offset_commit_records("g", offsets, 1234, 4096)
    assert got == expected
    if got:
        assert encode_payload(got) == encode_payload(expected)
        assert nbytes >= len(encode_payload(got))  # max_group_commit_bytes counts this bound
    else:
        assert nbytes == 0
    # with a cache of record keys (commit_async's), warm or cold: the same records, and each
    # key names its own group
    keys = KeyCache(KEYS_CACHED)
    for group in ("g", "h", "g"):
        cached, n = offset_commit_records(group, offsets, 1234, 4096, keys)
        assert n == nbytes
        assert cached == tuple((d, t, v, [group, *k[1:]], val)
                               for d, t, v, k, val in expected)


def test_the_record_key_cache_is_bounded():
    keys = KeyCache(KEYS_CACHED)
    for p in range(KEYS_CACHED + 10):
        group = f"g{p % 3}"  # (the bound is the cache's, over every group's keys)
        (record,), _ = offset_commit_records(group, {TopicPartition("t", p): 1}, 0, 4096, keys)
        assert record[3] == [group, "t", p]
        assert len(keys) <= KEYS_CACHED
    assert len(keys) == 10  # started over once full


def test_the_record_key_cache_shares_one_key_per_group_and_partition():
    """Calls of one (group, topic, partition) share its record key, whichever
    ``TopicPartition`` object (or equal tuple) names it; another group's is its own. The
    key's topic is interned, as the table's key has it."""
    keys = KeyCache(KEYS_CACHED)
    topic = "".join(["or", "ders"])  # (a str made at run time: not interned)

    def key(group, tp):
        (record,), _ = offset_commit_records(group, {tp: 1}, 0, 4096, keys)
        return record[3]

    first = key("g", TopicPartition(topic, 0))
    assert first == ["g", "orders", 0] and first[1] is sys.intern("orders")
    assert key("g", TopicPartition(topic, 0)) is first
    assert key("h", TopicPartition(topic, 0)) == ["h", "orders", 0]
    assert key("h", TopicPartition(topic, 0)) is not first
    assert key("g", TopicPartition(topic, 1)) == ["g", "orders", 1]
    assert len(keys) == 3


@settings(max_examples=200, deadline=None)
@given(group=st.text(min_size=1, max_size=300).filter(lambda g: g.encode("utf-8", "replace")),
       topics=st.lists(st.text(alphabet=st.characters(max_codepoint=127), min_size=1,
                               max_size=300), min_size=1, max_size=3),
       partition=st.sampled_from([0, 127, 128, 2**16, 2**31 - 1]),
       offset=st.sampled_from([0, 2**31, 2**63 - 1]),
       timestamp=st.sampled_from([0, -1, -(2**63), 2**63 - 1]),
       delta=st.sampled_from([0, 2**16, 2**32 - 1]))
def test_the_size_bound_of_plain_commits_holds_at_every_extreme(group, topics, partition, offset,
                                                                 timestamp, delta):
    """The bound a plain commit reports (``PLAIN_COMMIT_BOUND`` + its text) is never below its
    encoded size, whatever the widths of its integers and text, even renumbered within a run
    of up to 2**32 records (which is how ``max_group_commit_bytes`` caps a run)."""
    from offsetlog.log.framing import encode_payload
    if any(0xD800 <= ord(c) <= 0xDFFF for c in group):
        return  # not encodable: refused before this
    offsets = {TopicPartition(t, partition): offset for t in topics}
    records, nbytes = offset_commit_records(group, offsets, timestamp, 4096)
    renumbered = [(delta + i,) + r[1:] for i, r in enumerate(records)]
    assert len(encode_payload(renumbered)) <= nbytes


def test_a_callback_that_cannot_be_called_is_refused_at_once(tmp_path):
    with OffsetStore.open(tmp_path / "s", partitions=1) as s:
        with pytest.raises(TypeError):
            s.commit_async("g", {TopicPartition("t", 0): 1}, callback=5)
        assert s.committed("g", TopicPartition("t", 0)) is None


@pytest.mark.parametrize("call", ["topic", "metadata", "delete", "transactional_id"])
def test_text_that_cannot_be_written_is_refused_with_a_clear_error(tmp_path, call):
    """A lone surrogate cannot be encoded: refused before anything is queued, with the
    store's own error (it escaped as a UnicodeEncodeError, after a producer id was spent for
    a transactional id, or in the writer for a delete)."""
    from offsetlog.errors import InvalidTxnStateError, OffsetlogError
    bad = "t\ud800"
    with OffsetStore.open(tmp_path / "s", partitions=1) as s:
        with pytest.raises(OffsetlogError):
            if call == "topic":
                s.commit_sync("g", {TopicPartition(bad, 0): 1})
            elif call == "metadata":
                s.commit_async("g", {TopicPartition("t", 0): OffsetAndMetadata(1, bad)})
            elif call == "delete":
                s.delete_offsets("g", [TopicPartition(bad, 0)])
            else:
                with pytest.raises(InvalidTxnStateError):
                    s.init_transactions(bad)
                raise InvalidTxnStateError("checked")
        s.commit_sync("g", {TopicPartition("t", 0): 2})  # the store works on
        assert s.committed("g", TopicPartition("t", 0)).offset == 2
        if call == "transactional_id":
            assert s.init_transactions("ok").producer_id == 0  # no producer id was spent
