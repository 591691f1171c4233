"""The crash-test harness (docs/CRASHTEST.md): ``harness`` kills a committing child
(``child``) with SIGKILL and checks every guarantee; ``pytest_plugin`` is its fixture;
``exactly_once`` is the transactional (SQLite) variant."""

from offsetlog.recovery.crashtest.harness import (
                                                  CrashTestConfig,
                                                  CrashTestResult,
                                                  Violation,
                                                  run_crashtest,
)

__all__ = ["CrashTestConfig", "CrashTestResult", "Violation", "run_crashtest"]
