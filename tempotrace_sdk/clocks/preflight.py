"""The pre-flight gate: does this host's clock meet a job's requirement, and why not.

A training job calls ``preflight(ClockQuality.OK, max_uncertainty_ns=...)``
before it starts and refuses to run when ``ok`` is False (seed 001's
practice); the CLI turns the result into an exit code.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from ..errors import ClockError
from ..wire.layout import UNCERTAINTY_SATURATED, ClockQuality, TsSource
from .base import ClockSource, Timestamp

__all__ = ["PreflightResult", "preflight"]


@dataclass(frozen=True)
class PreflightResult:
    """The gate's verdict: ``ok``, the reason in words, and the reading it judged."""

    ok: bool
    reason: str
    timestamp: Timestamp
    source: str

    def as_dict(self) -> dict[str, Any]:
        ts = self.timestamp
        return {
            "ok": self.ok,
            "reason": self.reason,
            "source": self.source,
            "timestamp": {
                "ptp_ns": str(ts.ptp_ns),  # decimal string: JSON readers may not hold int64
                "ts_source": ts.ts_source.name,
                "clk_quality": ts.clk_quality.name,
                "uncertainty_ns": ts.uncertainty_ns,
            },
        }


def _source_reason(clock: ClockSource) -> str:
    try:
        info = clock.describe()
    except Exception as err:  # a foreign source's describe() must not break the gate
        return f"describe() failed: {err}"
    reason = info.get("reason")
    return str(reason) if reason else ""


def preflight(
    require: ClockQuality,
    max_uncertainty_ns: int | None = None,
    clock: ClockSource | None = None,
) -> PreflightResult:
    """Judge ``clock`` (default: ``select_clock()``) against a required quality and bound.

    Quality order is OK < DEGRADED < UNKNOWN: requiring DEGRADED accepts OK
    and DEGRADED. ``max_uncertainty_ns`` (0..65534) additionally caps the
    3-sigma bound; a saturated bound (65535) never meets a cap.
    """
    require = ClockQuality(require)
    if max_uncertainty_ns is not None and not 0 <= max_uncertainty_ns < UNCERTAINTY_SATURATED:
        raise ValueError(
            f"max_uncertainty_ns: must be 0..{UNCERTAINTY_SATURATED - 1} (65535 means 'saturated'), "
            f"got {max_uncertainty_ns}"
        )
    if clock is None:
        from .select import select_clock

        try:
            clock = select_clock()
        except (ClockError, ValueError) as err:
            ts = Timestamp(0, TsSource.CPU, ClockQuality.UNKNOWN, UNCERTAINTY_SATURATED)
            return PreflightResult(False, f"no clock source: {err}", ts, "none")
    try:
        ts = clock.now()
    except ClockError as err:
        ts = Timestamp(0, TsSource.CPU, ClockQuality.UNKNOWN, UNCERTAINTY_SATURATED)
        return PreflightResult(False, f"clock {clock.name} could not be read: {err}", ts, clock.name)
    why = _source_reason(clock)
    suffix = f" ({why})" if why else ""
    if ts.clk_quality > require:
        reason = f"clock {clock.name} quality is {ts.clk_quality.name}, required {require.name} or better{suffix}"
        return PreflightResult(False, reason, ts, clock.name)
    if max_uncertainty_ns is not None and ts.uncertainty_ns > max_uncertainty_ns:
        shown = "saturated (>= 65535 ns)" if ts.uncertainty_ns >= UNCERTAINTY_SATURATED else f"{ts.uncertainty_ns} ns"
        reason = f"clock {clock.name} uncertainty is {shown}, required <= {max_uncertainty_ns} ns{suffix}"
        return PreflightResult(False, reason, ts, clock.name)
    reason = f"clock {clock.name} is {ts.clk_quality.name} with uncertainty {ts.uncertainty_ns} ns{suffix}"
    return PreflightResult(True, reason, ts, clock.name)
