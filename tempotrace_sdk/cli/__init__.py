"""The ``tempotrace`` command line (``tempotrace --help``; ``python -m tempotrace_sdk``)."""

from .main import main

__all__ = ["main"]
