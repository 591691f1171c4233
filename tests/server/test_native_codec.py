"""The native codec's decoders (the `kafka-protocol` crate, native/src/wire_codec/) of
OffsetCommit and Heartbeat against kio's, an independent decoder of the same schemas: the same
fields for every version and every request hypothesis makes, and for mutated and truncated
frames either the same fields or a refusal that sends the frame to the Python path (which
then closes the connection as for any bad frame). And against a live server: bad
OffsetCommit frames close only their own connection, a frame that claims billions of topics
included (the crate sizes vectors from claimed counts; native/src/huge_alloc.rs)."""

from __future__ import annotations

import socket
import struct

import pytest
from hypothesis import HealthCheck, given, reject, settings
from hypothesis import strategies as st
from kio.index import load_request_schema
from kio.serial import entity_reader

from offsetlog.log import _native
from offsetlog.server.codec import read_header
from offsetlog.server.offsets import _kio_retention, topic_fields
from support.wire_raw import call, frame
from support.wire_server import raw_socket

names = st.text(st.characters(codec="utf-8", exclude_categories=("Cs",)), max_size=12)
partitions = st.tuples(st.integers(0, 2**31 - 1), st.integers(-2**63, 2**63 - 1),
                       st.integers(-1, 2**31 - 1), st.none() | names)
topics = st.lists(st.tuples(names, st.lists(partitions, max_size=4)), max_size=4)


def _request(version, group, generation, member, instance, topic_list, correlation_id=5,
             retention=-1):
    body = dict(group_id=group, generation_id_or_member_epoch=generation, member_id=member,
                topics=[dict(name=n, partitions=[dict(
                    partition_index=p, committed_offset=o,
                    committed_leader_epoch=e if version >= 6 else -1,
                    committed_metadata=m) for p, o, e, m in parts])
                    for n, parts in topic_list])
    if version >= 7:
        body["group_instance_id"] = instance
    if 2 <= version <= 4:
        body["retention_time"] = retention  # (kio's name for retention_time_ms)
    return frame(8, version, correlation_id, **body)[4:]


class KioCannotTell(Exception):
    """kio reads ``retention_time_ms`` (versions 2-4) as a ``timedelta``, which cannot hold
    every int64 Kafka accepts there (the native decoder reads them all:
    ``test_any_retention_time_is_read``), and a boolean only as 0 or 1: such a frame says
    nothing about the two."""


def _kio_fields(data: bytes):
    """kio's reading of an OffsetCommit frame, as the native decoder gives it; None if kio
    refuses it."""
    version = struct.unpack(">h", data[2:4])[0]
    try:
        schema = load_request_schema(8, version)
        header = read_header(data, flexible=version >= 8)
        body, size = entity_reader(schema)(data, header.body_at)
    except ValueError as e:
        if "timedelta" in str(e):
            raise KioCannotTell from e
        return None
    except Exception:
        return None
    if header.body_at + size != len(data):
        return None  # bytes after the body: the native decoder refuses those too
    return (header.correlation_id, header.client_id, version, body.group_id,
            int(body.generation_id_or_member_epoch), body.member_id,
            getattr(body, "group_instance_id", None),
            [(n, [tuple(p) for p in parts]) for n, parts in topic_fields(body.topics)],
            _kio_retention(body))


#: the retention times kio can write and read (a ``timedelta`` of milliseconds)
retentions = st.just(-1) | st.integers(-2**46, 2**46)


@settings(max_examples=300, suppress_health_check=[HealthCheck.too_slow])
@given(st.integers(2, 9), names, st.integers(-2**31, 2**31 - 1), names, st.none() | names,
       topics, retentions)
def test_native_and_kio_decode_every_request_alike(version, group, generation, member,
                                                   instance, topic_list, retention):
    data = _request(version, group, generation, member, instance, topic_list,
                    retention=retention)
    native = _native.decode_offset_commit(data)
    assert native is not None
    assert _commit_normal(native) == _kio_fields(data)


def _normal(fields):
    """A commit's fields with its topics' partitions as tuples (lists and tuples alike)."""
    if fields is None:
        return None
    *head, ts = fields
    return (*head, [(n, [tuple(p) for p in parts]) for n, parts in ts])


def _commit_normal(fields):
    """``_normal`` of an OffsetCommit's fields, which end in ``retention_time_ms``."""
    if fields is None:
        return None
    *rest, retention = fields
    return (*_normal(rest), retention)


@settings(max_examples=500, suppress_health_check=[HealthCheck.too_slow])
@given(st.integers(2, 9), topics, st.data())
def test_mutated_frames_decode_alike_or_go_to_python(version, topic_list, data):
    whole = _request(version, "group", 1, "member", None, topic_list)
    _decoded_alike_when_mutated(whole, data, _native.decode_offset_commit, _kio_fields,
                               _commit_normal)


def _decoded_alike_when_mutated(whole: bytes, data, native_decode, kio_decode,
                                normal=lambda fields: fields) -> None:
    """Flip one to four bytes of ``whole`` (never its key and version) and cut it short:
    what the native decoder takes, kio reads the same way."""
    mutated = bytearray(whole)
    for _ in range(data.draw(st.integers(1, 4))):
        at = data.draw(st.integers(4, len(mutated) - 1))
        mutated[at] = data.draw(st.integers(0, 255))
    mutated = bytes(mutated[:data.draw(st.integers(4, len(mutated)))])
    native = native_decode(mutated)
    if native is not None:
        try:
            theirs = kio_decode(mutated)
        except KioCannotTell:
            reject()
        assert normal(native) == normal(theirs)


@pytest.mark.parametrize("version", [2, 3, 4])
@pytest.mark.parametrize("retention", [0, 2**56 - 1, 2**63 - 1, -2**63])
def test_any_retention_time_is_read(version, retention):
    """Versions 2-4 carry ``retention_time_ms``, an int64 Kafka accepts whatever its value
    (kio cannot read the largest: ``KioCannotTell``): the native decoder gives it last."""
    good = _request(version, "group", 1, "member", None, [("orders", [(0, 1, -1, None)])])
    at = good.index(b"member") + len("member")
    assert good[at:at + 8] == b"\xff" * 8  # the -1 the request was framed with
    other = good[:at] + struct.pack(">q", retention) + good[at + 8:]
    *fields, minus_one = _native.decode_offset_commit(good)
    assert minus_one == -1
    assert _native.decode_offset_commit(other) == (*fields, retention)


def test_frames_of_other_apis_and_versions_go_to_python():
    good = _request(8, "g", 1, "m", None, [("orders", [(0, 1, -1, None)])])
    assert _native.decode_offset_commit(good) is not None
    assert _native.decode_offset_commit(good + b"\0") is None  # trailing bytes
    assert _native.decode_offset_commit(b"\x00\x09" + good[2:]) is None  # OffsetFetch's key
    assert _native.decode_offset_commit(good[:2] + b"\x00\x01" + good[4:]) is None  # v1


def _huge_claim(version: int) -> bytes:
    """An OffsetCommit frame whose topic array claims 2^31 - 1 topics (v2-7: an int32
    count) or 2^32 - 2 (v8+: a compact unsigned varint), with none behind the claim."""
    data = _request(version, "g", 1, "m", None, [])
    # the empty topic array is the body's last field before v8 (4 bytes: 0), and before
    # the body's tagged fields (one byte: 0) from v8 on (its compact count is 1: empty)
    if version < 8:
        assert data.endswith(b"\0\0\0\0")
        return data[:-4] + struct.pack(">i", 2**31 - 1)
    assert data.endswith(b"\x01\x00")
    return data[:-2] + bytes([0xff, 0xff, 0xff, 0xff, 0x0f]) + b"\x00"


@pytest.mark.parametrize("version", [2, 7, 8, 9])
def test_a_frame_claiming_billions_of_topics_is_refused_not_fatal(version):
    assert _native.wire_decode_safe()
    assert _native.decode_offset_commit(_huge_claim(version)) is None


def test_bad_offset_commit_frames_close_only_their_connection(server):
    with raw_socket(server) as good:
        assert call(good, 8, 8, group_id="g", generation_id_or_member_epoch=-1,
                    member_id="", group_instance_id=None, topics=[dict(
                        name="orders", partitions=[dict(
                            partition_index=0, committed_offset=1, committed_leader_epoch=-1,
                            committed_metadata="")])]).topics[0].partitions[0].error_code == 0
        bad_frames = [_huge_claim(v) for v in (2, 8, 9)] + [
            _request(8, "g", 1, "m", None, [("orders", [(0, 1, -1, None)])])[:-3]]
        for bad in bad_frames:
            with raw_socket(server) as sock:
                sock.sendall(struct.pack(">i", len(bad)) + bad)
                sock.settimeout(10)
                assert _closed(sock)
        # the first connection, and the server, go on
        r = call(good, 8, 8, group_id="g", generation_id_or_member_epoch=-1, member_id="",
                 group_instance_id=None, topics=[dict(name="orders", partitions=[dict(
                     partition_index=0, committed_offset=2, committed_leader_epoch=-1,
                     committed_metadata="")])])
        assert r.topics[0].partitions[0].error_code == 0


def _closed(sock: socket.socket) -> bool:
    try:
        return sock.recv(1) == b""
    except ConnectionResetError:
        return True


@settings(max_examples=200, suppress_health_check=[HealthCheck.too_slow])
@given(st.integers(0, 4), names, st.integers(-2**31, 2**31 - 1), names, st.none() | names,
       st.data())
def test_native_and_kio_decode_heartbeats_alike(version, group, generation, member, instance,
                                                data):
    body = dict(group_id=group, generation_id=generation, member_id=member)
    if version >= 3:
        body["group_instance_id"] = instance
    whole = frame(12, version, 9, **body)[4:]
    assert _native.decode_heartbeat(whole) == _kio_heartbeat(whole)
    _decoded_alike_when_mutated(whole, data, _native.decode_heartbeat, _kio_heartbeat)


def _kio_heartbeat(data: bytes):
    version = struct.unpack(">h", data[2:4])[0]
    try:
        header = read_header(data, flexible=version >= 4)
        body, size = entity_reader(load_request_schema(12, version))(data, header.body_at)
    except Exception:
        return None
    if header.body_at + size != len(data):
        return None
    return (header.correlation_id, header.client_id, version, body.group_id,
            int(body.generation_id), body.member_id, getattr(body, "group_instance_id", None))


@settings(max_examples=200, suppress_health_check=[HealthCheck.too_slow])
@given(st.integers(0, 4), names, names, st.integers(-1, 2**63 - 1), st.integers(-1, 2**15 - 1),
       topics, st.data())
def test_native_and_kio_decode_txn_offset_commits_alike(version, tid, group, pid, epoch,
                                                        topic_list, data):
    body = dict(transactional_id=tid, group_id=group, producer_id=pid, producer_epoch=epoch,
                topics=[dict(name=n, partitions=[dict(
                    partition_index=p, committed_offset=o,
                    committed_leader_epoch=e if version >= 2 else -1,
                    committed_metadata=m) for p, o, e, m in parts])
                    for n, parts in topic_list])
    if version >= 3:
        body.update(generation_id=4, member_id="m", group_instance_id=None)
    whole = frame(28, version, 9, **body)[4:]
    assert _normal(_native.decode_txn_offset_commit(whole)) == _kio_txn(whole)
    _decoded_alike_when_mutated(whole, data, _native.decode_txn_offset_commit, _kio_txn,
                                _normal)


def _kio_txn(data: bytes):
    version = struct.unpack(">h", data[2:4])[0]
    try:
        header = read_header(data, flexible=version >= 3)
        body, size = entity_reader(load_request_schema(28, version))(data, header.body_at)
    except Exception:
        return None
    if header.body_at + size != len(data):
        return None
    return (header.correlation_id, header.client_id, version, body.transactional_id,
            body.group_id, int(body.producer_id), int(body.producer_epoch),
            int(getattr(body, "generation_id", -1)), getattr(body, "member_id", ""),
            getattr(body, "group_instance_id", None),
            [(n, [tuple(p) for p in parts]) for n, parts in topic_fields(body.topics)])


@settings(max_examples=200, suppress_health_check=[HealthCheck.too_slow])
@given(st.integers(1, 9), st.lists(st.tuples(names, st.none() | names,
                                            st.none() | st.lists(st.tuples(
                                                names, st.lists(st.integers(0, 2**31 - 1),
                                                                max_size=3)), max_size=3)),
                                  min_size=1, max_size=3),
       st.booleans(), st.data())
def test_native_and_kio_decode_offset_fetches_alike(version, groups, stable, data):
    if version < 8:
        group, _, topic_list = groups[0]
        body = dict(group_id=group, topics=None if topic_list is None else [
            dict(name=n, partition_indexes=ps) for n, ps in topic_list])
        if version < 2:  # no "every partition" before v2
            body["topics"] = body["topics"] or []
    else:
        body = dict(groups=[dict(group_id=g, topics=None if ts is None else [
            dict(name=n, partition_indexes=ps) for n, ps in ts],
            **(dict(member_id=m, member_epoch=3) if version >= 9 else {}))
            for g, m, ts in groups])
    if version >= 7:
        body["require_stable"] = stable
    whole = frame(9, version, 9, **body)[4:]
    assert _native.decode_offset_fetch(whole) == _kio_fetch(whole)
    _decoded_alike_when_mutated(whole, data, _native.decode_offset_fetch, _kio_fetch)


def _kio_fetch(data: bytes):
    version = struct.unpack(">h", data[2:4])[0]
    try:
        header = read_header(data, flexible=version >= 6)
        body, size = entity_reader(load_request_schema(9, version))(data, header.body_at)
    except ValueError as e:
        if "boolean" in str(e):
            # kio takes only 0 and 1 for ``require_stable``; Kafka's reader (and the crate)
            # any byte, non-zero being true: such a frame says nothing about the two
            raise KioCannotTell from e
        return None
    except Exception:
        return None
    if header.body_at + size != len(data):
        return None

    def topics(ts):
        return None if ts is None else [(t.name, list(t.partition_indexes)) for t in ts]
    if version >= 8:
        groups = [(g.group_id, getattr(g, "member_id", None),
                   int(getattr(g, "member_epoch", -1)), topics(g.topics)) for g in body.groups]
    else:
        groups = [(body.group_id, None, -1, topics(body.topics))]
    return (header.correlation_id, header.client_id, version,
            bool(getattr(body, "require_stable", False)), groups)
