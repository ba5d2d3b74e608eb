"""The process's tracing counters: records carried, and what tracing swallowed, by name (spec/torch.md §3.5).

Its own module, below everything else in ``torch/``, because every part of
the instrumentation counts (a span that cannot start, a record refused, a
ring slot overwritten): importing the counter must not import the carriage.
"""

from __future__ import annotations

import threading
from collections import Counter

try:
    from .. import _opcall
except ImportError:  # not built: every op is counted here
    _opcall = None

__all__ = ["carriage_counts", "count", "native_overwritten"]

_counts: Counter[str] = Counter()
_counts_lock = threading.Lock()


def count(what: str, n: int = 1) -> None:
    with _counts_lock:
        _counts[what] += n


def carriage_counts() -> dict[str, int]:
    """Records sent and merged, and those refused or missing by error class, since the process started."""
    with _counts_lock:
        out = dict(_counts)
    native = native_overwritten()
    if native:
        out["ring_overwritten"] = out.get("ring_overwritten", 0) + native
    return out


def native_overwritten() -> int:
    """Ring records the C call of a traced op overwrote never exported (native/opcall: counted there, not by a
    Python call an op)."""
    return int(_opcall.overwritten()) if _opcall is not None else 0
