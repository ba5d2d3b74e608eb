"""The reliability suite (issue 13): fork, loss, torn lines, configuration errors, lying ptp4l, hostile input.

Every case runs in seconds with bounded loops. The heavier load variants are
marked ``load``: ``make test`` runs them too; ``-m "not load"`` skips them
while working.
"""

from __future__ import annotations

import pytest


def pytest_configure(config: pytest.Config) -> None:
    config.addinivalue_line("markers", "load: a heavier load variant (many processes); make test runs it")
