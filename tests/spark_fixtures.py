"""One local SparkSession for the whole test run (≈ 10–15 s to start), or a clean skip.

Imported by conftest.py so every ``tests/test_spark_*.py`` shares the session.
"""

import os
import re
import shutil
import subprocess

import pytest


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
