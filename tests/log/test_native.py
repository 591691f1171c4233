"""The native core's codec (``offsetlog.log._native``) against its oracles: zlib for the CRC,
the msgpack package for the payload's bytes, and arbitrary bytes for the loops that read
untrusted segments (whatever they are given, a typed error or an answer, never a crash)."""

from __future__ import annotations

import math
import zlib

import msgpack
import pytest
from hypothesis import HealthCheck, assume, given, settings
from hypothesis import strategies as st

from offsetlog.errors import UnsupportedVersionError
from offsetlog.log import _native
from offsetlog.log.framing import encode_batch
from offsetlog.log.records import offset_commit

INT64 = st.integers(min_value=-(1 << 63), max_value=(1 << 64) - 1)

values = st.recursive(
    st.none() | st.booleans() | INT64 | st.text(max_size=40) | st.binary(max_size=40)
    | st.floats(allow_nan=False),
    lambda inner: st.lists(inner, max_size=6) | st.tuples(inner, inner)
    | st.dictionaries(st.text(max_size=10), inner, max_size=5),
    max_leaves=30)


@given(st.binary(max_size=300), st.integers(min_value=0, max_value=(1 << 32) - 1))
def test_crc32_is_zlibs(data, start):
    assert _native.crc32(data) == zlib.crc32(data)
    assert _native.crc32(data, start) == zlib.crc32(data, start)


@given(values)
def test_encoding_is_the_msgpack_packages_byte_for_byte(value):
    assert _native.encode_payload(value) == msgpack.packb(value, use_bin_type=True)


def _plain(value):
    """What a decoded value equals: tuples become lists, as msgpack arrays decode."""
    if isinstance(value, (list, tuple)):
        return [_plain(v) for v in value]
    if isinstance(value, dict):
        return {k: _plain(v) for k, v in value.items()}
    return value


@given(values)
def test_decoding_gives_what_was_encoded(value):
    assert _native.decode_payload(_native.encode_payload(value)) == _plain(value)


def _has_ext(value) -> bool:
    if isinstance(value, (msgpack.ExtType, msgpack.Timestamp)):
        return True
    if isinstance(value, list):
        return any(map(_has_ext, value))
    if isinstance(value, dict):
        return any(map(_has_ext, value.values()))
    return isinstance(value, float) and math.isnan(value)  # NaN never compares equal


@settings(suppress_health_check=[HealthCheck.filter_too_much])
@given(st.binary(max_size=64))
def test_any_bytes_decode_as_the_msgpack_package_decodes_them(data):
    try:
        expected = msgpack.unpackb(data, raw=False)
    except Exception:  # noqa: BLE001 - any refusal of the package's: the native refuses too
        with pytest.raises(ValueError):
            _native.decode_payload(data)
        return
    assume(not _has_ext(expected))  # extension types are no part of the format (refused)
    assert _native.decode_payload(data) == expected


def test_extension_types_and_deep_nesting_are_refused_not_crashed():
    with pytest.raises(ValueError, match="extension"):
        _native.decode_payload(msgpack.packb(msgpack.ExtType(1, b"x")))
    with pytest.raises(ValueError, match="deeply"):
        _native.decode_payload(b"\x91" * 100_000 + b"\xc0")
    with pytest.raises(ValueError, match="extra bytes"):
        _native.decode_payload(b"\x90\x90")
    with pytest.raises(ValueError, match="map key"):
        _native.decode_payload(b"\x81\x01\x02")


def test_encoding_refuses_what_msgpack_cannot_hold():
    with pytest.raises(OverflowError):
        _native.encode_payload(1 << 64)
    with pytest.raises(TypeError, match="serialize"):
        _native.encode_payload([object()])
    with pytest.raises(UnicodeEncodeError):
        _native.encode_payload("\ud800")
    with pytest.raises(ValueError, match="nested"):
        deep: list = []
        for _ in range(1000):
            deep = [deep]
        _native.encode_payload(deep)


def test_frame_records_is_encode_then_frame():
    records = [offset_commit(d, "g", "t", d, 100 + d, commit_timestamp=5) for d in range(3)]
    framed = _native.frame_records(9, records, 5, 1, 7, 2)
    payload = _native.encode_payload(records)
    assert framed == _native.frame_payload(9, payload, 3, 2, 5, 1, 7, 2)
    with pytest.raises(ValueError, match="at least one"):
        _native.frame_records(0, [], 5)


def _segment() -> bytes:
    return b"".join(encode_batch(i * 2, [offset_commit(0, f"g{i}", "t", i, i, commit_timestamp=1)],
                                       timestamp=1)
                    for i in range(4))


@settings(max_examples=300)
@given(st.data())
def test_the_loops_over_untrusted_bytes_answer_or_raise_a_typed_error(data):
    seg = bytearray(_segment())
    for _ in range(data.draw(st.integers(0, 6))):
        seg[data.draw(st.integers(0, len(seg) - 1))] = data.draw(st.integers(0, 255))
    seg = bytes(seg[:data.draw(st.integers(0, len(seg)))]) + data.draw(st.binary(max_size=60))
    pos = data.draw(st.integers(0, len(seg) + 100))
    end = data.draw(st.integers(0, len(seg) + 100))
    floor = data.draw(st.integers(-(1 << 63), 20))
    try:
        _native.check_at(seg, pos, end, floor)
    except UnsupportedVersionError:
        pass
    resume = _native.find_next_valid(seg, pos, end, floor)
    assert resume is None or pos <= resume < len(seg)
    found, stop, _, _ = _native.scan(seg, pos, end, floor, data.draw(st.integers(0, 5)))
    assert all(a < b <= len(seg) for a, b, _ in found)
    try:
        chunk, stop, _, batches, _, status, error = _native.decode_chunk(
            seg, pos, end, floor, data.draw(st.integers(0, 5)))
    except UnsupportedVersionError:
        return
    assert len(chunk) == batches and status in (0, 1, 2, 3) and (error is None) == (status != 3)


# -- snapshot bodies ---------------------------------------------------------------------------

entries = st.tuples(st.integers(0, 2), st.integers(0, 40), INT64.filter(lambda v: v < 1 << 63),
                    st.text(max_size=8), st.none() | st.integers(-1, 50), st.integers(0, 1 << 50),
                    st.none() | st.integers(0, 1 << 50))


@given(st.dictionaries(st.text(min_size=1, max_size=6), st.lists(entries, min_size=1, max_size=6),
                       max_size=6))
def test_a_snapshot_body_decodes_into_the_table_a_python_reading_builds(groups):
    topics = ["t0", "t1", "t2"]
    flat_section = []
    for group, rows in groups.items():
        flat_section += [group, [v for row in rows for v in row]]
    state = {"next_offset": 5, "topics": topics, "offsets": flat_section, "group_metadata": {}}
    body = _native.encode_payload(state)
    assert body == msgpack.packb(state, use_bin_type=True)
    decoded = _native.decode_snapshot_body(body)
    expected = {group: {(topics[t], p): (o, m, le, c, e) for t, p, o, m, le, c, e in rows}
                for group, rows in groups.items()}
    assert decoded["offsets"] == expected
    assert _native.offsets_from_flat(flat_section, topics) == expected
    assert {k: v for k, v in decoded.items() if k != "offsets"} == {
        "next_offset": 5, "topics": topics, "group_metadata": {}}


def test_snapshot_offsets_out_of_shape_are_refused():
    for offsets in (["g", [0, 1, 2]],  # not 7 values a key
                    ["g", [5, 0, 1, "", None, 1, None]],  # topic index out of range
                    ["g"]):  # not pairs
        body = _native.encode_payload({"topics": ["t"], "offsets": offsets})
        with pytest.raises(ValueError):
            _native.decode_snapshot_body(body)
        with pytest.raises((ValueError, TypeError)):
            _native.offsets_from_flat(offsets, ["t"])


def test_a_snapshot_whose_offsets_are_a_msgpack_map_is_refused():
    from offsetlog.table.offset_table import OffsetTable

    state = OffsetTable().snapshot_state()
    # after topics, the native decoder reads offsets as the table and refuses a map at once
    state["offsets"] = {"g": {"t": [1, "", None, 2, None]}}
    with pytest.raises(ValueError, match="not an array"):
        _native.decode_snapshot_body(_native.encode_payload(state))
    # before topics, it is decoded as written, and the table refuses it (str keys, no tuples)
    state = {"offsets": state.pop("offsets"), **state}
    body = _native.decode_snapshot_body(_native.encode_payload(state))
    with pytest.raises(ValueError, match="offsets section is a map"):
        OffsetTable.from_snapshot_state(body)
