"""The client harness never passes CI by skipping: a missing tool fails under CI=true and
skips (with the reason) elsewhere."""

from __future__ import annotations

import pytest

from offsetlog.bench.kafka_broker import KafkaUnavailable
from support import client_runners


def _no_tool(monkeypatch, which: str) -> None:
    if which == "java":
        def missing():
            raise KafkaUnavailable("java not found")
        monkeypatch.setattr(client_runners, "find_java", missing)
    else:
        monkeypatch.setattr(client_runners.shutil, "which", lambda name: None)


@pytest.mark.parametrize("which, get", [("java", client_runners.java_client),
                                        ("go", client_runners.franzgo_binary),
                                        ("node", client_runners.kafkajs_node)])
@pytest.mark.parametrize("ci, outcome", [("true", pytest.fail.Exception),
                                         ("", pytest.skip.Exception)])
def test_a_missing_client_tool_fails_under_ci_and_skips_elsewhere(monkeypatch, which, get,
                                                                  ci, outcome):
    monkeypatch.setenv("CI", ci)
    _no_tool(monkeypatch, which)
    with pytest.raises(outcome) as e:
        get()
    assert which in str(e.value)
