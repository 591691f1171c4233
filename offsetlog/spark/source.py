"""The ``offsetlog`` PySpark data source (PySpark 4's Python Data Source API).

    import offsetlog.spark
    offsetlog.spark.register(spark)
    df = spark.read.format("offsetlog").load("/var/lib/offsets")       # one store, or a
                                                                        # directory of stores
Options:

* ``salvage`` (``"false"``): skip corrupt regions instead of failing the job; what was skipped
  is logged by the workers and listed by the problems view;
* ``view`` (``"records"``): ``"problems"`` gives one row per dropped byte range instead
  (torn tails, which every read ignores as recovery does, and corrupt regions).

One input partition per segment file, so reads parallelise by segment. The reading itself is
``offsetlog.spark.segments``, the engine's own ``BatchReader`` with recovery's policy.
"""

from __future__ import annotations

from pyspark.sql.datasource import DataSource, DataSourceReader, InputPartition

from offsetlog.spark.segments import (
    PROBLEM_COLUMNS,
    RECORD_COLUMNS,
    SegmentTask,
    ddl,
    plan_segments,
    segment_problems,
    segment_rows,
)

NAME = "offsetlog"
VIEWS = ("records", "problems")


def _flag(options, name: str) -> bool:
    value = str(options.get(name, "false")).strip().lower()
    if value not in ("true", "false", "1", "0", "yes", "no"):
        raise ValueError(f"option {name}={value!r}: expected true or false")
    return value in ("true", "1", "yes")


def _view(options) -> str:
    view = str(options.get("view", "records")).strip().lower()
    if view not in VIEWS:
        raise ValueError(f"option view={view!r}: expected one of {', '.join(VIEWS)}")
    return view


class SegmentPartition(InputPartition):
    """An input partition: one segment file."""

    def __init__(self, task: SegmentTask | None) -> None:
        super().__init__(task)


class OffsetlogDataSource(DataSource):
    @classmethod
    def name(cls) -> str:
        return NAME

    def schema(self) -> str:
        return ddl(PROBLEM_COLUMNS if _view(self.options) == "problems" else RECORD_COLUMNS)

    def reader(self, schema) -> "OffsetlogReader":
        path = self.options.get("path")
        if not path:
            raise ValueError("spark.read.format('offsetlog').load(PATH): PATH is required")
        return OffsetlogReader(path, salvage=_flag(self.options, "salvage"),
                               view=_view(self.options))


class OffsetlogReader(DataSourceReader):
    def __init__(self, path: str, *, salvage: bool, view: str) -> None:
        self.path = path
        self.salvage = salvage
        self.view = view

    def partitions(self):
        tasks = plan_segments(self.path)
        # Spark needs at least one partition; an empty store reads as no rows.
        return [SegmentPartition(t) for t in tasks] or [SegmentPartition(None)]

    def read(self, partition):
        task = partition.value
        if task is None:
            return iter(())
        if self.view == "problems":
            return segment_problems(task)
        return segment_rows(task, salvage=self.salvage)


def register(spark) -> None:
    """Make ``spark.read.format("offsetlog")`` available in this session."""
    spark.dataSource.register(OffsetlogDataSource)
