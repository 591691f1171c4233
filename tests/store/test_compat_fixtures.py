"""Compatibility of stores across engines (issue 25, item 4).

* Old stores, new engine: every store under tests/fixtures/stores/ was written by the engine of
  commit 7e4d167 (the last pure-Python one), and its ``expected.json`` holds what that engine
  read back from it (tests/fixtures/make_compat_stores.py). The engine of this checkout must
  read each one (a copy: opening may repair it) exactly so: the read-only CLI views
  (``verify``, ``dump``, ``groups``, ``describe``, ``transactions``), the recovery report, and
  through the API every group, offset, group state, transaction and topic.
* The fixtures against the reference reader of docs/FORMAT.md (tests/support/format_oracle.py):
  its batches and records are the ones the old engine dumped, and its torn tails the ones the
  old engine's recovery cut.
* New stores, reference reader: a store this checkout writes with the default options reads
  back, through the reference reader, as ``offsetlog dump`` shows it and as the store itself
  answers (offsets replayed from the oracle's records by FORMAT.md's rules).
* New stores, old engine: the same store, opened by the engine of 7e4d167 (taken from git
  history into a temporary directory, run in a subprocess) reads exactly as this checkout reads
  it. Skipped where git or that commit is not at hand.
"""

from __future__ import annotations

import importlib.util
import json
import os
import subprocess
import sys
import tarfile
from pathlib import Path

import pytest

from offsetlog import OffsetAndMetadata as OAM
from offsetlog import OffsetStore
from offsetlog import TopicPartition as TP
from support import format_oracle as oracle
from support.groups import form_group
from support.stores import ManualClock, counted_group_config

FIXTURES = Path(__file__).resolve().parents[1] / "fixtures"
STORES = FIXTURES / "stores"
NAMES = sorted(p.name for p in STORES.iterdir() if (p / "expected.json").is_file())


def _load_maker():
    spec = importlib.util.spec_from_file_location("make_compat_stores",
                                                  FIXTURES / "make_compat_stores.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


maker = _load_maker()


def test_every_fixture_is_here():
    assert set(NAMES) == set(maker.FIXTURES), "a fixture without its expected.json, or one more"


def expected_of(name: str) -> dict:
    with open(STORES / name / "expected.json") as f:
        return json.load(f)


def copy_of(name: str, tmp_path) -> str:
    return maker.copy_fixture(str(STORES / name / "store"), str(tmp_path / "store"))


def fixture_files(name: str) -> dict[str, bytes]:
    root = STORES / name / "store"
    return {str(p.relative_to(root)): p.read_bytes() for p in sorted(root.rglob("*"))
            if p.is_file()}


# -- old stores, this engine ----------------------------------------------------------------

@pytest.fixture(scope="module", params=NAMES)
def fixture_read(request, tmp_path_factory):
    """(name, expected.json, what this checkout reads from a copy of the fixture)."""
    name = request.param
    expected = expected_of(name)
    before = fixture_files(name)
    root = copy_of(name, tmp_path_factory.mktemp(name))
    got = maker.read_everything(root, expected["options"], expected["clock_ms"])
    assert fixture_files(name) == before, "the fixture itself changed"
    return name, expected, got, root


@pytest.mark.parametrize("command", list(maker.CLI_COMMANDS))
def test_the_cli_reads_an_old_store_as_the_old_engine_did(fixture_read, command):
    _, expected, got, _ = fixture_read
    assert got["cli"][command]["exit"] == expected["cli"][command]["exit"]
    assert got["cli"][command]["output"] == expected["cli"][command]["output"]


def test_recovery_reports_what_it_did_on_the_old_engine(fixture_read):
    _, expected, got, _ = fixture_read
    assert got["recovery_report"] == expected["recovery_report"]


@pytest.mark.parametrize("view", ["groups", "fetch", "unstable", "describe_group",
                                  "list_groups", "partition_of", "transaction_states", "topics"])
def test_the_store_answers_as_it_did_on_the_old_engine(fixture_read, view):
    _, expected, got, _ = fixture_read
    assert set(got["store"]) == set(expected["store"])
    assert got["store"][view] == expected["store"][view]


def test_an_old_store_once_opened_reopens_clean_and_the_same(fixture_read):
    """The first open repaired the copy (torn tails cut, MANIFEST written): a second one finds
    nothing to repair and loads the same state."""
    _, expected, _, root = fixture_read
    with maker.open_for_reading(root, expected["options"], expected["clock_ms"]) as s:
        report = maker.recovery_report(s.recovery_report, root)
        view = maker.store_view(s)
    assert report["clean"] and not any(p["truncated"] or p["preallocated"]
                                       for p in report["partitions"].values())
    assert view == expected["store"]
    verify = maker.run_cli(["verify", "--json"], root)
    assert verify["exit"] == 0 and verify["output"]["torn_tails"] == []


# -- the fixtures against the reference reader -----------------------------------------------

def _hex(v):
    if isinstance(v, (bytes, bytearray)):
        return bytes(v).hex()
    if isinstance(v, list):
        return [_hex(x) for x in v]
    if isinstance(v, dict):
        return {k: _hex(x) for k, x in v.items()}
    return v


def _record_view(rtype: str, version: int, key, value):
    """A record's key and value as ``offsetlog dump --json`` shows them, from the oracle's
    decoding: OFFSET_COMMIT by name with defaults, bytes as hex; of a GROUP_METADATA value
    (whose members' bytes dump decodes) the fields and the member ids."""
    if rtype == "OFFSET_COMMIT":
        key, value = oracle.offset_commit(version, key, value)
    if rtype == "GROUP_METADATA" and value is not None:
        value = _group_view(value)
    return _hex(key), _hex(value)


def _group_view(value: dict) -> dict:
    out = {k: v for k, v in value.items() if k != "members"}
    out["member_ids"] = [m["member_id"] for m in value.get("members") or []]
    return out


def oracle_records(root: str) -> tuple[list[dict], dict[int, oracle.Problem]]:
    """Every record of every partition of the store at ``root`` as the oracle reads it, in the
    shape of ``dump_records``; and the problem each partition ended with."""
    rows, problems = [], {}
    for pdir in sorted(Path(root).glob("__consumer_offsets-*"),
                       key=lambda p: int(p.name.rsplit("-", 1)[1])):
        partition = int(pdir.name.rsplit("-", 1)[1])
        segs = sorted(pdir.glob("*.log"))
        batches, problem = oracle.read_store_partition(
            [(int(s.name[:20]), s.read_bytes()) for s in segs])
        if problem is not None:
            problems[partition] = problem
        for b in batches:
            seg = f"{b['segment_base']:020d}.log"
            horizon = bool(b["attributes"] & oracle.DELETE_HORIZON)
            batch = {"base_offset": b["base_offset"], "last_offset": b["last_offset"],
                     "count": b["record_count"], "crc": b["crc"], "header_crc": b["header_crc"],
                     "position": b["position"], "size": b["size"],
                     "create_time": None if horizon else b["timestamp"],
                     "delete_horizon_ms": b["timestamp"] if horizon else None,
                     "is_transactional": bool(b["attributes"] & oracle.TRANSACTIONAL),
                     "is_control": bool(b["attributes"] & oracle.CONTROL),
                     "producer_id": b["producer_id"], "producer_epoch": b["producer_epoch"]}
            for delta, rtype, version, key, value in b["records"]:
                name = oracle.RECORD_TYPES[rtype]
                key, value = _record_view(name, version, key, value)
                rows.append({"partition": partition, "segment": seg, "batch": batch,
                             "offset": b["base_offset"] + delta, "type": name,
                             "version": version, "key": key, "value": value})
    return rows, problems


def dump_records(dump: list[dict]) -> list[dict]:
    """``offsetlog dump --json`` records, cut to what ``oracle_records`` says of them."""
    keep = ("base_offset", "last_offset", "count", "crc", "header_crc", "position", "size",
            "create_time", "delete_horizon_ms", "is_transactional", "is_control",
            "producer_id", "producer_epoch")
    rows = []
    for r in dump:
        value = r["value"]
        if r["type"] == "GROUP_METADATA" and value is not None:
            value = _group_view(value)
        rows.append({"partition": r["partition"], "segment": r["segment"],
                     "batch": {k: r["batch"][k] for k in keep}, "offset": r["offset"],
                     "type": r["type"], "version": r["version"], "key": r["key"],
                     "value": value})
    return rows


@pytest.mark.parametrize("name", NAMES)
def test_the_reference_reader_reads_each_fixture_as_the_old_engine_did(name):
    expected = expected_of(name)
    rows, problems = oracle_records(str(STORES / name / "store"))
    assert rows == dump_records(expected["cli"]["dump"]["output"])
    # its torn tails are the ones the old engine's recovery cut, with the same reasons
    truncated = {int(p): (r["truncated"]["position"], r["truncated"]["reason"])
                 for p, r in expected["recovery_report"]["partitions"].items() if r["truncated"]}
    assert {p: (pr.position, pr.reason) for p, pr in problems.items()} == truncated
    assert all(pr.torn for pr in problems.values())


# -- new stores, reference reader -----------------------------------------------------------

def replay_offsets(rows: list[dict]) -> dict[str, dict]:
    """Committed offsets from records, by FORMAT.md's rules ("Transactional batches"): plain
    commits and tombstones apply at once; a transaction's offsets are pending until its
    producer's marker, and a commit marker applies one only if no plain commit of the key
    came after it and no other producer's committed offset of the key is later."""
    committed: dict[tuple, tuple] = {}  # key -> (offset, metadata, epoch, log offset)
    pending: dict[int, dict[tuple, tuple]] = {}  # producer -> key -> (entry, log offset)
    superseded: set[tuple] = set()  # (producer, key) overtaken by a later plain commit
    for r in sorted(rows, key=lambda r: (r["partition"], r["offset"])):
        b = r["batch"]
        if r["type"] == "OFFSET_COMMIT":
            k, v = r["key"], r["value"]
            key = (k["group"], k["topic"], k["partition"])
            entry = None if v is None else (v["offset"], v["metadata"], v["leader_epoch"])
            if b["is_transactional"]:
                pending.setdefault(b["producer_id"], {})[key] = (entry, r["offset"])
                superseded.discard((b["producer_id"], key))
                continue
            for pid, keys in pending.items():
                if key in keys:
                    if entry is None:
                        del keys[key]
                    else:
                        superseded.add((pid, key))
            if entry is None:
                committed.pop(key, None)
            else:
                committed[key] = (*entry, r["offset"])
        elif r["type"] == "TRANSACTION_MARKER":
            pid = r["key"]["producer_id"]
            for key, (entry, at) in pending.pop(pid, {}).items():
                if r["value"]["result"] != "commit" or (pid, key) in superseded:
                    continue
                if key in committed and committed[key][3] > at:
                    continue
                committed[key] = (*entry, at)
    out: dict[str, dict] = {}
    for (g, t, p), (offset, metadata, epoch, _) in sorted(committed.items()):
        out.setdefault(g, {})[TP(t, p)] = OAM(offset, metadata, epoch)
    return out


def _write_with_defaults(root: str, clock: ManualClock) -> dict:
    """A store written by this checkout with the default options (the clock and member ids
    aside): commits of many groups with and without metadata and epochs, deletes, a group
    formed through the coordinator, transactions committed, aborted and left open, topics.
    Returns what the store said before it closed."""
    with OffsetStore.open(root, clock=clock, group_config=counted_group_config()) as s:
        for i in range(60):
            s.commit_sync(f"g{i}", {TP("orders", i % 4): i,
                                    TP("audit", 0): OAM(i * 3, "m" * (i % 3), i % 2 or None)})
            clock.advance(7)
        s.commit_sync("g1", {TP("orders", 1): OAM(2**62, "unicode ✓", 2**31 - 1)})
        s.delete_offsets("g2", [TP("audit", 0)])
        s.delete_group("g3")
        gen, (m1, _m2) = form_group(s, clock, group="members", clients=("a", "b"))
        s.commit_sync("members", {TP("orders", 0): 5}, generation_id=gen, member_id=m1)
        s.create_topic("orders", 4, topic_id=bytes(range(1, 17)))
        done = s.init_transactions("tx-done")
        with done:
            done.commit_offsets("g4", {TP("orders", 9): 9})
            done.commit_offsets("txn-only", {TP("t", 0): OAM(1, "x", 0)})
        aborted = s.init_transactions("tx-aborted")
        aborted.begin()
        aborted.commit_offsets("g5", {TP("orders", 1): 1234})
        aborted.abort()
        left = s.init_transactions("tx-open")
        left.begin()
        left.commit_offsets("g6", {TP("orders", 2): 4321})
        s.commit_sync("g7", {TP("orders", 3): 77})
        return {g: s.fetch(g) for g in s.groups()}


def test_a_store_this_engine_writes_reads_back_through_the_reference_reader(tmp_path):
    root = str(tmp_path / "store")
    clock = ManualClock()
    answered = _write_with_defaults(root, clock)
    rows, problems = oracle_records(root)
    assert problems == {}  # a cleanly closed store ends at its last batch in every partition
    dump = maker.run_cli(["dump", "--json"], root)
    assert dump["exit"] == 0
    assert rows == dump_records(dump["output"])
    assert {r["type"] for r in rows} == set(oracle.RECORD_TYPES.values())
    # the records say what the store answered, by FORMAT.md's rules
    replayed = replay_offsets(rows)
    assert replayed == {g: o for g, o in answered.items() if o}
    with OffsetStore.open(root, clock=clock, create=False) as s:
        assert s.recovery_report.clean
        assert {g: s.fetch(g) for g in s.groups()} == answered
    # the open transaction's offset is in the log, pending
    assert any(r["batch"]["is_transactional"] and r["key"]["group"] == "g6" for r in rows
               if r["type"] == "OFFSET_COMMIT")
    assert replayed["g6"][TP("orders", 2)] == answered["g6"][TP("orders", 2)] == OAM(6)


def test_the_reference_reader_finds_the_torn_tail_recovery_cuts(tmp_path):
    """A store this checkout writes, its active segment then cut inside its last batch: the
    oracle's torn tail is where this engine's recovery cuts, for the same reason."""
    root = str(tmp_path / "store")
    with OffsetStore.open(root, partitions=1, clock=ManualClock()) as s:
        for i in range(5):
            s.commit_sync("g", {TP("t", 0): i})
    (seg,) = sorted(Path(root).glob("__consumer_offsets-0/*.log"))
    seg.write_bytes(seg.read_bytes()[:-3] + bytes(200))
    size = seg.stat().st_size
    _, problems = oracle_records(root)
    with OffsetStore.open(root, create=False) as s:
        (cut,) = s.recovery_report.truncations
        assert s.fetch("g") == {TP("t", 0): OAM(3)}
    assert (problems[0].position, problems[0].reason, problems[0].torn) == (
        cut.position, cut.reason, True)
    assert cut.bytes_dropped == size - cut.position and seg.stat().st_size == cut.position


def test_a_fixture_copy_leaves_no_machine_specific_files():
    for name in NAMES:
        files = fixture_files(name)
        assert "LOCK" not in files and "snapshots/lock.mdb" not in files
        for path, data in files.items():
            assert b"/tmp/" not in data and b"/work/" not in data, (name, path)
        expected = (STORES / name / "expected.json").read_text()
        assert "/tmp/" not in expected and "/work/" not in expected, name


def test_the_fixtures_stay_small():
    total = sum(os.path.getsize(os.path.join(d, f)) for d, _, fs in os.walk(STORES) for f in fs)
    assert total < 5 * 1024 * 1024


# -- new stores, old engine -------------------------------------------------------------------

#: the last engine before the native core; the fixtures were written by it
OLD_ENGINE_COMMIT = "7e4d167"
REPO = Path(__file__).resolve().parents[2]


@pytest.fixture(scope="module")
def old_engine(tmp_path_factory) -> str:
    """A directory holding the ``offsetlog`` package of OLD_ENGINE_COMMIT (for PYTHONPATH)."""
    where = tmp_path_factory.mktemp("old-engine")
    archive = where / "src.tar"
    try:
        with open(archive, "wb") as f:
            subprocess.run(["git", "-C", str(REPO), "archive", OLD_ENGINE_COMMIT, "offsetlog",
                            "recovery", "compaction", "bench"], stdout=f, check=True,
                           stderr=subprocess.PIPE, timeout=60)
    except (OSError, subprocess.SubprocessError) as e:
        pytest.skip(f"the engine of {OLD_ENGINE_COMMIT} is not at hand: {e}")
    with tarfile.open(archive) as tar:
        tar.extractall(where, filter="tar")
    return str(where)


def read_with_old_engine(old_engine: str, root: str, options: dict, now: int) -> dict:
    env = dict(os.environ, PYTHONPATH=old_engine)
    out = subprocess.run([sys.executable, str(FIXTURES / "make_compat_stores.py"), "--read",
                          root, json.dumps(options), str(now)], env=env, check=True,
                         capture_output=True, text=True, timeout=120)
    result = json.loads(out.stdout)
    assert result["engine"].startswith(old_engine + os.sep), result["engine"]
    return result["read"]


def test_the_old_engine_reads_a_store_this_engine_writes_as_this_engine_does(tmp_path,
                                                                             old_engine):
    src = str(tmp_path / "written")
    clock = ManualClock()
    _write_with_defaults(src, clock)
    mine = maker.read_everything(maker.copy_fixture(src, str(tmp_path / "a")), {}, clock.now)
    theirs = read_with_old_engine(old_engine, maker.copy_fixture(src, str(tmp_path / "b")), {},
                                  clock.now)
    assert json.loads(json.dumps(mine)) == theirs
    assert theirs["recovery_report"]["snapshots_loaded"]  # its snapshots were read, not dropped
    assert not theirs["recovery_report"]["snapshots_discarded"]
    assert theirs["store"]["fetch"] and theirs["store"]["transaction_states"]
