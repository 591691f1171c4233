"""docs/FORMAT.md's worked example is what the encoder writes, byte for byte."""

import os
import struct

from offsetlog.log import recovery_points
from offsetlog.log.format import HEADER_SIZE, MAGIC, RecordType
from offsetlog.log.framing import BatchReader, encode_batch
from offsetlog.log.records import offset_commit

DOC = os.path.join(os.path.dirname(__file__), "..", "..", "docs", "FORMAT.md")


def documented_example() -> bytes:
    text = open(DOC, encoding="utf-8").read()
    block = text.split("## Worked example", 1)[1].split("```", 2)[1]
    hexes = []
    for line in block.strip().splitlines():
        hexes += line.split()[1:]
    return bytes(int(h, 16) for h in hexes)


def test_worked_example_matches_the_encoder():
    record = offset_commit(0, "my-group", "orders", 0, 42, commit_timestamp=1_700_000_000_000)
    assert encode_batch(7, (record,), timestamp=1_700_000_000_000) == documented_example()


def test_worked_example_decodes():
    (batch,) = list(BatchReader(documented_example()))
    assert (batch.base_offset, batch.record_count, batch.timestamp) == (7, 1, 1_700_000_000_000)
    assert batch.records() == [[0, RecordType.OFFSET_COMMIT, 1, ["my-group", "orders", 0],
                                 [42, 1_700_000_000_000]]]


def test_header_constants_match_the_doc():
    assert HEADER_SIZE == 48 == struct.calcsize("<IIIBBqIIqqh") and MAGIC == 0xA1
    assert RecordType.RESERVED == 0


def test_recovery_points_example_is_what_the_store_writes():
    text = open(DOC, encoding="utf-8").read()
    block = text.split("## RECOVERY-POINTS", 1)[1].split("```", 2)[1]
    documented = bytes(int(h, 16) for line in block.strip().splitlines()
                       for h in line.split("  ")[0].split())
    assert recovery_points.encode({7: 18, 2: 5}) == documented
    assert recovery_points.decode(documented, "doc") == {2: 5, 7: 18}
