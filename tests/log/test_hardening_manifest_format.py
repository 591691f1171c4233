"""docs/FORMAT.md's MANIFEST example is what ``manifest.encode`` writes, byte for byte, and
the decoder refuses every single flipped bit."""

import os
import re

import pytest

from offsetlog.errors import CorruptLogError
from offsetlog.log import manifest

DOC = os.path.join(os.path.dirname(__file__), "..", "..", "docs", "FORMAT.md")


def documented_example() -> bytes:
    text = open(DOC, encoding="utf-8").read()
    block = text.split("## MANIFEST", 1)[1].split("Worked example", 1)[1].split("```", 2)[1]
    out = []
    for line in block.strip().splitlines():
        for h in line.split():  # the leading hex bytes; then the comment
            if not re.fullmatch(r"[0-9a-f]{2}", h):
                break
            out.append(h)
    return bytes(int(h, 16) for h in out)


def test_the_documented_manifest_is_what_the_encoder_writes():
    entries = {7: [(0, 1024), (18, 128)]}
    assert manifest.encode(entries) == documented_example()
    assert manifest.decode(documented_example(), "M") == entries


def test_every_flipped_bit_of_a_manifest_is_refused():
    data = manifest.encode({0: [(0, 10), (5, 3)], 4: [(0, 0)]})
    for i in range(len(data) * 8):
        damaged = bytearray(data)
        damaged[i // 8] ^= 1 << (i % 8)
        with pytest.raises(CorruptLogError):
            manifest.decode(bytes(damaged), "M")
