"""Stamps and span times as numpy arrays, for the rules applied to many at once (spec/analysis.md §2.1, §5.6):
the parent -> child edge batches (edgebatch.py) and large collectives' claims (claims_arrays.py).

int64 sums of readings, bounds and a topology extra stay exact only while the readings do not come near
2^63: a batch whose readings or times lie outside [0, 2^62) ns is left to the one-at-a-time rules, which
Python's integers keep exact.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np

from ..wire.layout import UNCERTAINTY_SATURATED
from .events import QUALITIES, Stamp

try:
    from .. import _columns
except ImportError:  # (not built: the comprehensions answer)
    _columns = None

__all__ = ["SAFE", "StampArrays", "times"]

#: readings and times from here on (or negative ones) are not put through int64 sums
SAFE = 1 << 62
_UNKNOWN = "UNKNOWN"
_UNKNOWN_NUMBER = QUALITIES.index(_UNKNOWN)
#: the flags column's bits (native/columns/tt_stampfields.h)
_HAVE, _UNKNOWN_BIT, _DEGRADED, _DOMAIN = 1, 2, 4, 8


def _ints(values: list[int | None]) -> np.ndarray:
    """int64 values, -1 for None."""
    if None in values:
        values = [-1 if v is None else v for v in values]
    return np.array(values, dtype=np.int64)


class StampArrays:
    """Stamps as arrays: reading (-1: none), bound, UNKNOWN quality, degraded, Lamport value (-1: none), domain.
    Gathered in C (native/columns/tt_stampfields.c) where it is built and the stamps are plain, else one
    comprehension a field; the two are equal (tests/analysis/test_stamparrays.py). The C path's reading,
    bound and Lamport arrays are read-only views of its buffer: the rules only read them."""

    have: np.ndarray
    ptp: np.ndarray
    unc: np.ndarray
    unknown: np.ndarray
    degraded: np.ndarray
    lts: np.ndarray
    domain: list[Any]
    domains: bool

    def __init__(self, stamps: Sequence[Stamp], native: bool = True) -> None:
        self.stamps = stamps
        fields = _columns.stamp_fields(stamps, Stamp) if native and _columns is not None and \
            type(stamps) is list else None
        if fields is None:
            self._gather(stamps)
            return
        n = len(stamps)
        ptp, unc, lts, flags = np.frombuffer(fields, dtype=np.int64).reshape(4, n)
        self.have = (flags & _HAVE) != 0
        self.ptp, self.unc, self.lts = ptp, unc, lts
        self.unknown = (flags & _UNKNOWN_BIT) != 0
        self.degraded = (flags & _DEGRADED) != 0
        if (flags & _DOMAIN).any():  # (whether any names one: as the comprehension says, which compares them)
            self.domain = [s.domain for s in stamps]
            self.domains = self.domain.count(None) != n
        else:
            self.domain, self.domains = [None] * n, False

    @classmethod
    def of_arrays(cls, ptp: np.ndarray, unc: np.ndarray, quality: np.ndarray, lts: np.ndarray,
                  degraded: np.ndarray) -> StampArrays:
        """Stamps that are all readings with a Lamport value and no domain (a stamps text's, plainlane.py), from
        their fields: ``quality`` as the number events.QUALITIES names."""
        self = cls.__new__(cls)
        n = len(ptp)
        self.stamps = _Readings(ptp, unc, quality, lts, degraded)
        self.have = np.ones(n, dtype=bool)
        self.ptp, self.unc, self.lts = ptp, unc, lts
        self.unknown = quality == _UNKNOWN_NUMBER
        self.degraded = degraded
        self.domain, self.domains = [None] * n, False
        return self

    def _gather(self, stamps: Sequence[Stamp]) -> None:
        ptp = [s.ptp_ns for s in stamps]
        self.have = np.array([p is not None for p in ptp], dtype=bool)
        self.ptp = _ints(ptp)
        self.unc = np.array([s.uncertainty_ns for s in stamps], dtype=np.int64)
        self.unknown = np.array([s.quality == _UNKNOWN for s in stamps], dtype=bool)
        self.degraded = np.array([s.degraded for s in stamps], dtype=bool)
        self.lts = _ints([s.lts for s in stamps])
        self.domain = [s.domain for s in stamps]
        self.domains = self.domain.count(None) != len(stamps)

    def reading(self) -> np.ndarray:
        return self.have

    def usable(self) -> np.ndarray:
        """order.stamp_usable of each stamp, for stamps without a domain (a reading below 2^62 ns)."""
        usable: np.ndarray = self.have & ~self.degraded & ~self.unknown & (self.unc < UNCERTAINTY_SATURATED)
        return usable

    def safe(self) -> bool:
        """Every reading in [0, 2^62) ns."""
        readings = self.ptp[self.have]
        return not len(readings) or (int(readings.min()) >= 0 and int(readings.max()) < SAFE)


class _Readings(Sequence[Stamp]):
    """``of_arrays``' stamps, each made when a rule reads one alone (a violation's claimed bounds)."""

    def __init__(self, ptp: np.ndarray, unc: np.ndarray, quality: np.ndarray, lts: np.ndarray,
                 degraded: np.ndarray) -> None:
        self._fields = ptp, unc, quality, lts, degraded

    def __len__(self) -> int:
        return len(self._fields[0])

    def __getitem__(self, k: Any) -> Any:
        ptp, unc, quality, lts, degraded = self._fields
        return Stamp(int(ptp[k]), int(unc[k]), QUALITIES[int(quality[k])], int(lts[k]), bool(degraded[k]))


def times(values: Sequence[int | None]) -> np.ndarray | None:
    """Span times as int64; None when one is missing, negative or at or beyond 2^62 ns."""
    if None in values:
        return None
    try:
        out = np.array(values, dtype=np.uint64)
    except OverflowError:  # (a negative time: beyond what a span table or OTLP JSON holds)
        return None
    return None if len(out) and int(out.max()) >= SAFE else out.astype(np.int64)
