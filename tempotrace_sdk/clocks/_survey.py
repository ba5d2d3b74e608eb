"""``survey()``: every clock source on this host, what it says, and why the others are absent.

JSON-ready (the CLI prints it as is): plain dicts, lists, strings, ints and
bools; 64-bit nanosecond values are decimal strings.
"""

from __future__ import annotations

import glob
import os
from typing import Any

from ..errors import ClockError
from ._native import native, native_status
from .cpu import CpuClock
from .phc import survey_devices
from .ptp4l import DEFAULT_UDS, survey_ptp4l

__all__ = ["survey"]


def _phc_section() -> dict[str, Any]:
    paths = sorted(glob.glob("/dev/ptp[0-9]*"))
    if not paths:
        return {"devices": [], "why_none": "no /dev/ptp* device on this host (no NIC with a PTP hardware clock)"}
    if native() is None:
        why = f"PHC reads need the native module: {native_status().reason}"
        return {"devices": [{"path": p, "usable": False, "why": why} for p in paths]}
    return {"devices": survey_devices(paths)}


def _ptp4l_section() -> dict[str, Any]:
    return survey_ptp4l(os.environ.get("TEMPOTRACE_PTP4L_UDS", DEFAULT_UDS))


def survey() -> dict[str, Any]:
    """Every source, its state and the Timestamp fields a span would get now."""
    from .select import auto_choice

    cpu = CpuClock(background=False)
    report: dict[str, Any] = {
        "native": native_status().as_dict(),
        "cpu": cpu.describe(),
        "phc": _phc_section(),
        "ptp4l": _ptp4l_section(),
    }
    try:
        chosen, why = auto_choice()
        ts = chosen.now()
        report["auto"] = {"source": chosen.name, "why": why}
        report["now"] = {
            "source": chosen.name,
            "ptp_ns": str(ts.ptp_ns),
            "ts_source": ts.ts_source.name,
            "clk_quality": ts.clk_quality.name,
            "uncertainty_ns": ts.uncertainty_ns,
        }
    except (ClockError, ValueError) as err:
        report["auto"] = {"source": None, "why": f"no usable source: {err}"}
    return report
