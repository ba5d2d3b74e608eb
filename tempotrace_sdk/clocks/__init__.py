"""Clock sources whose uncertainty is honest (spec/clocks.md).

``select_clock()`` picks a source (``TEMPOTRACE_CLOCK``), ``preflight()``
gates a job on clock quality, ``survey()`` explains every source on the host.

The interface (``Timestamp``, ``ClockSource``) and the leap-second helpers are
imported eagerly; the sources, which need ctypes, sockets, threads or the
native module, load on first use (PEP 562), because ``import tempotrace_sdk``
imports ``clocks.base`` and so runs this file: it must stay cheap and sans-IO.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from .._lazy import lazy_attributes
from .base import ClockSource, Timestamp, saturate_uncertainty
from .leapseconds import tai_to_utc_ns, utc_to_tai_ns

# Light (base and errors only), so imported eagerly: the submodule is then
# loaded before the function is bound here, and ``clocks.preflight`` stays the
# function whoever imports the submodule later.
from .preflight import PreflightResult, preflight

#: Public names served lazily: name -> submodule that defines it.
_LAZY = {
    "NativeStatus": "._native",
    "native_status": "._native",
    "CalibratedClock": ".calibrated",
    "CpuClock": ".cpu",
    "KernelSync": ".kernel",
    "read_kernel_sync": ".kernel",
    "PhcClock": ".phc",
    "PhcDevice": ".phc",
    "PhcReading": ".phc",
    "Ptp4lClient": ".ptp4l",
    "Ptp4lStatus": ".ptp4l",
    "Ptp4lHealth": ".ptpquality",
    "SyncHealth": ".ptpquality",
    "ClockSpecError": ".select",
    "select_clock": ".select",
    "survey": "._survey",  # module named apart from its function, so neither shadows the other
}

if TYPE_CHECKING:
    from ._native import NativeStatus, native_status
    from ._survey import survey
    from .calibrated import CalibratedClock
    from .cpu import CpuClock
    from .kernel import KernelSync, read_kernel_sync
    from .phc import PhcClock, PhcDevice, PhcReading
    from .ptp4l import Ptp4lClient, Ptp4lStatus
    from .ptpquality import Ptp4lHealth, SyncHealth
    from .select import ClockSpecError, select_clock


__getattr__, __dir__ = lazy_attributes(__name__, globals(), _LAZY)


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
