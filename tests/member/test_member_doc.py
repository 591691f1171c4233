"""docs/MEMBER.md's example runs as printed."""

from __future__ import annotations

import contextlib
import io
import os
import re

from offsetlog import OffsetAndMetadata, TopicPartition

DOC = os.path.join(os.path.dirname(__file__), os.pardir, os.pardir, "docs", "MEMBER.md")


def test_the_example_runs():
    text = open(DOC, encoding="utf-8").read()
    example = re.search(r"```python\n(.*?)```", text, re.S).group(1)
    namespace = {"__name__": "__doc_example__"}
    out = io.StringIO()
    with contextlib.redirect_stdout(out):
        exec(compile(example, "docs/MEMBER.md", "exec"), namespace)
    for p in range(4):
        assert f"now mine: orders-{p} from offset 0" in out.getvalue()
    # every partition read to its end and committed
    assert namespace["committed"] == {TopicPartition("orders", p): OffsetAndMetadata(5)
                                      for p in range(4)}
