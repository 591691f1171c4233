"""A pytest plugin: the ``offsetlog_crashtest`` fixture runs the crash-test harness.

Installed with offsetlog (the ``pytest11`` entry point ``offsetlog``), so a service's test
suite can crash-test its own commit code::

    # myservice/crash_workload.py  (importable by the child process)
    def consume(ctx):                      # ctx: offsetlog.recovery.crashtest.child.WorkloadContext
        offset = ctx.offset_base
        while True:
            offsets = {TopicPartition("orders", ctx.thread): offset}
            ctx.store.commit_sync("billing", offsets)
            ctx.ack("billing", offsets)
            offset += 1

    # tests/test_crash.py
    def test_billing_survives_kill_9(offsetlog_crashtest):
        offsetlog_crashtest(workload="myservice.crash_workload:consume", cycles=20,
                            store_options={"fsync": "always", "partitions": 10})

The fixture runs the harness in a fresh directory under ``tmp_path``, fails the test with the
violations (and the seed, to replay) if any invariant broke, and returns the
``CrashTestResult`` otherwise.
"""

from __future__ import annotations

import pytest

from offsetlog.recovery.crashtest.harness import (
    CrashTestConfig,
    CrashTestResult,
    config_from_options,
    run_crashtest,
)


@pytest.fixture
def offsetlog_crashtest(tmp_path_factory):
    """``run(config=None, *, workload=None, **settings) -> CrashTestResult``; fails the test on
    any violation. ``settings`` are ``CrashTestConfig`` fields (they override ``config``)."""

    def run(config: CrashTestConfig | None = None, *, workload=None, **settings
            ) -> CrashTestResult:
        if config is not None and settings:
            config = config_from_options(**{**config.__dict__, **settings})
        elif config is None:
            config = config_from_options(**settings)
        directory = tmp_path_factory.mktemp("offsetlog-crashtest")
        result = run_crashtest(directory, config, workload=workload)
        print(result.summary())
        if not result.ok:
            pytest.fail(result.summary(), pytrace=False)
        return result

    return run
