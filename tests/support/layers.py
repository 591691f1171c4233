"""Run import-linter (the contracts in pyproject.toml), on the tree or on a changed copy.

compaction/, recovery/ and bench/ install as ``offsetlog.compaction`` and so on (pyproject's
package-dir), and ``offsetlog/`` holds links to them where they install, so ``lint-imports``
run in the repository sees the package as it is installed. ``replace`` runs the check on a
*view* instead: a temporary ``offsetlog/`` of links to the repository's files with one file
swapped for other text, which is how a test shows that a broken layering fails the check.

    python tests/support/layers.py      # lint-imports, as `make lint` runs it
"""

from __future__ import annotations

import os
import subprocess
import sys
import tempfile

REPO = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))


def build_view(dest: str, *, repo: str = REPO, replace: dict[str, str] | None = None) -> str:
    """Lay ``dest/offsetlog`` out as the package installs; ``replace`` maps a path relative
    to the repository (``offsetlog/log/framing.py``) to the text that view file holds."""
    replace = dict(replace or {})
    root = os.path.join(dest, "offsetlog")

    def link_tree(src_dir: str, dst_dir: str, rel: str) -> None:
        os.makedirs(dst_dir)
        for name in sorted(os.listdir(src_dir)):
            if name == "__pycache__":
                continue
            src, dst, r = os.path.join(src_dir, name), os.path.join(dst_dir, name), f"{rel}/{name}"
            if os.path.isdir(src):
                link_tree(src, dst, r)
            elif r in replace:
                with open(dst, "w") as f:
                    f.write(replace.pop(r))
            elif name.endswith(".py"):
                os.symlink(src, dst)

    link_tree(os.path.join(repo, "offsetlog"), root, "offsetlog")  # through its links
    if replace:
        raise ValueError(f"not in the package: {sorted(replace)}")
    return root


def lint_imports(*, repo: str = REPO, replace: dict[str, str] | None = None
                 ) -> subprocess.CompletedProcess:
    """``lint-imports`` with the repository's pyproject.toml, over the repository or (with
    ``replace``) over a view of it."""
    with tempfile.TemporaryDirectory(prefix="offsetlog-layers-") as tmp:
        root = repo
        if replace:
            build_view(tmp, repo=repo, replace=replace)
            root = tmp
        return subprocess.run(
            [sys.executable, "-c", "import sys; from importlinter.cli import lint_imports_command;"
             " sys.exit(lint_imports_command())",
             "--no-cache", os.path.join(repo, "pyproject.toml")],
            env=dict(os.environ, PYTHONPATH=root), cwd=root, capture_output=True, text=True)


if __name__ == "__main__":
    result = lint_imports()
    sys.stdout.write(result.stdout)
    sys.stderr.write(result.stderr)
    sys.exit(result.returncode)
