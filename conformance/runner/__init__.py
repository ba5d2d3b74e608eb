"""Conformance runner for tt-ext v3 and the torch record: drives any implementation through conformance/PROTOCOL.md."""

from .adapter import Adapter, AdapterStartError
from .cli import main, run
from .vectors import Case, load_cases

__all__ = ["Adapter", "AdapterStartError", "Case", "load_cases", "main", "run"]
