"""The ``harness`` fixture of the member tests (``support.member_harness``)."""

import pytest

from support.member_harness import Harness


@pytest.fixture
def harness(store_dir, clock):
    h = Harness(store_dir, clock)
    yield h
    h.close()
