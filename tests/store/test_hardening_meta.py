"""Issue 17, defects 5 and 6: meta.json carries a checksum, replay checks that each group sits
in the partition its id hashes to, and every failure the store meets on disk is an
``OffsetlogError`` naming the path (never AttributeError, TypeError, IsADirectoryError or a
bare OSError), in the library and in the CLI."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import tempfile

import pytest

from offsetlog import TopicPartition as TP
from offsetlog.errors import (
    CorruptLogError,
    MetaFileError,
    OffsetlogError,
    PartitionMismatchError,
    StoreIOError,
)
from offsetlog.log import meta, naming
from offsetlog.partitioner import partition_for
from offsetlog.recovery.tools import inspect
from support.stores import open_log_store


def one_partition_store(path) -> str:
    store = open_log_store(path, partitions=1)
    for i in range(20):
        store.commit_sync(f"group-{i}", {TP("t", 0): i})
    store.close()
    return str(path)


def rewrite_meta(path: str, text: str) -> None:
    with open(naming.meta_path(path), "w") as f:
        f.write(text)


def test_one_flipped_bit_in_the_partition_count_is_a_checksum_error(tmp_path):
    path = one_partition_store(tmp_path / "s")
    with open(naming.meta_path(path)) as f:
        text = f.read()
    assert '"partitions": 1,' in text
    rewrite_meta(path, text.replace('"partitions": 1,', '"partitions": 3,'))  # 0x31 -> 0x33
    with pytest.raises(MetaFileError) as err:
        open_log_store(path).close()
    assert err.value.path == naming.meta_path(path) and "checksum" in str(err.value)
    with pytest.raises(MetaFileError):
        inspect.scan(path)


def test_a_partition_count_that_does_not_match_the_log_is_refused_never_rehashed(tmp_path):
    """Even with a meta.json that checks out (written by hand, or restored from another
    store), groups found in a partition they do not hash to are an error."""
    path = one_partition_store(tmp_path / "s")
    meta.write(path, 3)  # a valid, checksummed meta.json with the wrong count
    assert any(partition_for(f"group-{i}", 3) != 0 for i in range(20))
    with pytest.raises(PartitionMismatchError) as err:
        open_log_store(path).close()
    assert isinstance(err.value, CorruptLogError)
    assert err.value.path == naming.partition_dir(path, 0)
    assert "belongs in partition" in str(err.value)
    with pytest.raises(PartitionMismatchError):
        inspect.scan(path, replay=True)


def test_an_old_meta_json_without_a_checksum_opens_and_is_rewritten_with_one(tmp_path):
    path = one_partition_store(tmp_path / "s")
    rewrite_meta(path, '{"format": "offsetlog", "version": 1, "partitions": 1}\n')
    with open_log_store(path) as store:
        assert store.committed("group-3", TP("t", 0)).offset == 3
    with open(naming.meta_path(path)) as f:
        fields = json.load(f)
    assert fields["crc32"] == meta.checksum(fields) and fields["partitions"] == 1
    assert not os.path.exists(naming.meta_path(path) + ".tmp")


@pytest.mark.parametrize("text", [
    "[1, 2, 3]", "42", '"offsetlog"', "null",
    '{"format": "offsetlog", "version": "1", "partitions": 1}',
    '{"format": "offsetlog", "version": 1, "partitions": "1"}',
    '{"format": "offsetlog", "version": 1, "partitions": true}',
    '{"format": "offsetlog", "version": 1.0, "partitions": 1}',
    '{"format": "offsetlog", "version": 1, "partitions": 1, "manifest": "yes"}',
    '{"format": "offsetlog", "version": 1, "partitions": 1, "crc32": "x"}',
    "\xff\xfe not json",
])
def test_a_malformed_meta_json_is_an_error_naming_it(tmp_path, text):
    path = one_partition_store(tmp_path / "s")
    rewrite_meta(path, text)
    with pytest.raises(MetaFileError) as err:
        open_log_store(path).close()
    assert err.value.path == naming.meta_path(path)
    with pytest.raises(OffsetlogError):
        inspect.scan(path)


def _run_without_write_access(code: str) -> subprocess.CompletedProcess:
    """Run ``code`` in a child to which the store's modes apply: as root, with the
    capabilities that override file modes dropped (``setpriv``); otherwise as ourselves."""
    prefix = []
    if os.geteuid() == 0:
        setpriv = shutil.which("setpriv")
        if setpriv is None:
            pytest.skip("root without setpriv: file modes cannot make the store read-only")
        prefix = [setpriv, "--bounding-set", "-dac_override,-dac_read_search,-fowner", "--"]
    env = dict(os.environ, PYTHONPATH=os.pathsep.join(p for p in sys.path if p))
    return subprocess.run([*prefix, sys.executable, "-c", code], capture_output=True,
                          text=True, env=env, timeout=60)


@pytest.fixture
def read_only_store():
    # pytest's tmp_path may sit below directories only root may enter
    base = tempfile.mkdtemp(prefix="offsetlog-ro-", dir="/tmp")
    os.chmod(base, 0o755)
    path = one_partition_store(os.path.join(base, "s"))
    for root, dirs, files in os.walk(path):
        os.chmod(root, 0o555)
        for f in files:
            os.chmod(os.path.join(root, f), 0o444)
    yield path
    for root, dirs, files in os.walk(path):
        os.chmod(root, 0o755)
    shutil.rmtree(base)


def test_opening_a_read_only_store_is_a_store_io_error_naming_the_file(read_only_store):
    code = (f"from offsetlog import OffsetStore\n"
            f"from offsetlog.errors import StoreIOError\n"
            f"try:\n    OffsetStore.open({read_only_store!r})\n"
            f"except StoreIOError as e:\n    print('OK', e.path, e.errno)\n")
    done = _run_without_write_access(code)
    assert done.stdout.startswith("OK " + read_only_store), done.stdout + done.stderr


@pytest.mark.parametrize("args", [["recover"], ["recover", "--salvage"]])
def test_offsetlog_recover_on_a_read_only_store_prints_an_error_not_a_traceback(
        read_only_store, args):
    code = (f"import sys\nfrom offsetlog.cli.main import main\n"
            f"sys.exit(main({[*args, read_only_store]!r}))\n")
    done = _run_without_write_access(code)
    assert done.returncode == 1, done.stdout + done.stderr
    assert "Traceback" not in done.stderr + done.stdout
    assert read_only_store in done.stderr  # errors go to stderr (the CLI conventions)


def test_a_read_only_store_in_process_is_a_store_io_error(tmp_path, monkeypatch):
    """The same through the library, where the test may not demote itself: every write is
    refused as a read-only file system refuses it."""
    path = one_partition_store(tmp_path / "s")
    real_open = os.open

    def read_only(p, flags, *args, **kw):
        if flags & (os.O_WRONLY | os.O_RDWR | os.O_CREAT):
            raise OSError(30, "Read-only file system", p)
        return real_open(p, flags, *args, **kw)

    monkeypatch.setattr(os, "open", read_only)
    with pytest.raises(StoreIOError) as err:
        open_log_store(path).close()
    assert err.value.errno == 30 and err.value.path == naming.lock_path(path)
    assert isinstance(err.value, OSError)
