"""The package tree is the architecture: its layers are checked, not hoped for."""

import os
import re
import subprocess
import sys
import tomllib

from support.layers import REPO, lint_imports


def _view_text(path: str, extra: str) -> dict[str, str]:
    with open(os.path.join(REPO, path)) as f:
        return {path: f.read() + extra}


def test_the_import_contracts_hold():
    result = lint_imports()
    assert result.returncode == 0, result.stdout + result.stderr
    assert "BROKEN" not in result.stdout and result.stdout.count("KEPT") >= 3


def test_a_reintroduced_cycle_breaks_the_contract():
    # records imports framing; framing importing records back is the cycle that once was
    result = lint_imports(replace=_view_text("offsetlog/log/framing.py",
                                             "\nimport offsetlog.log.records  # noqa\n"))
    assert result.returncode != 0
    assert re.search(r"No import cycles between the modules of any package BROKEN",
                     result.stdout), result.stdout


def test_an_upward_import_breaks_the_layers():
    result = lint_imports(replace=_view_text("offsetlog/log/segment.py",
                                             "\nimport offsetlog.store  # noqa\n"))
    assert result.returncode != 0
    assert "offsetlog.log.segment -> offsetlog.store" in result.stdout.replace("\n", " ") or \
        "offsetlog.log is not allowed to import offsetlog.store" in result.stdout, result.stdout


def test_an_assignor_importing_the_engine_breaks_its_contract():
    result = lint_imports(replace=_view_text("offsetlog/assignors/range.py",
                                             "\nimport offsetlog.table  # noqa\n"))
    assert result.returncode != 0
    assert "The assignors are pure" in result.stdout and "BROKEN" in result.stdout


def test_only_offsetlog_is_importable_as_a_top_level_name(tmp_path):
    """compaction/, recovery/ and bench/ install under offsetlog; from anywhere, even the
    repository root, the bare names never find ours."""
    for cwd in (tmp_path, REPO):
        for name in ("compaction", "recovery", "bench"):
            code = (f"import importlib.util, sys\n"
                    f"try:\n    import {name} as m\nexcept ImportError:\n    sys.exit(0)\n"
                    f"sys.exit(1 if '{REPO}' in (getattr(m, '__file__', None) or '') else 0)")
            run = subprocess.run([sys.executable, "-c", code], cwd=cwd, capture_output=True,
                                 text=True)
            assert run.returncode == 0, (name, cwd, run.stderr)
    import offsetlog.bench
    import offsetlog.compaction
    import offsetlog.recovery
    assert offsetlog.compaction.__name__ == "offsetlog.compaction"


def test_every_package_folder_is_listed_in_pyproject():
    with open(os.path.join(REPO, "pyproject.toml"), "rb") as f:
        setup = tomllib.load(f)["tool"]["setuptools"]
    listed = set(setup["packages"])
    mapped = {folder: pkg for pkg, folder in setup["package-dir"].items()}
    found = set()
    for top in mapped:
        for dirpath, dirnames, filenames in os.walk(os.path.join(REPO, top)):
            dirnames[:] = [d for d in dirnames if d != "__pycache__"]
            if "__init__.py" in filenames:
                rel = os.path.relpath(dirpath, os.path.join(REPO, top))
                found.add(mapped[top] + ("" if rel == "." else "." + rel.replace(os.sep, ".")))
    assert found == listed


def test_no_module_is_over_600_lines():
    """The product's modules, Python and the native crate's Rust, stay under 600 lines: one
    that grows past is split by responsibility."""
    long = {}
    for top in ("offsetlog", "compaction", "recovery", "bench", "native/src"):
        for dirpath, _, filenames in os.walk(os.path.join(REPO, top)):
            for name in filenames:
                if name.endswith((".py", ".rs")):
                    path = os.path.join(dirpath, name)
                    with open(path) as f:
                        n = sum(1 for _ in f)
                    if n > 600:
                        long[os.path.relpath(path, REPO)] = n
    assert not long
