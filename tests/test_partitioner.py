import shutil
import subprocess

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from offsetlog.partitioner import java_string_hashcode, kafka_abs, partition_for

# Values from the issue, computed by Kafka's own formula on a JVM.
KNOWN = [("my-group", 12), ("analytics", 10), ("spark-kafka-source", 12),
         ("polygenelubricants", 0), ("", 0), ("g😀", 32)]


@pytest.mark.parametrize("group,expected", KNOWN)
def test_known_placements(group, expected):
    assert partition_for(group, 50) == expected


def test_min_value_hash_maps_to_partition_zero():
    assert java_string_hashcode("polygenelubricants") == -(1 << 31)
    assert kafka_abs(-(1 << 31)) == 0
    assert kafka_abs(-5) == 5


def test_non_bmp_character_counts_as_two_utf16_units():
    # "😀" is U+1F600 = surrogates D83D DE00: hash = 31*0xD83D + 0xDE00
    assert java_string_hashcode("😀") == 31 * 0xD83D + 0xDE00


def test_rejects_bad_arguments():
    with pytest.raises(TypeError):
        partition_for(b"g")
    with pytest.raises(ValueError):
        partition_for("g", 0)


JAVA_SOURCE = r"""
import java.nio.file.*;
import java.nio.charset.StandardCharsets;
public class Hash {
    public static void main(String[] a) throws Exception {
        int n = Integer.parseInt(a[1]);
        StringBuilder out = new StringBuilder();
        for (String line : Files.readAllLines(Paths.get(a[0]), StandardCharsets.UTF_8)) {
            String g = line.replace("\\n", "\n").replace("\\\\", "\\");
            int h = g.hashCode();
            int abs = h == Integer.MIN_VALUE ? 0 : Math.abs(h);  // Kafka's Utils.abs
            out.append(h).append(' ').append(abs % n).append('\n');
        }
        System.out.print(out);
    }
}
"""


@pytest.mark.skipif(shutil.which("java") is None, reason="no java on PATH")
def test_matches_a_real_jvm(tmp_path, seeded_random):
    rng = seeded_random
    alphabet = "abcXYZ09-_.é中😀\U0010FFFF"
    groups = [g for g, _ in KNOWN] + ["".join(rng.choice(alphabet)
                                              for _ in range(rng.randrange(0, 40)))
                                      for _ in range(300)]
    escaped = [g.replace("\\", "\\\\").replace("\n", "\\n") for g in groups]
    (tmp_path / "groups.txt").write_text("\n".join(escaped) + "\n", encoding="utf-8")
    (tmp_path / "Hash.java").write_text(JAVA_SOURCE)
    for n in (50, 7, 1):
        out = subprocess.run(["java", str(tmp_path / "Hash.java"), str(tmp_path / "groups.txt"),
                              str(n)], capture_output=True, text=True, check=True, timeout=120)
        lines = out.stdout.split("\n")[:len(groups)]
        for g, line in zip(groups, lines):
            h, p = map(int, line.split())
            assert java_string_hashcode(g) == h, (g, n)
            assert partition_for(g, n) == p, (g, n)


@settings(max_examples=300)
@given(st.text(), st.integers(1, 1000))
def test_partition_is_in_range_and_stable(group, n):
    p = partition_for(group, n)
    assert 0 <= p < n
    assert p == partition_for(group, n)
