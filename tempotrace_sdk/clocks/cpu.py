"""The CPU clock source: CLOCK_TAI, corrected and judged by the kernel's NTP state.

Rules (spec/clocks.md §CPU):
- When the local chronyd gives a verdict (``chrony.py``, AWS ClockBound's
  rule: synchronised → OK, holdover → DEGRADED), its bound is used, taken at
  the end of the snapshot's validity so it holds for every read.
- Otherwise (chronyd absent, disabled, unsynchronised; the snapshot's reason
  says which) the kernel rule: STA_UNSYNC (or TIME_ERROR / STA_CLOCKERR) →
  UNKNOWN: nothing disciplines the clock; else the bound is the kernel's
  ``maxerror`` (its own worst-case error, which it grows by 500 ppm/s between
  daemon updates) plus 500 ppm × the longest time a snapshot may be used,
  saturated into the uint16 field.
- When the kernel's TAI offset is 0, CLOCK_TAI reads UTC (37 s off since
  2017): the leap-second table's TAI − UTC is added and ``describe()`` says so.
  If that table has expired, a leap second may have been missed → DEGRADED.
- When the kernel's TAI offset is set but differs from the (unexpired) table,
  the table wins: CLOCK_TAI is shifted by table − kernel and the quality is at
  best DEGRADED, the reason naming both values (a daemon set a wrong offset).
  With an expired table the kernel may know a newer leap second: its value is
  kept, still DEGRADED.
"""

from __future__ import annotations

import functools
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from ..errors import ClockError
from ..wire.layout import UNCERTAINTY_SATURATED, ClockQuality, TsSource
from . import refresh
from ._native import native_status
from .base import Timestamp, saturate_uncertainty
from .chrony import ChronyHealth, shared_health
from .kernel import STA_CLOCKERR, TIME_ERROR, KernelSync, read_kernel_sync
from .leapseconds import leap_table

__all__ = ["KERNEL_MAXFREQ_PPM", "SNAPSHOT_VALID_S", "CpuClock", "tai_correction"]

#: The kernel adds MAXFREQ (500 ppm) of error per second to maxerror
#: (kernel/time/ntp.c, second_overflow); we use the same worst-case rate.
KERNEL_MAXFREQ_PPM = 500

#: A snapshot older than this is refreshed inline (the refresher thread is
#: meant to renew it every second; this is the guard if it stalls).
SNAPSHOT_VALID_S = 3

_CLOCK_TAI: int = getattr(time, "CLOCK_TAI", 11)
_gettime = time.clock_gettime_ns
_CPU = TsSource.CPU


@dataclass(frozen=True, slots=True)
class _CpuState:
    read_at_ns: int  # CLOCK_TAI (uncorrected) when this snapshot was taken
    valid_until_ns: int
    offset_ns: int  # added to CLOCK_TAI: the leap correction when the kernel's TAI offset is 0
    quality: ClockQuality
    uncertainty_ns: int
    reason: str
    kernel: KernelSync | None
    correction: dict[str, Any]
    chrony: Callable[[], dict[str, Any]] | None = None  # describes the chronyd evidence weighed (built on demand)


def _judge(
    ks: KernelSync, table_expired: bool, correcting: bool, discrepancy: str = ""
) -> tuple[ClockQuality, int, str]:
    if ks.unsync:
        return (
            ClockQuality.UNKNOWN,
            UNCERTAINTY_SATURATED,
            f"kernel reports STA_UNSYNC (adjtimex status 0x{ks.status:04x}, maxerror {ks.maxerror_us} µs): "
            "no NTP/PTP daemon is disciplining the system clock",
        )
    if ks.clock_state == TIME_ERROR or ks.status & STA_CLOCKERR:
        return ClockQuality.UNKNOWN, UNCERTAINTY_SATURATED, f"kernel clock state {ks.as_dict()['clock_state']}"
    bound = ks.maxerror_us * 1000 + KERNEL_MAXFREQ_PPM * 1000 * SNAPSHOT_VALID_S
    unc = saturate_uncertainty(bound)
    if correcting and table_expired:
        return ClockQuality.DEGRADED, unc, "kernel TAI offset is 0 and the leap-second table has expired"
    if discrepancy:
        return ClockQuality.DEGRADED, unc, discrepancy
    return ClockQuality.OK, unc, f"kernel synchronised; bound = maxerror {ks.maxerror_us} µs + 500 ppm staleness"


def tai_correction(kernel_tai_s: int, table_s: int, table_expired: bool, origin: str) -> tuple[int, str, str]:
    """(seconds to add to CLOCK_TAI, why, discrepancy reason or "") for the kernel's and the table's TAI − UTC."""
    if kernel_tai_s == 0:
        return table_s, f"kernel TAI offset is 0 so CLOCK_TAI reads UTC; added TAI-UTC = {table_s} s from {origin}", ""
    if kernel_tai_s == table_s:
        return 0, "kernel TAI offset agrees with the leap table; CLOCK_TAI used as is", ""
    if table_expired:
        # The kernel may have been told of a leap second newer than our table.
        why = f"kernel TAI offset {kernel_tai_s} s, expired {origin} says {table_s} s: kept the kernel's"
        return 0, why, f"TAI offset uncertain: {why}"
    shift = table_s - kernel_tai_s
    why = f"kernel TAI offset {kernel_tai_s} s disagrees with {origin} ({table_s} s): added {shift:+d} s"
    return shift, why, f"TAI offset discrepancy: {why}"


def _with_chrony(
    kernel_verdict: tuple[ClockQuality, int, str], chrony: ChronyHealth | None, discrepancy: str
) -> tuple[ClockQuality, int, str, Callable[[], dict[str, Any]] | None]:
    """chronyd's verdict when it gives one (at the end of the snapshot's life), else the kernel's, saying why."""
    if chrony is None:
        return (*kernel_verdict, None)
    end_of_validity = time.monotonic_ns() + SNAPSHOT_VALID_S * 1_000_000_000
    seen = chrony.seen
    verdict = chrony.verdict_at(end_of_validity, seen)
    info = functools.partial(chrony.describe, end_of_validity, seen)
    if verdict.quality is None:
        quality, unc, reason = kernel_verdict
        return quality, unc, f"{reason} (chrony not used: {verdict.reason})", info
    quality, reason = verdict.quality, verdict.reason
    if discrepancy:  # the TAI offset doubt stands whatever bounds the error
        quality, reason = max(quality, ClockQuality.DEGRADED), f"{reason}; {discrepancy}"
    return quality, saturate_uncertainty(verdict.bound_ns), reason, info


def _snapshot(chrony: ChronyHealth | None = None) -> _CpuState:
    raw = _gettime(_CLOCK_TAI)
    valid_until = raw + SNAPSHOT_VALID_S * 1_000_000_000
    try:
        ks = read_kernel_sync()
    except ClockError as err:
        # Without the kernel's word we cannot know the TAI offset or the error.
        table = leap_table()
        offset = table.offset_at_utc(time.time())
        reason = f"adjtimex failed ({err}): sync state unknown"
        corr = {"applied_s": offset, "table": table.origin, "why": "kernel TAI offset unreadable; assumed 0"}
        return _CpuState(
            raw, valid_until, offset * 10**9, ClockQuality.UNKNOWN, UNCERTAINTY_SATURATED, reason, None, corr
        )
    table = leap_table()
    utc_s = time.time()
    table_offset = table.offset_at_utc(utc_s)
    expired = table.expires_unix_s is not None and utc_s > table.expires_unix_s
    offset_s, why, discrepancy = tai_correction(ks.tai_s, table_offset, expired, table.origin)
    corr = {
        "kernel_tai_offset_s": ks.tai_s,
        "applied_s": offset_s,
        "table": table.origin,
        "table_expires_unix_s": table.expires_unix_s,
        "table_expired": expired,
        "why": why,
    }
    expired_doubt = "kernel TAI offset is 0 and the leap-second table has expired" if ks.tai_s == 0 and expired else ""
    kernel_verdict = _judge(ks, expired, ks.tai_s == 0, discrepancy)
    quality, unc, reason, chrony_info = _with_chrony(kernel_verdict, chrony, discrepancy or expired_doubt)
    Timestamp(raw + offset_s * 10**9, TsSource.CPU, quality, unc)  # validates what the hot path will reuse
    return _CpuState(raw, valid_until, offset_s * 10**9, quality, unc, reason, ks, corr, chrony_info)


class CpuClock:
    """CLOCK_TAI with honest quality from adjtimex; ``ts_source`` CPU."""

    name = "cpu"

    def __init__(self, *, background: bool = True, chrony: ChronyHealth | bool | None = True) -> None:
        # chrony: True = this host's chronyd ($TEMPOTRACE_CHRONY), False = kernel rule only, or a ChronyHealth.
        self._chrony = shared_health() if chrony is True else (chrony or None)
        if self._chrony is not None:
            self._chrony.poll()  # one bounded exchange, before the first stamp
        self._state = _snapshot(self._chrony)
        if background:
            refresh.register(self)

    @property
    def _state(self) -> _CpuState:
        return self._snap

    @_state.setter
    def _state(self, st: _CpuState) -> None:
        # What now() needs, as one exact tuple: the interpreter unpacks an
        # exact tuple in a single specialised step (a dataclass or NamedTuple
        # costs an attribute load or an iterator per field). One store, so a
        # reader sees the old snapshot or the new one, never a mix.
        self._hot = (st.read_at_ns, st.valid_until_ns, st.offset_ns, st.quality, st.uncertainty_ns)
        # The same mapping for the native stamp (otel/stamp.py), which reads
        # CLOCK_TAI itself: (clock id, valid from, valid until, offset,
        # quality, bound, source), replaced whole like _hot.
        self.raw_mapping = (_CLOCK_TAI, *self._hot, int(_CPU))
        self._snap = st

    def refresh(self) -> None:
        """Ask chronyd and re-read the kernel state (the refresher thread, ~1/s; the only I/O)."""
        if self._chrony is not None:
            self._chrony.poll()
        self._state = _snapshot(self._chrony)

    def now(self) -> Timestamp:
        # The hottest call in the SDK: one unpack, one clock read, one record.
        read_at, valid_until, offset, quality, unc = self._hot
        t = _gettime(_CLOCK_TAI)
        if read_at <= t <= valid_until:
            return Timestamp(t + offset, _CPU, quality, unc)
        return self._resnapshot()

    def _resnapshot(self) -> Timestamp:
        # Stale (the refresher stalled) or the clock stepped back: re-read
        # the kernel state inline, then read the clock again.
        st = _snapshot(self._chrony)  # no I/O: chronyd's last answer, aged
        self._state = st
        return Timestamp(_gettime(_CLOCK_TAI) + st.offset_ns, _CPU, st.quality, st.uncertainty_ns)

    @property
    def reason(self) -> str:
        return self._state.reason

    def describe(self) -> dict[str, Any]:
        st = self._state
        return {
            "name": self.name,
            "ts_source": TsSource.CPU.name,
            "clock": "CLOCK_TAI",
            "quality": st.quality.name,
            "uncertainty_ns": st.uncertainty_ns,
            "reason": st.reason,
            "kernel": st.kernel.as_dict() if st.kernel is not None else None,
            "tai_correction": st.correction,
            "chrony": st.chrony() if st.chrony is not None else None,
            "native": native_status().as_dict(),
        }
