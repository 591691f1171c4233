"""``python -m offsetlog ...``: the ``offsetlog`` command."""

import sys

from offsetlog.cli import main

sys.exit(main())
