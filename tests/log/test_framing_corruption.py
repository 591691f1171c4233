"""Corruption and torn-tail handling of the batch framing, in memory (LevelDB's log_test.cc).

Vocabulary: ``write`` appends a batch, ``read`` reads the buffer back, ``increment_byte`` /
``set_byte`` / ``shrink_size`` / ``set_length`` damage it, ``fix_checksum`` makes a damaged
batch pass its CRC again, ``dropped_bytes`` and ``stop`` say what the reader skipped or where
it stopped. Each test names the condition and the outcome.

The rule under test (offsetlog.log.framing): a batch that fails its checks with nothing valid after
it is a *torn tail* (end of data, not an error); with a valid batch after it, it is
*corruption*, reported with its position, never silently skipped, unless salvage was asked for.
"""

from __future__ import annotations

import io
import itertools
import struct
import zlib

import pytest

from offsetlog.errors import CorruptLogError, UnsupportedVersionError
from offsetlog.log import records as rec
from offsetlog.log.format import CRC_START, HEADER_AFTER_LENGTH, HEADER_SIZE, MAGIC, Attribute
from offsetlog.log.framing import BatchReader, encode_batch, frame_payload, read_batches
from support.durability_helpers import Seeded

# Byte positions of header fields (offsetlog.log.format.BATCH_HEADER).
LENGTH_AT, HEADER_CRC_AT, CRC_AT, MAGIC_AT, ATTRIBUTES_AT, BASE_OFFSET_AT = 0, 4, 8, 12, 13, 14
LAST_DELTA_AT, RECORD_COUNT_AT = 22, 26


def norm(records) -> tuple:
    """Decoded records as tuples (the decoder may give lists; the content is what counts)."""
    return tuple(tuple(r) for r in records)


class Log:
    """An in-memory log plus the bookkeeping to say what reading it should give."""

    def __init__(self) -> None:
        self.buf = bytearray()
        self.spans: list[tuple[int, int]] = []  # (start, end) of each written batch
        self.batches: list[tuple] = []  # the records of each written batch
        self.next_offset = 0
        self.reader: BatchReader | None = None

    # -- writing and damaging ----------------------------------------------------------

    def write(self, n_records: int = 1, *, metadata: str = "", tag: int | None = None) -> int:
        """Append a batch of ``n_records`` offset commits; returns its index."""
        i = len(self.batches) if tag is None else tag
        records = tuple(
            rec.offset_commit(d, f"group-{i}", "topic", d, 1000 * i + d, metadata=metadata,
                              commit_timestamp=1_700_000_000_000 + i)
            for d in range(n_records))
        data = encode_batch(self.next_offset, records, timestamp=1_700_000_000_000 + i)
        self.spans.append((len(self.buf), len(self.buf) + len(data)))
        self.batches.append(records)
        self.buf += data
        self.next_offset += n_records
        return len(self.batches) - 1

    def copy(self) -> "Log":
        other = Log()
        other.buf, other.spans, other.batches = bytearray(self.buf), self.spans, self.batches
        other.next_offset = self.next_offset
        return other

    def start(self, i: int) -> int:
        return self.spans[i][0]

    def end(self, i: int) -> int:
        return self.spans[i][1]

    def increment_byte(self, position: int, delta: int = 1) -> None:
        self.buf[position] = (self.buf[position] + delta) & 0xFF

    def set_byte(self, position: int, value: int) -> None:
        self.buf[position] = value

    def xor_byte(self, position: int, mask: int) -> None:
        self.buf[position] ^= mask

    def shrink_size(self, n: int) -> None:
        del self.buf[len(self.buf) - n:]

    def set_length(self, i: int, length: int) -> None:
        struct.pack_into("<I", self.buf, self.start(i) + LENGTH_AT, length)

    def fix_checksum(self, i: int) -> None:
        """Recompute batch ``i``'s checksums (header: length + fields; payload, as its length
        says), so a damaged field passes them and only the semantic checks can catch it."""
        s = self.start(i)
        (length,) = struct.unpack_from("<I", self.buf, s)
        header_crc = zlib.crc32(bytes(self.buf[s + CRC_START:s + HEADER_SIZE]),
                                zlib.crc32(bytes(self.buf[s:s + 4])))
        struct.pack_into("<I", self.buf, s + HEADER_CRC_AT, header_crc)
        crc = zlib.crc32(bytes(self.buf[s + HEADER_SIZE:s + 4 + length]))
        struct.pack_into("<I", self.buf, s + CRC_AT, crc)

    # -- reading -----------------------------------------------------------------------

    def read(self, *, salvage: bool = False, upto: int | None = None,
             zero_tail: bool = True) -> list[tuple]:
        """The records of every batch the reader yields (of the first ``upto`` bytes)."""
        data = bytes(self.buf if upto is None else self.buf[:upto])
        self.reader = BatchReader(data, salvage=salvage, zero_tail=zero_tail)
        return [norm(b.records()) for b in self.reader]

    @property
    def stop(self):
        return self.reader.stop

    def dropped_bytes(self) -> int:
        return sum(p.dropped for p in self.reader.problems)

    def read_strict_file(self):
        """``read_batches`` over a file object: records, or the CorruptLogError raised."""
        try:
            f = io.BytesIO(bytes(self.buf))
            return [norm(b.records()) for b in read_batches(f, name="seg")]
        except CorruptLogError as e:
            return e


@pytest.fixture
def log():
    return Log()


def filled(n_batches: int = 5, rng: Seeded | None = None) -> Log:
    log = Log()
    for i in range(n_batches):
        log.write(1 + (i % 3 if rng is None else rng.randrange(4)))
    return log


# -- the happy path ---------------------------------------------------------------------

def test_empty_buffer_reads_nothing_and_is_clean(log):
    assert log.read() == []
    assert log.stop is None and log.reader.end == 0


def test_written_batches_read_back_in_order():
    rng = Seeded()
    log = filled(40, rng)
    assert log.read() == log.batches, rng.why()
    assert log.stop is None and log.reader.end == len(log.buf), rng.why()
    assert [b.position for b in BatchReader(bytes(log.buf))] == [s for s, _ in log.spans]


def test_batch_offsets_follow_record_counts(log):
    log.write(3)
    log.write(1)
    log.write(2)
    got = [(b.base_offset, b.last_offset, b.record_count) for b in BatchReader(bytes(log.buf))]
    assert got == [(0, 2, 3), (3, 3, 1), (4, 5, 2)]


# -- torn tails: the end of an interrupted write ------------------------------------------

@pytest.mark.parametrize("last_batches", [2, 3])
def test_truncated_trailing_batch_is_ignored_at_every_cut(last_batches):
    """Cut at EVERY byte of the last batches: each prefix reads exactly the complete batches."""
    log = filled(6)
    first = len(log.spans) - last_batches
    boundaries = {e: i + 1 for i, (_, e) in enumerate(log.spans)}
    for cut in range(log.start(first), len(log.buf) + 1):
        complete = [i for i, (_, e) in enumerate(log.spans) if e <= cut]
        got = log.read(upto=cut)
        assert got == [log.batches[i] for i in complete], f"cut at {cut}"
        if cut in boundaries:
            assert log.stop is None, f"cut at batch boundary {cut} is clean"
        else:
            torn_at = log.start(len(complete))
            assert log.stop is not None and log.stop.torn, f"cut at {cut} must be a torn tail"
            assert log.stop.position == torn_at == log.reader.end, f"cut at {cut}"
            assert log.stop.reason in ("truncated header", "truncated batch"), log.stop
        # The strict file reader agrees: a torn tail is end-of-file, not an error.
        f = io.BytesIO(bytes(log.buf[:cut]))
        assert [norm(b.records()) for b in read_batches(f)] == got, f"cut at {cut}"


def test_truncated_header_at_end_is_torn(log):
    log.write()
    log.write()
    log.shrink_size(log.end(1) - log.start(1) - (HEADER_SIZE - 1))
    assert log.read() == log.batches[:1]
    assert log.stop.torn and log.stop.reason == "truncated header"


def test_bad_length_at_end_is_torn(log):
    log.write()
    log.write()
    log.set_length(1, HEADER_AFTER_LENGTH - 1)  # shorter than a header
    assert log.read() == log.batches[:1]
    # the header checksum covers the length, so the damage is caught there
    assert log.stop.torn and log.stop.reason == "header checksum mismatch"
    assert log.stop.position == log.start(1)
    log.fix_checksum(1)  # a header that checks out but is impossible
    assert log.read() == log.batches[:1]
    assert log.stop.torn and log.stop.reason == "bad length"


def test_length_past_eof_at_end_is_torn(log):
    log.write()
    log.write()
    log.set_length(1, 10_000)
    assert log.read() == log.batches[:1]
    assert log.stop.torn and log.stop.reason == "header checksum mismatch"
    assert not isinstance(log.read_strict_file(), CorruptLogError)
    log.fix_checksum(1)  # an intact header whose batch runs past the end: a torn write
    assert log.read() == log.batches[:1]
    assert log.stop.torn and log.stop.reason == "truncated batch"
    assert not isinstance(log.read_strict_file(), CorruptLogError)


@pytest.mark.parametrize("n", [1, 10, HEADER_SIZE - 1, HEADER_SIZE, 100, 4096])
def test_trailing_zeros_after_last_batch_are_preallocated_space(log, n):
    """An active segment's reserve reads as zeros: the clean end of the data, not damage."""
    log.write()
    log.write(2)
    log.buf += bytes(n)
    assert log.read() == log.batches
    assert log.stop is None and log.reader.zero_tail == n
    assert log.reader.end == log.end(1)
    assert log.read_strict_file() == log.batches


@pytest.mark.parametrize("n", [1, HEADER_SIZE, 4096])
def test_trailing_zeros_in_a_closed_segment_are_torn(log, n):
    """Closed segments are cut to their last batch at the roll: zeros there are not a reserve."""
    log.write()
    log.write(2)
    log.buf += bytes(n)
    assert log.read(zero_tail=False) == log.batches
    assert log.stop.torn and log.stop.position == log.end(1), log.stop
    assert log.reader.zero_tail == 0


@pytest.mark.parametrize("junk", [b"\x01", b"\xa1" * 3, b"\x00\x00\x07"])
def test_zeros_with_anything_after_them_are_not_a_reserve(log, junk):
    """Only an all-zero remainder is a reserve; zeros followed by other bytes are a torn
    write (or corruption when a valid batch follows), exactly as without preallocation."""
    log.write()
    log.write(2)
    log.buf += bytes(100) + junk + bytes(50)
    assert log.read() == log.batches
    assert log.stop.torn and log.stop.position == log.end(1), log.stop
    assert log.reader.zero_tail == 0


def test_trailing_random_junk_is_torn():
    rng = Seeded()
    for _ in range(50):
        log = filled(3, rng)
        junk = bytearray(rng.randbytes(rng.randrange(1, 300)))
        if not any(junk):  # all zeros is the active segment's reserve, not junk (seed 2081)
            junk[-1] = rng.randrange(1, 256)
        log.buf += junk
        assert log.read() == log.batches, rng.why()
        assert log.stop.torn and log.stop.position == log.end(2), rng.why(str(log.stop))


@pytest.mark.parametrize("mask", [0x01, 0x80, 0xFF])
def test_flipped_header_byte_of_last_batch_is_torn(mask):
    for offset in range(HEADER_SIZE):
        log = filled(4)
        log.xor_byte(log.start(3) + offset, mask)
        assert log.read() == log.batches[:3], f"header byte {offset} ^ {mask:#x}"
        assert log.stop.torn and log.stop.position == log.start(3), (offset, log.stop)


def test_checksum_mismatch_at_end_is_torn(log):
    log.write()
    log.write(3)
    log.increment_byte(log.end(1) - 1)
    assert log.read() == log.batches[:1]
    assert log.stop.torn and log.stop.reason == "checksum mismatch"


# -- corruption: damage before the tail -------------------------------------------------

@pytest.mark.parametrize("mask", [0x01, 0x10, 0x80, 0xFF])
def test_flipped_header_byte_before_tail_is_corruption(mask):
    """Every byte of a middle batch's header: corruption at its position, no wrong record."""
    for offset in range(HEADER_SIZE):
        log = filled(5)
        bad = 2
        log.xor_byte(log.start(bad) + offset, mask)
        where = f"header byte {offset} ^ {mask:#x}"
        assert log.read() == log.batches[:bad], where
        assert log.stop is not None and not log.stop.torn, where
        assert log.stop.position == log.start(bad) == log.reader.end, where
        assert log.stop.resume == log.end(bad), where
        err = log.read_strict_file()
        assert isinstance(err, CorruptLogError), where
        assert (err.path, err.position) == ("seg", log.start(bad)), where
        # Salvage skips exactly the damaged batch and nothing else.
        assert log.read(salvage=True) == log.batches[:bad] + log.batches[bad + 1:], where
        assert log.dropped_bytes() == log.end(bad) - log.start(bad), where
        assert log.stop is None, where


def test_checksum_mismatch_before_tail_is_corruption():
    rng = Seeded()
    log0 = filled(4, rng)
    start, end = log0.start(1) + HEADER_SIZE, log0.end(1)
    for position in range(start, end):  # every payload byte of the second batch
        log = log0.copy()
        log.increment_byte(position, rng.randrange(1, 256))
        assert log.read() == log.batches[:1], rng.why(f"payload byte {position}")
        assert not log.stop.torn and log.stop.reason == "checksum mismatch", rng.why()
        assert log.stop.position == log.start(1), rng.why()


def test_bad_length_before_tail_past_eof_is_corruption_not_torn(log):
    """A middle batch whose length points past EOF: valid batches follow, so it is corruption."""
    for _ in range(4):
        log.write(2)
    log.set_length(1, len(log.buf) * 4)
    assert log.read() == log.batches[:1]
    assert not log.stop.torn and log.stop.reason == "header checksum mismatch"
    assert log.stop.position == log.start(1)
    err = log.read_strict_file()
    assert isinstance(err, CorruptLogError) and err.position == log.start(1)
    assert err.reason == "header checksum mismatch"


def test_absurd_length_before_tail_is_corruption(log):
    for _ in range(3):
        log.write()
    log.set_length(1, 0xFFFFFFFF)
    log.read()
    assert not log.stop.torn and log.stop.reason == "header checksum mismatch"


def test_zero_record_count_with_valid_checksum_is_corruption(log):
    for _ in range(3):
        log.write()
    struct.pack_into("<I", log.buf, log.start(1) + RECORD_COUNT_AT, 0)
    log.fix_checksum(1)
    assert log.read() == log.batches[:1]
    assert not log.stop.torn and log.stop.reason == "bad record count"


def test_offset_going_backwards_with_valid_checksum_is_corruption(log):
    for _ in range(4):
        log.write()
    struct.pack_into("<q", log.buf, log.start(2) + BASE_OFFSET_AT, 0)  # reuses offset 0
    log.fix_checksum(2)
    assert log.read() == log.batches[:2]
    assert not log.stop.torn and log.stop.reason == "offset out of order"
    assert log.stop.position == log.start(2)


def test_damage_in_first_batch_is_corruption(log):
    for _ in range(3):
        log.write()
    log.increment_byte(CRC_AT)
    assert log.read() == []
    assert not log.stop.torn and log.stop.position == 0


# -- salvage ------------------------------------------------------------------------------

def test_salvage_skips_exactly_the_bad_regions_and_reports_dropped_bytes():
    rng = Seeded()
    log = filled(8, rng)
    bad = sorted(rng.sample(range(1, 7), 2))
    for i in bad:
        position = rng.randrange(log.start(i) + CRC_START, log.end(i))
        log.increment_byte(position, rng.randrange(1, 256))
    # Adjacent bad batches make one bad region: the reader resyncs at the next good batch.
    regions = []
    for i in bad:
        if regions and regions[-1][1] == log.start(i):
            regions[-1][1] = log.end(i)
        else:
            regions.append([log.start(i), log.end(i)])
    got = log.read(salvage=True)
    assert got == [b for i, b in enumerate(log.batches) if i not in bad], rng.why(str(bad))
    assert [(p.position, p.dropped, p.torn) for p in log.reader.problems] == [
        (s, e - s, False) for s, e in regions], rng.why(str(bad))
    assert log.dropped_bytes() == sum(log.end(i) - log.start(i) for i in bad)
    reports = []
    f = io.BytesIO(bytes(log.buf))
    again = [norm(b.records())
             for b in read_batches(f, on_corruption=lambda *a: reports.append(a))]
    assert again == got
    assert [(pos, n) for pos, n, _ in reports] == [(s, e - s) for s, e in regions]
    assert all(reason in ("checksum mismatch", "header checksum mismatch")
               for _, _, reason in reports), reports


def test_salvage_of_adjacent_bad_batches_drops_both(log):
    for _ in range(5):
        log.write()
    log.increment_byte(log.start(1) + CRC_AT)
    log.increment_byte(log.start(2) + CRC_AT)
    assert log.read(salvage=True) == [log.batches[0]] + log.batches[3:]
    assert log.dropped_bytes() == log.end(2) - log.start(1)


def test_salvage_still_treats_a_torn_tail_as_end_of_data(log):
    for _ in range(3):
        log.write()
    log.shrink_size(5)
    assert log.read(salvage=True) == log.batches[:2]
    assert log.reader.problems == [] and log.stop.torn


def test_salvage_of_a_torn_tail_after_corruption(log):
    for _ in range(4):
        log.write()
    log.increment_byte(log.start(1) + CRC_AT)
    log.shrink_size(3)
    assert log.read(salvage=True) == [log.batches[0], log.batches[2]]
    assert [p.position for p in log.reader.problems] == [log.start(1)]
    assert log.stop.torn and log.stop.position == log.start(3)


# -- incremental reading (h11's one-byte-at-a-time test) ----------------------------------

def test_reader_fed_one_byte_at_a_time_yields_only_complete_batches():
    rng = Seeded()
    log = filled(12, rng)
    data = bytes(log.buf)
    seen = []
    pos, min_offset = 0, -1
    for k in range(len(data) + 1):
        # Every prefix: only batches that end within it, and a torn tail unless at a boundary.
        whole = BatchReader(data[:k])
        batches = list(whole)
        assert all(b.position + b.size <= k for b in batches), rng.why(f"prefix {k}")
        assert [norm(b.records()) for b in batches] == [
            log.batches[i] for i, (_, e) in enumerate(log.spans) if e <= k], rng.why(f"prefix {k}")
        at_boundary = k == 0 or any(e == k for _, e in log.spans)
        assert (whole.stop is None) == at_boundary, rng.why(f"prefix {k}: {whole.stop}")
        # Resuming where the previous prefix ended reads each batch exactly once.
        inc = BatchReader(data[:k], start=pos, min_offset=min_offset)
        for b in inc:
            seen.append(norm(b.records()))
        pos, min_offset = inc.end, inc.min_offset
    assert seen == log.batches, rng.why()


# -- newer formats fail loudly -----------------------------------------------------------

@pytest.mark.parametrize("which", [0, 1, 2])
def test_unsupported_magic_with_valid_checksum_raises(which):
    log = filled(3)
    log.set_byte(log.start(which) + MAGIC_AT, MAGIC + 1)
    log.fix_checksum(which)
    with pytest.raises(UnsupportedVersionError):
        log.read()
    with pytest.raises(UnsupportedVersionError):
        log.read(salvage=True)


@pytest.mark.parametrize("bit", [1 << i for i in range(8) if not (1 << i) & Attribute.KNOWN])
def test_unknown_attribute_bits_with_valid_checksum_raise(bit):
    log = filled(3)
    log.set_byte(log.start(1) + ATTRIBUTES_AT, bit)
    log.fix_checksum(1)
    with pytest.raises(UnsupportedVersionError):
        log.read()


def test_known_attribute_bits_are_read(log):
    log.write()
    log.set_byte(ATTRIBUTES_AT, 0x01)
    log.fix_checksum(0)
    batches = list(BatchReader(bytes(log.buf)))
    assert len(batches) == 1 and batches[0].attributes == 0x01


def test_unsupported_magic_without_valid_checksum_is_plain_corruption(log):
    for _ in range(3):
        log.write()
    log.set_byte(log.start(1) + MAGIC_AT, MAGIC + 1)  # CRC not fixed: damage, not a new format
    assert log.read() == log.batches[:1]
    assert not log.stop.torn and log.stop.reason == "header checksum mismatch"


# -- resynchronisation must not be fooled by payload bytes -------------------------------

def _utf8_embedded_batch(base_offset: int) -> str:
    """A valid framed batch whose bytes are also valid UTF-8: user metadata can hold it."""
    for i in itertools.count():
        # Vary a header field too (ASCII digits, so it stays valid UTF-8): the header checksum
        # must change between attempts, or one bad value would repeat forever.
        timestamp = int.from_bytes(b"%08d" % (i % 10 ** 8), "little")
        data = frame_payload(base_offset, b"p%08d" % i, record_count=1, last_offset_delta=0,
                             timestamp=timestamp, producer_id=0, producer_epoch=0)
        try:
            return data.decode("utf-8")
        except UnicodeDecodeError:
            continue


def test_torn_tail_whose_payload_holds_a_valid_batch_is_still_torn(log):
    log.write()
    # Two records carry the metadata, so cutting the batch's last bytes leaves one copy whole.
    log.write(2, metadata=_utf8_embedded_batch(log.next_offset))
    records = log.batches[1]
    assert records[0][4][2].encode() in bytes(log.buf)  # metadata
    log.shrink_size(2)
    assert log.read() == log.batches[:1]
    assert log.stop.torn, f"a cut last batch must be a torn tail, got {log.stop}"
