"""``python -m minibert ...`` runs the ``minibert`` command (see cli.py)."""

import sys

from .apps.cli import main

sys.exit(main())
