import hashlib
import os
import random

import pytest

from support.stores import ManualClock


@pytest.fixture
def clock():
    return ManualClock()


@pytest.fixture
def store_dir(tmp_path):
    return str(tmp_path / "store")


@pytest.fixture
def seeded_random(request):
    """A Random of the test's own. Its run's seed (drawn afresh, or OFFSETLOG_TEST_SEED's) is
    printed on failure; the test's seed (``seed_value``) is made from it and the test's id, so
    the printed value replays the failing test, and a run of many parametrized cases under one
    OFFSETLOG_TEST_SEED (the random Kafka sessions' OFFSETLOG_DIFF_SESSIONS) still gives each
    case a session of its own rather than the same one again."""
    run_seed = int(os.environ.get("OFFSETLOG_TEST_SEED", random.randrange(1 << 32)))
    request.node.user_properties.append(("seed", run_seed))
    digest = hashlib.sha256(f"{run_seed}/{request.node.nodeid}".encode()).digest()
    seed = int.from_bytes(digest[:4], "big")
    rng = random.Random(seed)
    rng.seed_value = seed
    yield rng


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_makereport(item, call):
    outcome = yield
    report = outcome.get_result()
    if report.failed:
        for name, value in item.user_properties:
            if name == "seed":
                report.sections.append(("seed", f"OFFSETLOG_TEST_SEED={value}"))


def pytest_configure(config):
    # The crash-test fixture ships as a pytest plugin (entry point ``pytest11``); register it
    # here too, for runs from a checkout where the package's entry points are not installed.
    import offsetlog.recovery.crashtest.pytest_plugin as plugin

    if not config.pluginmanager.is_registered(plugin):
        config.pluginmanager.register(plugin, "offsetlog-crashtest")

# The session-scoped SparkSession shared by tests/test_spark_*.py.
# A real Apache Kafka broker, once per session (tests/kafka/ and the client matrix).
from support.kafka_broker import kafka_acl_broker, kafka_broker, kafka_topics  # noqa: E402,F401
from support.spark_fixtures import spark  # noqa: E402,F401
