"""docs/TRANSACTIONS.md's end-to-end example runs as printed."""

import contextlib
import io
import os
import re

DOC = os.path.join(os.path.dirname(__file__), os.pardir, os.pardir, "docs", "TRANSACTIONS.md")


def test_the_example_runs():
    text = open(DOC, encoding="utf-8").read()
    example = re.search(r"```python\n(.*?)```", text, re.S).group(1)
    out = io.StringIO()
    namespace = {"__name__": "__doc_example__"}
    with contextlib.redirect_stdout(out):
        exec(compile(example, "docs/TRANSACTIONS.md", "exec"), namespace)
    assert out.getvalue().split("\n")[:2] == ["(25, 25)", "25"]
