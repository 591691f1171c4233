"""The package ships py.typed and a user's program type-checks with ``mypy --strict``
(issue 15, item 14)."""

import os
import site
import subprocess
import sys
from importlib import resources

import pytest

HERE = os.path.dirname(os.path.abspath(__file__))


def test_package_ships_py_typed():
    assert resources.files("offsetlog").joinpath("py.typed").is_file()


def test_user_program_passes_mypy_strict(tmp_path):
    pytest.importorskip("mypy", reason="mypy is not installed (pip install 'offsetlog[dev]')")
    import offsetlog
    env = dict(os.environ)
    root = os.path.dirname(os.path.dirname(os.path.abspath(offsetlog.__file__)))
    installed = {os.path.abspath(p) for p in site.getsitepackages() + [site.getusersitepackages()]}
    if root not in installed:
        # an editable install (a path hook mypy does not follow): point mypy at the source
        env["MYPYPATH"] = root
    r = subprocess.run([sys.executable, "-m", "mypy", "--strict", "--follow-imports=silent",
                        "--no-incremental", "--cache-dir", str(tmp_path / "cache"),
                        os.path.join(HERE, "user_program.py")],
                       capture_output=True, text=True, timeout=600, env=env, cwd=str(tmp_path))
    assert r.returncode == 0, r.stdout + r.stderr
