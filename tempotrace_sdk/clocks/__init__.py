"""Clock sources whose uncertainty is honest (spec/clocks.md)."""

from .base import ClockSource, Timestamp, saturate_uncertainty
from .leapseconds import tai_to_utc_ns, utc_to_tai_ns

__all__ = ["ClockSource", "Timestamp", "saturate_uncertainty", "tai_to_utc_ns", "utc_to_tai_ns"]
