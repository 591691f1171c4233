"""pytest-benchmark suites over the runner's cases (small sizes, few rounds).

Run by hand, not in CI (``testpaths`` is ``tests/``)::

    .venv/bin/pytest bench/ -p no:cacheprovider --benchmark-only

The suites are ``bench/bench_*.py``; pytest only collects ``test_*.py`` by default, so the hook
below collects them too. Data goes to ``$OFFSETLOG_BENCH_DIR`` or ``./data/bench-pytest`` (a
real disk: fsync on tmpfs measures nothing), one sub-directory per test, removed afterwards.
"""

from __future__ import annotations

import os
import shutil

import pytest

from offsetlog.bench.common import DEFAULT_DATA_DIR


def pytest_collect_file(file_path, parent):
    # A file named on the command line is collected by pytest itself; do not add it twice.
    if (file_path.suffix == ".py" and file_path.name.startswith("bench_")
            and not parent.session.isinitpath(file_path)):
        return pytest.Module.from_parent(parent, path=file_path)
    return None


@pytest.fixture
def bench_dir(request):
    root = os.environ.get("OFFSETLOG_BENCH_DIR") or os.path.join(
        os.path.dirname(DEFAULT_DATA_DIR), "bench-pytest")
    path = os.path.abspath(os.path.join(root, request.node.name.replace("/", "_")))
    shutil.rmtree(path, ignore_errors=True)
    os.makedirs(path)
    yield path
    shutil.rmtree(path, ignore_errors=True)
    try:
        os.rmdir(os.path.abspath(root))  # only if empty
    except OSError:
        pass
