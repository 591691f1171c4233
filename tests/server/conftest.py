"""Fixtures of the wire server's tests: the server as a child process, a fresh group id."""

from __future__ import annotations

import uuid

import pytest

from support.wire_server import Server


@pytest.fixture
def server(tmp_path):
    s = Server(str(tmp_path / "store")).start()
    yield s
    if s.proc is not None:
        s.stop()


@pytest.fixture
def group_id():
    return f"g-{uuid.uuid4().hex[:8]}"
