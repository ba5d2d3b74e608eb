"""Building a Timestamp on the hot path without re-validating known-good fields.

``Timestamp(...)`` checks every field on every call. A source's quality and
bound are validated once, when its sync state is refreshed (by building a
real Timestamp from them), so ``now()`` only needs to make the tuple. The
object is indistinguishable from one built by the constructor (type,
equality, hashing, repr).
"""

from __future__ import annotations

from ..wire._layout import ClockQuality, TsSource
from .base import Timestamp

__all__ = ["make_timestamp", "new_tuple"]

#: ``new_tuple(Timestamp, (ptp_ns, source, quality, uncertainty_ns))``: for
#: sources that inline the construction into ``now()`` (saves a call frame).
new_tuple = tuple.__new__


def make_timestamp(ptp_ns: int, source: TsSource, quality: ClockQuality, uncertainty_ns: int) -> Timestamp:
    """A Timestamp from fields the caller has already validated (see module doc)."""
    return new_tuple(Timestamp, (ptp_ns, source, quality, uncertainty_ns))
