"""python -m conformance.runner: see cli.py."""

import sys

from .cli import main

sys.exit(main())
