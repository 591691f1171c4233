"""offsetlog on Apache Spark (docs/SPARK.md): a data source, a local session, reports.

Importing this package does not import pyspark; its functions do, when called.
"""

from __future__ import annotations


def register(spark) -> None:
    """Register the ``offsetlog`` data source: ``spark.read.format("offsetlog").load(path)``."""
    from offsetlog.spark.source import register as _register
    _register(spark)


def local_session(master: str = "local[2]", **kwargs):
    """A SparkSession for this machine (UI off, loopback, quiet logs); see ``session.py``."""
    from offsetlog.spark.session import local_session as _local_session
    return _local_session(master, **kwargs)


__all__ = ["local_session", "register"]
