"""Benchmarks: the comparative runner behind ``offsetlog bench`` and its cases (docs in
bench/RESULTS.md), and pytest-benchmark suites (``pytest bench/``)."""

# This folder is installed as ``offsetlog.bench`` (pyproject.toml's package-dir): it is never a
# top-level package of its own, so that it cannot shadow (or be shadowed by) PyPI's.
if __name__ != "offsetlog.bench":  # pragma: no cover - only a wrong import gets here
    raise ImportError(f"this folder is offsetlog.bench; import it by that name, not as {__name__!r}")

__all__: list[str] = []  # a suite of modules: offsetlog.bench.runner is the entry point
