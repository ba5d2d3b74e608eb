"""Clock sources whose uncertainty is honest (spec/clocks.md)."""

from .base import ClockSource, Timestamp, saturate_uncertainty
from .cpu import CpuClock
from .leapseconds import tai_to_utc_ns, utc_to_tai_ns
from .preflight import PreflightResult, preflight
from .select import ClockSpecError, select_clock
from .survey import survey

__all__ = [
    "ClockSource",
    "ClockSpecError",
    "CpuClock",
    "PreflightResult",
    "Timestamp",
    "preflight",
    "saturate_uncertainty",
    "select_clock",
    "survey",
    "tai_to_utc_ns",
    "utc_to_tai_ns",
]
