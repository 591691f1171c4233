"""Docs name only what exists: every dotted ``offsetlog.…`` name in README.md and docs/ imports
(as a module, or as an attribute of one), and every ``offsetlog/…``, ``compaction/…``,
``recovery/…`` or ``bench/…`` path they mention is in the tree."""

import importlib
import os
import re

import pytest

from support.layers import REPO

DOCS = ["README.md"] + [os.path.join("docs", n) for n in sorted(os.listdir(os.path.join(REPO, "docs")))
                        if n.endswith(".md")]
DOTTED = re.compile(r"(?<![\w./-])offsetlog(?:\.[A-Za-z_]\w*)+")
PATH = re.compile(r"(?<![\w./-])(?:offsetlog|compaction|recovery|bench|tests)/[\w./-]*[\w/]")


def resolves(name: str) -> bool:
    parts = name.split(".")
    for i in range(len(parts), 0, -1):
        try:
            obj = importlib.import_module(".".join(parts[:i]))
        except ImportError:
            continue
        for attr in parts[i:]:
            if not hasattr(obj, attr):
                return False
            obj = getattr(obj, attr)
        return True
    return False


@pytest.mark.parametrize("doc", DOCS)
def test_every_dotted_name_imports(doc):
    with open(os.path.join(REPO, doc)) as f:
        text = f.read()
    missing = sorted({n.rstrip(".") for n in DOTTED.findall(text)
                      if not resolves(n.rstrip("."))})
    assert not missing, f"{doc} names what does not exist: {missing}"


@pytest.mark.parametrize("doc", DOCS)
def test_every_path_exists(doc):
    with open(os.path.join(REPO, doc)) as f:
        text = f.read()
    missing = sorted({p for p in PATH.findall(text)
                      if "*" not in p and not os.path.exists(os.path.join(REPO, p.rstrip("/")))})
    assert not missing, f"{doc} names paths that do not exist: {missing}"
