"""The log cleaner: the cleaning rules (``rules``), the local per-partition cleaner
(``cleaner``), the crash-safe segment swap it commits with (``swap``), and the distributed
job that runs the cleaner on Spark (``spark``). Depends on the log layer, never on the store."""

# This folder is installed as ``offsetlog.compaction`` (pyproject.toml's package-dir): it is never a
# top-level package of its own, so that it cannot shadow (or be shadowed by) PyPI's.
if __name__ != "offsetlog.compaction":  # pragma: no cover - only a wrong import gets here
    raise ImportError(f"this folder is offsetlog.compaction; import it by that name, not as {__name__!r}")

from offsetlog.compaction.cleaner import CleanResult, clean_partition  # noqa: E402

__all__ = ["CleanResult", "clean_partition"]
