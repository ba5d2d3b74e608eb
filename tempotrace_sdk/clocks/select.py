"""Choosing a clock source from a spec string or ``TEMPOTRACE_CLOCK``.

Forms (spec/clocks.md §Selection):
  auto            PHC when one is usable and ptp4l is reachable, else CPU
  cpu             CLOCK_TAI judged by adjtimex
  phc:/dev/ptpN   that PHC device (native module required)
  phc:<ifname>    the PHC behind a network interface (ETHTOOL_GET_TS_INFO)
  sim:<anything>  tempotrace_sdk.clocks.simulated.from_spec(<anything>)
"""

from __future__ import annotations

import glob
import importlib
import os

from ..errors import ClockError, TempoTraceError
from . import refresh
from .base import ClockSource
from .cpu import CpuClock
from .phc import PhcClock

__all__ = ["CLOCK_ENV", "PHC_ENV", "VALID_FORMS", "ClockSpecError", "auto_choice", "select_clock"]

#: Which source to use; default "auto".
CLOCK_ENV = "TEMPOTRACE_CLOCK"
#: Which PHC "auto" should try first (a /dev/ptpN path or an interface name).
PHC_ENV = "TEMPOTRACE_PHC"

VALID_FORMS = ("auto", "cpu", "phc:/dev/ptpN", "phc:<interface>", "sim:<spec>")


class ClockSpecError(TempoTraceError, ValueError):
    """A clock spec string is not one of the valid forms."""

    def __init__(self, spec: str, rule: str) -> None:
        self.spec = spec
        super().__init__(f"clock spec {spec!r}: {rule}; valid forms: {', '.join(VALID_FORMS)}")


def _phc_candidates() -> list[str]:
    configured = os.environ.get(PHC_ENV, "").strip()
    return [configured] if configured else sorted(glob.glob("/dev/ptp[0-9]*"))


def auto_choice() -> tuple[ClockSource, str]:
    """What "auto" picks, and why (in words, for survey/CLI)."""
    candidates = _phc_candidates()
    if not candidates:
        return CpuClock(), "CPU (CLOCK_TAI): no /dev/ptp* device and $TEMPOTRACE_PHC unset"
    reasons: list[str] = []
    for target in candidates:
        try:
            source = PhcClock(target, background=False)
        except (ClockError, ValueError) as err:
            reasons.append(f"{target}: {err}")
            continue
        if source.ptp4l_reachable():
            refresh.register(source)  # only the chosen one is kept fresh
            return source, f"PHC {source.name}: readable and ptp4l answers on {source.uds_path}"
        reasons.append(f"{target}: readable but ptp4l not reachable at {source.uds_path}")
        source.close()
    return CpuClock(), "CPU (CLOCK_TAI): " + "; ".join(reasons)


def select_clock(spec: str | None = None) -> ClockSource:
    """A clock source for ``spec`` (default: $TEMPOTRACE_CLOCK, else "auto").

    Raises ClockSpecError (a ValueError) for an unknown form, ClockError (an
    OSError) when the named device cannot be opened.
    """
    if spec is None:
        spec = os.environ.get(CLOCK_ENV, "").strip() or "auto"
    kind, sep, rest = spec.partition(":")
    kind = kind.strip().lower()
    if kind == "auto" and not sep:
        return auto_choice()[0]
    if kind == "cpu" and not sep:
        return CpuClock()
    if kind == "phc":
        if not rest:
            raise ClockSpecError(spec, "phc needs a device path or interface name after ':'")
        return PhcClock(rest)
    if kind == "sim":
        # The demo engineer's module, imported only when asked for.
        simulated = importlib.import_module(".simulated", __package__)
        source = simulated.from_spec(rest)
        if not isinstance(source, ClockSource):
            raise TypeError(f"simulated.from_spec({rest!r}) returned {type(source).__name__}, not a ClockSource")
        return source
    raise ClockSpecError(spec, "unknown clock source")
