"""``python -m tempotrace_sdk`` runs the ``tempotrace`` command line."""

import sys

from .cli.main import main

sys.exit(main())
