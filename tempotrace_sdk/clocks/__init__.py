"""Clock sources whose uncertainty is honest (spec/clocks.md).

``select_clock()`` picks a source (``TEMPOTRACE_CLOCK``), ``preflight()``
gates a job on clock quality, ``survey()`` explains every source on the host.
"""

from ._native import NativeStatus, native_status
from .base import ClockSource, Timestamp, saturate_uncertainty
from .calibrated import CalibratedClock
from .cpu import CpuClock
from .kernel import KernelSync, read_kernel_sync
from .leapseconds import tai_to_utc_ns, utc_to_tai_ns
from .phc import PhcClock, PhcDevice, PhcReading
from .preflight import PreflightResult, preflight
from .ptp4l import Ptp4lClient, Ptp4lStatus
from .ptpquality import Ptp4lHealth, SyncHealth
from .select import ClockSpecError, select_clock
from .survey import survey

__all__ = [
    "CalibratedClock",
    "ClockSource",
    "ClockSpecError",
    "CpuClock",
    "KernelSync",
    "NativeStatus",
    "PhcClock",
    "PhcDevice",
    "PhcReading",
    "PreflightResult",
    "Ptp4lClient",
    "Ptp4lHealth",
    "Ptp4lStatus",
    "SyncHealth",
    "Timestamp",
    "native_status",
    "preflight",
    "read_kernel_sync",
    "saturate_uncertainty",
    "select_clock",
    "survey",
    "tai_to_utc_ns",
    "utc_to_tai_ns",
]
