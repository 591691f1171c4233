"""Only commands meant to create a store create one, and ``verify`` changes nothing, even on a
read-only copy (issue 15, items 1 and 2)."""

import os
import shutil
import stat
import subprocess
import sys

import pytest

from offsetlog import TopicPartition
from offsetlog.cli import main
from support.stores import open_store

READ_COMMANDS = (["dump"], ["describe"], ["groups"], ["transactions"], ["verify"])
CHANGE_COMMANDS = (["compact"], ["snapshot"], ["recover"], ["recover", "--salvage"])


def listing(root) -> dict:
    """Every path below ``root`` with its size and modification time."""
    out = {}
    for d, dirs, files in os.walk(root):
        for name in dirs + files:
            p = os.path.join(d, name)
            st = os.lstat(p)
            out[os.path.relpath(p, root)] = (st.st_size, st.st_mtime_ns)
    return out


@pytest.mark.parametrize("command", READ_COMMANDS + CHANGE_COMMANDS, ids=" ".join)
def test_no_command_makes_a_store_of_a_directory_that_is_none(tmp_path, capsys, command):
    """A fleet's root (stores below it) or a typo: refused with an error, nothing created."""
    fleet = tmp_path / "fleet"
    with open_store(fleet / "a", partitions=1) as s:
        s.commit_sync("g", {TopicPartition("t", 0): 1})
    before = listing(fleet)
    assert main([command[0], str(fleet), *command[1:]]) == 1
    out, err = capsys.readouterr()
    assert "not an offsetlog store" in err and str(fleet) in err and out == ""
    assert listing(fleet) == before


def make_read_only(root) -> None:
    for d, dirs, files in os.walk(root):
        for name in files:
            os.chmod(os.path.join(d, name), stat.S_IRUSR | stat.S_IRGRP | stat.S_IROTH)
    for d, dirs, files in sorted(os.walk(root), reverse=True):
        os.chmod(d, stat.S_IRUSR | stat.S_IXUSR | stat.S_IRGRP | stat.S_IXGRP | stat.S_IROTH
                 | stat.S_IXOTH)


def make_writable(root) -> None:
    for d, dirs, files in os.walk(root):
        os.chmod(d, 0o755)
        for name in files:
            os.chmod(os.path.join(d, name), 0o644)


@pytest.fixture
def read_only_copy(tmp_path):
    store = tmp_path / "store"
    with open_store(store, partitions=2) as s:  # snapshots on close: an LMDB store too
        for i in range(30):
            s.commit_sync(f"g{i % 3}", {TopicPartition("t", i % 4): i})
    assert os.path.isdir(store / "snapshots")
    copy = tmp_path / "copy"
    shutil.copytree(store, copy)
    os.remove(copy / "snapshots" / "lock.mdb")  # a copy taken without LMDB's lock file
    make_read_only(copy)
    yield copy
    make_writable(copy)


def test_verify_writes_nothing_on_a_read_only_copy(read_only_copy, capsys):
    # As root, read-only modes do not stop a write: the listing (sizes and mtimes) shows any.
    before = listing(read_only_copy)
    assert main(["verify", str(read_only_copy)]) == 0
    out = capsys.readouterr().out
    assert "snapshots: 2 ok" in out and "WARNING" not in out
    assert listing(read_only_copy) == before


def test_verify_leaves_an_existing_read_only_lock_file_alone(read_only_copy, capsys):
    """A read-only lock.mdb is a read-only copy: verify reads without registering in it."""
    make_writable(read_only_copy)
    shutil.copy(read_only_copy.parent / "store" / "snapshots" / "lock.mdb",
                read_only_copy / "snapshots" / "lock.mdb")
    make_read_only(read_only_copy)
    before = listing(read_only_copy)
    assert main(["verify", str(read_only_copy)]) == 0
    assert listing(read_only_copy) == before


def _nobody():
    import pwd
    try:
        return pwd.getpwnam("nobody")
    except KeyError:
        return None


@pytest.mark.skipif(os.geteuid() != 0 or shutil.which("setpriv") is None or _nobody() is None,
                    reason="needs root and setpriv to run verify as an unprivileged user")
def test_verify_as_an_unprivileged_user_on_a_read_only_copy(read_only_copy, tmp_path):
    """Where permissions do stop writes: verify as ``nobody`` succeeds and changes nothing."""
    for d in [tmp_path, *tmp_path.parents]:  # nobody must reach the copy
        os.chmod(d, os.stat(d).st_mode | 0o005)
    before = listing(read_only_copy)
    nobody = _nobody()
    r = subprocess.run(["setpriv", f"--reuid={nobody.pw_uid}", f"--regid={nobody.pw_gid}",
                        "--clear-groups", sys.executable, "-m", "offsetlog", "verify",
                        str(read_only_copy)], capture_output=True, text=True, timeout=120,
                       cwd="/", env={**os.environ, "HOME": "/"})
    if r.returncode != 0 and "Permission denied" in r.stderr and "python" in r.stderr.lower():
        pytest.skip(f"nobody cannot run this interpreter: {r.stderr.strip()[:200]}")
    assert r.returncode == 0, r.stderr
    assert "snapshots: 2 ok" in r.stdout and "WARNING" not in r.stdout
    assert listing(read_only_copy) == before
