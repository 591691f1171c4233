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
    """A Random whose seed is printed on failure (set OFFSETLOG_TEST_SEED to replay one)."""
    seed = int(os.environ.get("OFFSETLOG_TEST_SEED", random.randrange(1 << 32)))
    request.node.user_properties.append(("seed", seed))
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
