"""One local SparkSession for the whole test run (≈ 10–15 s to start), or a clean skip.

Imported by conftest.py so every ``tests/test_spark_*.py`` shares the session.
"""

import contextlib
import re
import shutil
import subprocess

import pytest
from offsetlog.group.errors import GroupIdNotFoundError


def _java_major() -> int | None:
    java = shutil.which("java")
    if java is None:
        return None
    try:
        out = subprocess.run([java, "-version"], capture_output=True, text=True,
                             timeout=30).stderr
    except (OSError, subprocess.SubprocessError):
        return None
    m = re.search(r'version "(\d+)(?:\.(\d+))?', out)
    if not m:
        return None
    major = int(m.group(1))
    return int(m.group(2)) if major == 1 and m.group(2) else major


@pytest.fixture(scope="session")
def spark(tmp_path_factory):
    """A local[2] SparkSession with the offsetlog data source registered."""
    pytest.importorskip("pyspark", reason="the spark extra is not installed")
    pytest.importorskip("pyarrow", reason="the spark extra is not installed")
    major = _java_major()
    if major is None or major < 17:
        pytest.skip(f"Spark needs Java 17+ (found: {major or 'none'}); `make test` installs it")
    import offsetlog.spark
    from offsetlog.spark import session
    s = session.local_session("local[2]", app_name="offsetlog-tests",
                              scratch_root=str(tmp_path_factory.mktemp("spark")),
                              conf={"spark.sql.shuffle.partitions": "4"})
    offsetlog.spark.register(s)
    yield s
    session.stop(s)


def spark_error_text(excinfo) -> str:
    """The whole text of a failed Spark job's exception (the Python traceback is inside)."""
    return str(excinfo.value)


__all__ = ["spark", "spark_error_text"]


def random_history(path, rng, clock, *, partitions=3, ops=200, segment_bytes=None,
                   delete_retention_ms=24 * 3600 * 1000):
    """A store at ``path`` with a random history of commits, deletes and expiry; returns the
    options it was opened with (compaction must use the same)."""
    from offsetlog import OffsetAndMetadata, OffsetStore, TopicPartition
    opts = dict(partitions=partitions, segment_bytes=segment_bytes or rng.choice([1024, 2048, 4096]),
                delete_retention_ms=delete_retention_ms, retention_ms=rng.choice([60_000, 3_600_000]))
    groups = [f"group-{i}" for i in range(rng.randint(3, 8))]
    with OffsetStore.open(path, clock=clock, cleaner_backoff_ms=0,
                          retention_check_interval_ms=0, **opts) as store:
        for _ in range(ops):
            clock.advance(rng.randint(0, 5_000))
            g = rng.choice(groups)
            roll = rng.random()
            if roll < 0.85:
                offsets = {}
                for _ in range(rng.randint(1, 4)):
                    tp = TopicPartition(rng.choice(["orders", "payments", "audit"]),
                                        rng.randint(0, 3))
                    offsets[tp] = OffsetAndMetadata(
                        rng.randint(0, 10**9), rng.choice(["", "", "m", "x" * 40]),
                        rng.choice([None, None, rng.randint(0, 9)]))
                store.commit_sync(g, offsets)
            elif roll < 0.93:
                store.delete_offsets(g, [TopicPartition("orders", rng.randint(0, 3))])
            elif roll < 0.97:
                with contextlib.suppress(GroupIdNotFoundError):  # none left to delete
                    store.delete_group(g)
            else:
                store.expire_offsets()
    return opts
