"""The ``offsetlog`` command (also ``python -m offsetlog``)."""

from offsetlog.cli.main import main

__all__ = ["main"]
