"""``python -m offsetlog``: the ``offsetlog`` command."""

import sys

from offsetlog.cli import main

if __name__ == "__main__":
    sys.exit(main())
