"""A SparkSession set up for offsetlog's jobs on one machine or a cluster.

Facts this builder encodes (measured with PySpark 4.3 and Java 17, see docs/SPARK.md):

* Python workers run ``python3`` from PATH unless ``PYSPARK_PYTHON`` says otherwise; they must
  import ``offsetlog``, so they are pointed at the running interpreter (whose environment has
  the project installed);
* a killed JVM leaves ``spark-*`` folders in the system temp directory unless
  ``spark.local.dir`` (and the JVM's ``java.io.tmpdir``) point elsewhere: both go under one
  ``offsetlog-spark-*`` folder per process (a session's ``spark.local.dir`` is removed by
  :func:`stop`, the folder at interpreter exit), so a crash leaves at most that one;
* the web UI is off, a local driver binds to loopback only, and log4j prints errors only.
"""

from __future__ import annotations

import atexit
import os
import shutil
import sys
import tempfile

_LOG4J = """\
rootLogger.level = error
rootLogger.appenderRef.stderr.ref = console
appender.console.type = Console
appender.console.name = console
appender.console.target = SYSTEM_ERR
appender.console.layout.type = PatternLayout
appender.console.layout.pattern = %d{HH:mm:ss} %p %c{1}: %m%n
# Spark sets a Python driver's level to this logger's (WARN by default) and says so on stderr
logger.repl.name = org.apache.spark.repl.Main
logger.repl.level = error
"""

#: session -> its scratch folder (spark.local.dir), removed by stop() or at exit
_scratch: dict[int, str] = {}
#: this process's folder: the log4j file and the JVM's java.io.tmpdir. The gateway JVM
#: outlives a stopped session and serves the next one, so these live as long as the process.
_process_root: list[str] = []


def _root(scratch_root: str | None) -> str:
    if not _process_root:
        root = tempfile.mkdtemp(prefix="offsetlog-spark-", dir=scratch_root)
        with open(os.path.join(root, "log4j2.properties"), "w") as f:
            f.write(_LOG4J)
        _process_root.append(root)
    return _process_root[0]


def _settings(master: str, app_name: str, conf: dict[str, str] | None,
              scratch_root: str | None) -> tuple[list[tuple[str, str]], str]:
    """The Spark settings of a session or context for offsetlog, and its scratch folder."""
    # Workers must run this interpreter: it is the one with offsetlog installed.
    os.environ.setdefault("PYSPARK_PYTHON", sys.executable)
    os.environ.setdefault("PYSPARK_DRIVER_PYTHON", sys.executable)
    root = _root(scratch_root)
    scratch = tempfile.mkdtemp(prefix="session-", dir=root)
    log4j = os.path.join(root, "log4j2.properties")
    java_opts = f"-Dlog4j2.configurationFile=file:{log4j} -Djava.io.tmpdir={root}"
    settings = [("spark.master", master), ("spark.app.name", app_name),
                ("spark.ui.enabled", "false"),
                ("spark.ui.showConsoleProgress", "false"),
                ("spark.local.dir", scratch),
                ("spark.driver.extraJavaOptions", java_opts),
                ("spark.executor.extraJavaOptions", java_opts),
                ("spark.pyspark.python", os.environ["PYSPARK_PYTHON"]),
                # a few small shuffles per report: 200 partitions would be 200 tiny tasks
                ("spark.sql.shuffle.partitions", "8")]
    if master.startswith("local"):
        settings += [("spark.driver.bindAddress", "127.0.0.1"),
                     ("spark.driver.host", "127.0.0.1")]
    settings += list((conf or {}).items())
    return settings, scratch


def _keep_scratch(obj, scratch: str) -> None:
    if _scratch.setdefault(id(obj), scratch) != scratch:
        shutil.rmtree(scratch, ignore_errors=True)  # getOrCreate returned a running one


def local_session(master: str = "local[2]", *, app_name: str = "offsetlog",
                  conf: dict[str, str] | None = None, scratch_root: str | None = None):
    """Create (or return the running) SparkSession.

    :param master: ``local[N]`` or a cluster URL (``spark://host:7077``, ``yarn``, ...); for
        a cluster the driver is not bound to loopback
    :param conf: extra Spark settings, applied last
    :param scratch_root: where the scratch folder goes (default: the system temp directory)
    """
    from pyspark.sql import SparkSession

    settings, scratch = _settings(master, app_name, conf, scratch_root)
    builder = SparkSession.builder
    for key, value in settings:
        builder = builder.config(key, value)
    spark = builder.getOrCreate()
    spark.sparkContext.setLogLevel("ERROR")
    _keep_scratch(spark, scratch)
    return spark


def local_context(master: str = "local[2]", *, app_name: str = "offsetlog",
                  conf: dict[str, str] | None = None, scratch_root: str | None = None):
    """A SparkContext with :func:`local_session`'s settings, without the SQL session: for
    jobs on RDDs only (``offsetlog report`` without ``--out``), it skips starting Spark SQL
    (seconds of class loading on a small machine). Stop it with :func:`stop`."""
    from pyspark import SparkConf, SparkContext

    settings, scratch = _settings(master, app_name, conf, scratch_root)
    sc = SparkContext.getOrCreate(SparkConf().setAll(settings))
    sc.setLogLevel("ERROR")
    _keep_scratch(sc, scratch)
    return sc


def stop(spark) -> None:
    """Stop the session (or context) and remove its scratch folder."""
    spark.stop()
    scratch = _scratch.pop(id(spark), None)
    if scratch is not None:
        shutil.rmtree(scratch, ignore_errors=True)


@atexit.register
def _remove_scratch() -> None:
    for scratch in list(_scratch.values()) + _process_root:
        shutil.rmtree(scratch, ignore_errors=True)
