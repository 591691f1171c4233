"""Reading a store back: replay and torn-tail repair (``replay``), finishing interrupted
cleaner swaps (``swap``), LMDB snapshots (``snapshot``) and what recovery found (``report``).

Operator tools live in ``tools`` (inspection, verification, salvage) and the crash-test
harness and its pytest plugin in ``crashtest``; both sit above the store."""

# This folder is installed as ``offsetlog.recovery`` (pyproject.toml's package-dir): it is never a
# top-level package of its own, so that it cannot shadow (or be shadowed by) PyPI's.
if __name__ != "offsetlog.recovery":  # pragma: no cover - only a wrong import gets here
    raise ImportError(f"this folder is offsetlog.recovery; import it by that name, not as {__name__!r}")

from offsetlog.recovery.report import RecoveryReport  # noqa: E402

__all__ = ["RecoveryReport"]
