"""The engine's framing against the reference reader of docs/FORMAT.md (tests/support/
format_oracle.py): same bytes for the same batch, and on any bytes, intact or damaged, the same
batches, the same end and the same verdict (clean end, torn tail or corruption, with FORMAT.md's
reason), as issue 25 asks of the native decoder.

The engine side is ``offsetlog.log.framing``: ``encode_batch`` and ``BatchReader`` (its batches,
``end``, ``stop`` and ``zero_tail``), with a payload that does not decode judged as replay
judges it (``undecodable payload`` at that batch, recovery/replay.py).
"""

from __future__ import annotations

import re
from pathlib import Path

import msgpack
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from offsetlog.errors import UnsupportedVersionError
from offsetlog.log import framing
from support import format_oracle as oracle

DOCS = Path(__file__).resolve().parents[2] / "docs" / "FORMAT.md"
FAST = settings(max_examples=150, deadline=None,
                suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large])


# -- the two readers, in one shape -----------------------------------------------------------

def engine_read(data: bytes, *, min_offset: int = -1, zero_tail: bool = True):
    """What the engine makes of ``data``: ``(batches, end, verdict, zeros)``; ``verdict`` is
    None, ``("torn", position, reason)`` or ``("corrupt", position, reason, resume)``, or
    ``("unsupported",)``."""
    reader = framing.BatchReader(data, min_offset=min_offset, zero_tail=zero_tail)
    batches = []
    try:
        for b in reader:
            try:
                records = b.records()
            except Exception:  # noqa: BLE001 - as replay: undecodable payload, at this batch
                return batches, b.position, ("corrupt", b.position, oracle.UNDECODABLE, None), 0
            batches.append({"position": b.position, "size": b.size, "base_offset": b.base_offset,
                            "last_offset_delta": b.last_offset_delta,
                            "record_count": b.record_count, "timestamp": b.timestamp,
                            "attributes": b.attributes, "producer_id": b.producer_id,
                            "producer_epoch": b.producer_epoch, "payload": bytes(b.payload),
                            "records": _lists(records)})
    except UnsupportedVersionError:
        return batches, None, ("unsupported",), 0
    stop = reader.stop
    if stop is None:
        verdict = None
    elif stop.torn:
        verdict = ("torn", stop.position, stop.reason)
    else:
        verdict = ("corrupt", stop.position, stop.reason, stop.resume)
    return batches, reader.end, verdict, reader.zero_tail


def oracle_read(data: bytes, *, min_offset: int = -1, zero_tail: bool = True):
    """The reference reader's answer in ``engine_read``'s shape (the header fields the engine's
    ``Batch`` has; the CRCs and length are checked by both and compared through the bytes)."""
    try:
        batches, end, problem = oracle.read_segment(data, min_offset=min_offset,
                                                    zero_tail=zero_tail)
    except oracle.UnsupportedBatchError:
        return None, None, ("unsupported",), 0
    keep = ("position", "size", "base_offset", "last_offset_delta", "record_count",
            "timestamp", "attributes", "producer_id", "producer_epoch", "payload", "records")
    out = [{k: b[k] for k in keep} for b in batches]
    if problem is None:
        verdict = None
    elif problem.torn:
        verdict = ("torn", problem.position, problem.reason)
    else:
        verdict = ("corrupt", problem.position, problem.reason, problem.resume)
    zeros = oracle.zero_bytes_after(data, end) if problem is None and zero_tail else 0
    return out, end, verdict, zeros


def _lists(v):
    if isinstance(v, (list, tuple)):
        return [_lists(x) for x in v]
    if isinstance(v, dict):
        return {k: _lists(x) for k, x in v.items()}
    return v


def assert_same(data: bytes, *, min_offset: int = -1, zero_tail: bool = True) -> tuple:
    engine = engine_read(data, min_offset=min_offset, zero_tail=zero_tail)
    reference = oracle_read(data, min_offset=min_offset, zero_tail=zero_tail)
    if reference[2] == ("unsupported",):  # refused: which batches came first does not matter
        assert engine[2] == ("unsupported",), engine
        return reference
    assert engine[2] == reference[2], (engine[2], reference[2])
    assert engine[1] == reference[1]
    assert engine[3] == reference[3]
    assert engine[0] == reference[0]
    return reference


# -- random batches --------------------------------------------------------------------------

text = st.text(max_size=12)
ints = st.one_of(st.integers(-2**63, 2**64 - 1), st.integers(-5, 300))
leaf = st.one_of(st.none(), st.booleans(), ints, text, st.binary(max_size=12))
value = st.recursive(leaf, lambda c: st.one_of(st.lists(c, max_size=4),
                                               st.dictionaries(text, c, max_size=4)),
                     max_leaves=8)


@st.composite
def record_lists(draw):
    """1-6 records ``[delta, type, version, key, value]``: commits as the engine writes them
    (v1 positional, v0 named, tombstones) and arbitrary msgpack of the other types."""
    n = draw(st.integers(1, 6))
    deltas = sorted(draw(st.sets(st.integers(0, 40), min_size=n, max_size=n)))
    out = []
    for delta in deltas:
        kind = draw(st.sampled_from(["v1", "v0", "tombstone", "any"]))
        if kind == "v1":
            v = [draw(st.integers(0, 2**63 - 1)), draw(st.integers(0, 2**63 - 1))]
            v += draw(st.lists(st.one_of(text, st.none(), st.integers(0, 2**31 - 1)), max_size=3))
            out.append([delta, 1, 1, [draw(text), draw(text), draw(st.integers(0, 2**31 - 1))], v])
        elif kind == "v0":
            out.append([delta, 1, 0, {"group": draw(text), "topic": draw(text), "partition": 0},
                        {"offset": draw(st.integers(0, 99)), "commit_timestamp": 1,
                         "metadata": draw(text)}])
        elif kind == "tombstone":
            out.append([delta, 1, 1, [draw(text), draw(text), 0], None])
        else:
            out.append([delta, draw(st.integers(0, 6)), draw(st.integers(0, 2)), draw(value),
                        draw(value)])
    return out


@st.composite
def segments(draw, max_batches=5):
    """``(bytes, [(base, records, fields)])``: batches back to back with growing offsets, each
    encoded by the engine's ``encode_batch``."""
    base = draw(st.integers(-1, 1000))
    data, spec = b"", []
    for _ in range(draw(st.integers(1, max_batches))):
        records = draw(record_lists())
        fields = {"timestamp": draw(st.integers(0, 2**63 - 1)),
                  "attributes": draw(st.sampled_from([0, 1, 3, 4, 5, 7])),
                  "producer_id": draw(st.integers(-1, 2**63 - 1)),
                  "producer_epoch": draw(st.integers(-1, 2**15 - 1))}
        data += framing.encode_batch(base, records, **fields)
        spec.append((base, records, fields))
        base += records[-1][0] + 1 + draw(st.integers(0, 3))
    return data, spec


@FAST
@given(segments())
def test_same_bytes_and_same_reading_of_random_batches(seg):
    data, spec = seg
    reference = b"".join(oracle.encode_records(base, records, **fields)
                         for base, records, fields in spec)
    assert data == reference  # the engine frames a batch byte for byte as FORMAT.md says
    batches, end, verdict, zeros = assert_same(data)
    assert verdict is None and end == len(data) and zeros == 0
    assert [(b["base_offset"], b["records"]) for b in batches] == [
        (base, _lists(records)) for base, records, _ in spec]


#: every msgpack integer form's edges (positive fixint, uint8..uint64, negative fixint,
#: int8..int64), each value written in its smallest form
INT_EDGES = sorted({e + d for e in (0, 127, 255, 2**16 - 1, 2**32 - 1, 2**63 - 1, 2**64 - 1,
                                    -32, -128, -2**15, -2**31, -2**63) for d in (-1, 0, 1)
                    if -2**63 <= e + d < 2**64})


@pytest.mark.parametrize("value", INT_EDGES)
def test_every_integer_form_round_trips(value):
    records = [[0, 1, 1, ["g", "t", 0], [value, value]], [1, value % 7, 0, value, None]]
    data = framing.encode_batch(0, records, timestamp=1)
    assert data == oracle.encode_records(0, records, timestamp=1)
    batches, _end, verdict, _ = assert_same(data)
    assert verdict is None and batches[0]["records"] == records


@FAST
@given(segments(), st.data())
def test_same_verdict_on_damaged_bytes(seg, data):
    """Flipped bytes, a cut anywhere, a zero-filled reserve, bytes appended or inserted."""
    raw = bytearray(seg[0])
    for _ in range(data.draw(st.integers(0, 3), label="flips")):
        i = data.draw(st.integers(0, len(raw) - 1), label="at")
        raw[i] ^= data.draw(st.integers(1, 255), label="mask")
    cut = data.draw(st.one_of(st.none(), st.integers(0, len(raw))), label="cut")
    if cut is not None:
        del raw[cut:]
    tail = data.draw(st.sampled_from(["none", "zeros", "junk", "zeros+junk"]), label="tail")
    if "zeros" in tail:
        raw += bytes(data.draw(st.integers(1, 300), label="zeros"))
    if "junk" in tail:
        raw += data.draw(st.binary(min_size=1, max_size=60), label="junk")
    min_offset = data.draw(st.sampled_from([-1, 0, 500, 2000]), label="min_offset")
    zero_tail = data.draw(st.booleans(), label="zero_tail")
    assert_same(bytes(raw), min_offset=min_offset, zero_tail=zero_tail)


@FAST
@given(segments(max_batches=3), st.data())
def test_same_verdict_on_a_valid_batch_spliced_in(seg, data):
    """A valid batch copied after damage (a resync finds it: corruption) or inside another's
    extent (never taken for a batch while that batch's header checks out)."""
    raw = bytearray(seg[0])
    first = seg[0][:4 + int.from_bytes(seg[0][:4], "little")]
    at = data.draw(st.integers(0, len(raw)), label="at")
    raw[at:at] = data.draw(st.binary(max_size=8), label="junk") + first
    assert_same(bytes(raw), min_offset=data.draw(st.sampled_from([-1, 10**6])),
                zero_tail=data.draw(st.booleans()))


# -- batches whose checksums are right and whose fields are not ------------------------------

@FAST
@given(st.integers(0, 3), st.integers(0, 3), st.integers(-3, 3), st.booleans(),
       st.sampled_from([0xA1, 0xA0, 0xA2, 0x00]), st.sampled_from([0, 1, 3, 4, 8, 0x80]),
       st.sampled_from([None, 0, 43, 44, 2**30 + 1, 2**32 - 1]), st.booleans())
def test_same_verdict_on_fields_a_writer_got_wrong(count, delta, step, then_valid, magic,
                                                   attributes, length, undecodable):
    payload = b"\xc1" if undecodable else msgpack.packb([[0, 1, 1, ["g", "t", 0], [1, 2]]])
    good = oracle.encode_records(0, [[0, 1, 1, ["g", "t", 0], [5, 6]]], timestamp=1)
    bad = oracle.encode_frame(step, payload, record_count=count, last_offset_delta=delta,
                              timestamp=2, magic=magic, attributes=attributes, length=length)
    data = good + bad
    if then_valid:
        data += oracle.encode_records(100, [[0, 1, 1, ["g", "t", 0], [7, 8]]], timestamp=3)
    assert_same(data)
    assert_same(data, min_offset=-5, zero_tail=False)


# -- each of FORMAT.md's reasons, at the tail (torn) and before a valid batch (corrupt) ------

GOOD = [[0, 1, 1, ["g", "t", 0], [5, 6]]]


def _frame(base=10, payload=None, **fields):
    payload = msgpack.packb(GOOD) if payload is None else payload
    fields = {"record_count": 1, "last_offset_delta": 0, "timestamp": 2, **fields}
    return oracle.encode_frame(base, payload, **fields)


def _flip(data: bytes, i: int) -> bytes:
    raw = bytearray(data)
    raw[i] ^= 0x10
    return bytes(raw)


def _nested(depth: int, leaf) -> bytes:
    """msgpack of ``leaf`` inside ``depth`` arrays: ``leaf`` at depth ``depth``."""
    value = leaf
    for _ in range(depth):
        value = [value]
    return msgpack.packb(value)


# (what FORMAT.md calls it, the bad batch, whether a valid batch after it makes it corruption:
# a batch that runs past the end is torn whatever follows, since nothing follows within it;
# "tail": a case that exists only at the end of the data: a header cut short, a batch cut by
# one byte, are other cases once bytes follow)
DAMAGE = [
    (oracle.TRUNCATED_HEADER, _frame()[:30], "tail"),
    (oracle.HEADER_CHECKSUM, _flip(_frame(), 20), True),
    (oracle.BAD_LENGTH, _frame(length=43), True),
    (oracle.BAD_LENGTH, _frame(length=2**30 + 1), True),
    (oracle.TRUNCATED_BATCH, _frame(length=10_000), False),
    (oracle.TRUNCATED_BATCH, _frame()[:-1], "tail"),
    (oracle.CHECKSUM, _flip(_frame(), 60), True),
    (oracle.BAD_RECORD_COUNT, _frame(record_count=0), True),
    (oracle.BAD_RECORD_COUNT, _frame(record_count=3, last_offset_delta=1), True),
    (oracle.OUT_OF_ORDER, _frame(base=0), True),
    (oracle.UNDECODABLE, _frame(payload=b"\xc1"), None),
    (oracle.UNDECODABLE, _frame(payload=b"\x91\xa2\xff\xfe"), None),  # a str not UTF-8
    (oracle.UNDECODABLE, _frame(payload=msgpack.packb(GOOD) + b"\x00"), None),  # extra data
    (oracle.UNDECODABLE, _frame(payload=b"\x91\x81\x01\x02"), None),  # a map key of 1
]


@pytest.mark.parametrize("reason,bad,resyncs,followed", [
    (*case, followed) for case in DAMAGE for followed in (False, True)
    if not (case[2] == "tail" and followed)])
def test_each_reason_as_torn_tail_and_as_corruption(reason, bad, resyncs, followed):
    first = oracle.encode_records(0, GOOD, timestamp=1)  # offsets 0..0: the bad one needs > 0
    after = oracle.encode_records(100, GOOD, timestamp=3) if followed else b""
    data = first + bad + after
    batches, end, verdict, _ = assert_same(data, zero_tail=False)
    assert [b["base_offset"] for b in batches] == [0] and end == len(first)
    if resyncs is None:  # a batch that checks out and does not decode: corrupt, never torn
        assert verdict == ("corrupt", len(first), reason, None)
    elif followed and resyncs:
        assert verdict == ("corrupt", len(first), reason, len(first) + len(bad))
    else:
        assert verdict == ("torn", len(first), reason)


@pytest.mark.parametrize("payload", [
    msgpack.packb([[0, 1, 1, ["g", "t", 0], [1, 2, msgpack.ExtType(5, b"x")]]]),
    _nested(oracle.MAX_DEPTH + 1, 0),
    _nested(oracle.MAX_DEPTH + 1, []),
])
@pytest.mark.parametrize("followed", [False, True])
def test_msgpack_outside_the_format_is_undecodable(payload, followed):
    first = oracle.encode_records(0, GOOD, timestamp=1)
    after = oracle.encode_records(100, GOOD, timestamp=3) if followed else b""
    assert assert_same(first + _frame(payload=payload) + after)[2] == (
        "corrupt", len(first), oracle.UNDECODABLE, None)


def test_nesting_up_to_the_limit_decodes():
    for leaf in (0, []):
        assert assert_same(_frame(base=0, payload=_nested(oracle.MAX_DEPTH, leaf)))[2] is None


@pytest.mark.parametrize("magic,attributes", [(0xA0, 0), (0xA2, 0), (0xA1, 0x08), (0xA1, 0x80)])
def test_a_batch_of_another_format_is_refused_not_skipped(magic, attributes):
    data = oracle.encode_records(0, GOOD, timestamp=1) + _frame(magic=magic,
                                                                attributes=attributes)
    assert oracle_read(data)[2] == ("unsupported",)
    assert_same(data)
    # ... but is not a resync target after damage: the damage is a torn tail
    assert assert_same(_flip(_frame(), 20) + _frame(magic=magic, attributes=attributes))[2][0] \
        == "torn"


def test_zeros_end_the_data_only_at_a_batch_boundary_and_only_when_all_zero():
    good = oracle.encode_records(0, GOOD, timestamp=1)
    assert assert_same(good + bytes(100)) == ([_any_batch(good)], len(good), None, 100)
    assert assert_same(good + bytes(100), zero_tail=False)[2][0] == "torn"
    assert assert_same(good + bytes(100) + b"\x01")[2][0] == "torn"
    later = oracle.encode_records(5, GOOD, timestamp=1)
    assert assert_same(good + bytes(100) + later)[2][:3] == (
        "corrupt", len(good), oracle.HEADER_CHECKSUM)


def _any_batch(data: bytes) -> dict:
    return oracle_read(data)[0][0]


# -- every cut of one small segment ----------------------------------------------------------

def _small_segment() -> bytes:
    parts = [framing.encode_batch(0, [(0, 1, 1, ["g", "t", 0], [1, 1700000000000])],
                                  timestamp=1700000000000),
             framing.encode_batch(1, [(0, 1, 1, ["g", "t", 1], [2, 1, "meta", 3]),
                                      (2, 1, 1, ["h", "u", 0], None)],
                                  timestamp=1700000000001, attributes=1, producer_id=4,
                                  producer_epoch=2),
             framing.encode_batch(4, [(0, 3, 0, {"producer_id": 4},
                                       {"producer_epoch": 2, "result": "commit"})],
                                  timestamp=1700000000002, attributes=3, producer_id=4,
                                  producer_epoch=2)]
    return b"".join(parts)


@pytest.mark.parametrize("zero_tail", [True, False])
def test_same_verdict_at_every_cut_and_every_zeroed_tail(zero_tail):
    data = _small_segment()
    verdicts = set()
    for cut in range(len(data) + 1):
        _, _, verdict, _ = assert_same(data[:cut], zero_tail=zero_tail)
        verdicts.add(verdict and verdict[2])
        # the rest of the file zeroed, as a reserve the write never reached
        _, _, verdict, _ = assert_same(data[:cut] + bytes(len(data) - cut), zero_tail=zero_tail)
        verdicts.add(verdict and verdict[2])
    assert {None, oracle.TRUNCATED_HEADER, oracle.TRUNCATED_BATCH} <= verdicts


def test_same_verdict_for_every_single_flipped_byte():
    data = _small_segment()
    seen = set()
    for i in range(len(data)):
        for mask in (0x01, 0x80):
            raw = bytearray(data)
            raw[i] ^= mask
            _, _, verdict, _ = assert_same(bytes(raw))
            seen.add(verdict and verdict[:1] + verdict[2:3])
    assert ("torn", oracle.CHECKSUM) in seen and ("corrupt", oracle.HEADER_CHECKSUM) in seen


# -- the oracle against FORMAT.md's own example ----------------------------------------------

def _worked_example() -> bytes:
    """The 82 bytes of FORMAT.md's "Worked example", read from the document."""
    text = DOCS.read_text()
    section = text[text.index("## Worked example"):]
    block = section[section.index("```") + 3:]
    block = block[:block.index("```")]
    return bytes.fromhex("".join(re.sub(r"^\s*[0-9a-f]{4}\s", "", line)
                                 for line in block.strip().splitlines()))


def test_the_oracle_reads_the_worked_example_and_the_engine_writes_it():
    data = _worked_example()
    batches, end, problem = oracle.read_segment(data)
    assert problem is None and end == len(data)
    (b,) = batches
    # the values FORMAT.md's table gives for these bytes
    assert (b["length"], b["base_offset"], b["record_count"], b["timestamp"],
            b["producer_id"]) == (78, 7, 1, 1_700_000_000_000, -1)
    assert b["records"] == [[0, 1, 1, ["my-group", "orders", 0], [42, 1_700_000_000_000]]]
    assert oracle.offset_commit(1, *b["records"][0][3:]) == (
        {"group": "my-group", "topic": "orders", "partition": 0},
        {"offset": 42, "commit_timestamp": 1_700_000_000_000, "metadata": "",
         "leader_epoch": None, "expire_timestamp": None})
    assert framing.encode_batch(7, b["records"], timestamp=b["timestamp"]) == data
    assert_same(data)
