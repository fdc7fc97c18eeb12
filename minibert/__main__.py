"""``python -m minibert ...`` runs the ``minibert`` command (see cli.py)."""

import sys

from .cli import main

sys.exit(main())
