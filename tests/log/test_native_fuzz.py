"""A short libFuzzer run of each fuzz target of the native core (``native/fuzz``, cargo fuzz):
segments as damaged as libFuzzer can make them, payloads of any bytes, request frames of
any bytes for the wire server's native codec (OffsetCommit, TxnOffsetCommit, OffsetFetch,
Heartbeat), and write-ahead files of any bytes must never panic or abort.
A target that crashes fails the test with libFuzzer's report (the input is kept under
``native/fuzz/artifacts``). Long runs are made by hand: docs/DESIGN.md, "Python and Rust".

The run starts from a corpus of real batches (the engine's own framing of every record type)
or of real requests (kio's encoding of each hot message), so the fuzzer begins inside the
format rather than at random bytes.
"""

from __future__ import annotations

import os
import shutil
import subprocess
from pathlib import Path

import pytest

from offsetlog.log.framing import encode_batch, encode_payload
from offsetlog.log.records import offset_commit

FUZZ = Path(__file__).resolve().parents[2] / "native" / "fuzz"
#: seconds per target inside the suite
SECONDS = int(os.environ.get("OFFSETLOG_FUZZ_SECONDS", "20"))


def _cargo_fuzz() -> tuple[list[str], dict]:
    """The command that runs cargo fuzz, and its environment. cargo fuzz needs a nightly
    compiler's flags: the nightly toolchain where rustup has one, else the stable compiler
    told to accept them (RUSTC_BOOTSTRAP)."""
    cargo = shutil.which("cargo") or os.path.expanduser("~/.cargo/bin/cargo")
    env = dict(os.environ)
    if not os.path.exists(cargo):
        _missing("cargo")
    probe = subprocess.run([cargo, "fuzz", "--version"], capture_output=True, text=True)
    if probe.returncode != 0:
        _missing("cargo-fuzz (cargo install cargo-fuzz; make test installs it)")
    toolchains = subprocess.run(["rustup", "toolchain", "list"], capture_output=True,
                                text=True).stdout if shutil.which("rustup") else ""
    if "nightly" in toolchains:
        return [cargo, "+nightly", "fuzz"], env
    env["RUSTC_BOOTSTRAP"] = "1"
    return [cargo, "fuzz"], env


def _missing(what: str) -> None:
    if os.environ.get("CI") == "true":
        pytest.fail(f"{what} is missing: the native core's fuzz run cannot be made")
    pytest.skip(f"{what} is missing")


def _seeds(corpus: Path, target: str) -> None:
    corpus.mkdir(parents=True, exist_ok=True)
    records = [offset_commit(0, "group", "orders", 3, 42, commit_timestamp=1_700_000_000_000),
               offset_commit(1, "g", "t", 0, 7, metadata="m", leader_epoch=5,
                             commit_timestamp=1)]
    tombstone = [(0, 1, 1, ["group", "orders", 3], None)]
    other = [(0, 2, 0, {"group": "g"}, {"generation": 3, "members": [b"\x00\x01"]})]
    marker = [(0, 3, 0, {"producer_id": 3}, {"producer_epoch": 1, "result": "commit"})]
    if target == "wire":
        seeds = [frame[4:] for frame in _requests()]
    elif target == "write_ahead":
        from support import write_ahead_ref as ref

        batch = encode_batch(0, records, timestamp=1)
        seeds = [ref.marker(1) + ref.entry(1, 3, 0, 0, batch) + ref.entry(1, 0, 7, 4096, batch),
                 ref.marker(9) + ref.entry(9, 1, 0, 61, batch) + ref.entry(8, 1, 0, 0, batch),
                 ref.marker(2) + bytes(64)]
    elif target == "segment":
        seeds = [encode_batch(0, records, timestamp=1) + encode_batch(2, tombstone, timestamp=2),
                 encode_batch(5, other, timestamp=3) + b"\x00" * 64,
                 encode_batch(9, marker, timestamp=4, attributes=3, producer_id=3,
                              producer_epoch=1)]
    else:
        seeds = [encode_payload(r) for r in (records, tombstone, other, marker)]
    for i, seed in enumerate(seeds):
        (corpus / f"seed-{i}").write_bytes(seed)


def _requests() -> list[bytes]:
    """Frames of the hot messages at their oldest and newest versions (kio encodes them)."""
    from support.wire_raw import frame

    commit = dict(name="orders", partitions=[dict(
        partition_index=0, committed_offset=5, committed_leader_epoch=3,
        committed_metadata="md")])
    return [
        frame(8, 2, 1, group_id="g", generation_id_or_member_epoch=1, member_id="m",
              retention_time_ms=-1, topics=[commit]),
        frame(8, 9, 1, group_id="g", generation_id_or_member_epoch=1, member_id="m",
              group_instance_id="i", topics=[commit]),
        frame(28, 0, 1, transactional_id="t", group_id="g", producer_id=5, producer_epoch=1,
              topics=[commit]),
        frame(28, 4, 1, transactional_id="t", group_id="g", producer_id=5, producer_epoch=1,
              generation_id=2, member_id="m", group_instance_id=None, topics=[commit]),
        frame(9, 1, 1, group_id="g", topics=[dict(name="o", partition_indexes=[0, 1])]),
        frame(9, 9, 1, groups=[dict(group_id="g", member_id="m", member_epoch=3,
                                    topics=None)], require_stable=True),
        frame(12, 0, 1, group_id="g", generation_id=2, member_id="m"),
        frame(12, 4, 1, group_id="g", generation_id=2, member_id="m", group_instance_id="i"),
    ]


@pytest.mark.slow
@pytest.mark.parametrize("target", ["segment", "payload", "wire", "write_ahead"])
def test_a_short_fuzz_run_finds_no_crash(target, tmp_path):
    command, env = _cargo_fuzz()
    corpus = tmp_path / "corpus"
    _seeds(corpus, target)
    run = subprocess.run(
        command + ["run", "--sanitizer", "none", target, str(corpus), "--",
                   f"-max_total_time={SECONDS}", "-max_len=4096", "-print_final_stats=1"],
        cwd=FUZZ, env=env, capture_output=True, text=True, timeout=SECONDS + 900)
    report = run.stderr[-4000:]
    assert run.returncode == 0, report
    # it ran: libFuzzer's final statistics name the runs it made
    runs = [line for line in run.stderr.splitlines() if line.startswith("stat::number_of_executed_units")]
    assert runs and int(runs[-1].split(":")[-1]) > 1000, report
