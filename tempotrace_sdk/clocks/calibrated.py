"""SW_GCC: a calibrated source mapping any monotonic device counter to TAI.

Generic over the counter: anything that returns a monotonically increasing
integer (a GPU globaltimer, a TSC, CLOCK_MONOTONIC_RAW) can be plugged in.
Calibration takes paired samples (reference TAI before, counter, reference
after), fits TAI = offset + rate × (counter − c0) by least squares, and
bounds the error of the mapping by:

    3σ of the fit residuals + half the widest reference sandwich used
    + the reference's own uncertainty at calibration
    + 3 × the slope's standard error × ticks since the first pair
    + drift_ppb × time since calibration

Pairs are spread over ``spacing_s`` each so the slope has a baseline.

It recalibrates on a schedule and when a check pair strays outside that
bound (a rate change, e.g. DVFS on a GPU clock), from the refresher thread,
never on the hot path. Quality is never better than the reference's was.
"""

from __future__ import annotations

import math
import statistics
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from ..wire.layout import PTP_NS_MAX, UNCERTAINTY_SATURATED, ClockQuality, TsSource
from . import refresh
from .base import ClockSource, Timestamp, saturate_uncertainty

__all__ = ["DEFAULT_DRIFT_PPB", "DEFAULT_PAIRS", "CalibratedClock", "Calibration", "fit_pairs"]

#: Pairs per calibration: enough for a stable σ, cheap enough to redo often.
DEFAULT_PAIRS = 16
#: Growth of the bound after calibration: ClockBound's 50 PPM oscillator bound
#: (a counter whose frequency can change under DVFS earns no better).
DEFAULT_DRIFT_PPB = 50_000.0
#: Default recalibration period.
DEFAULT_RECALIBRATE_S = 10.0
#: Sandwiches tried per pair; the narrowest is kept.
SANDWICH_TRIES = 3
#: Pause between calibration pairs (16 pairs: ~30 ms, in the refresher thread).
DEFAULT_SPACING_S = 0.002


_UNKNOWN = ClockQuality.UNKNOWN
_SW_GCC = TsSource.SW_GCC


@dataclass(frozen=True)
class Calibration:
    """One fit: TAI ns = tai0 + rate × (counter − c0)."""

    c0: int
    tai0: int  # integer anchor: float64 cannot hold TAI ns (2^60) to the nanosecond
    tai0_frac: float
    rate: float  # TAI ns per counter tick
    rate_se: float  # standard error of the rate
    sigma_ns: float
    half_width_ns: float
    reference_unc_ns: float
    quality: ClockQuality
    pairs: int
    at_counter: int  # counter value at the end of calibration
    reason: str

    @property
    def base_bound_ns(self) -> float:
        return 3 * self.sigma_ns + self.half_width_ns + self.reference_unc_ns

    def predict(self, counter: int) -> int:
        return self.tai0 + round(self.tai0_frac + self.rate * (counter - self.c0))


def fit_pairs(pairs: list[tuple[int, int, float]]) -> tuple[int, int, float, float, float, float]:
    """Least squares over (counter, reference_mid_ns, half_width).

    Returns (c0, tai0, tai0_frac, rate, rate s.e., σ of residuals): TAI at
    counter c0 is tai0 + tai0_frac. Both axes are shifted by the first pair
    (as integers) so the floats only ever hold small differences.
    """
    if len(pairs) < 3:
        raise ValueError(f"pairs: need at least 3 for offset, rate and σ, got {len(pairs)}")
    c0 = pairs[0][0]
    xs = [float(c - c0) for c, _, _ in pairs]
    y0 = pairs[0][1]
    ys = [float(y - y0) for _, y, _ in pairs]
    mx, my = statistics.fmean(xs), statistics.fmean(ys)
    sxx = sum((x - mx) ** 2 for x in xs)
    if sxx == 0:
        raise ValueError("pairs: the counter did not advance during calibration")
    rate = sum((x - mx) * (y - my) for x, y in zip(xs, ys, strict=True)) / sxx
    intercept = my - rate * mx
    residuals = [y - (intercept + rate * x) for x, y in zip(xs, ys, strict=True)]
    # Two fitted parameters: n - 2 degrees of freedom.
    sigma = math.sqrt(sum(r * r for r in residuals) / (len(pairs) - 2))
    return c0, y0, intercept, rate, sigma / math.sqrt(sxx), sigma


class CalibratedClock:
    """ts_source SW_GCC over ``counter`` (ticks), calibrated against ``reference``."""

    def __init__(
        self,
        counter: Callable[[], int],
        reference: ClockSource,
        *,
        name: str = "gcc",
        pairs: int = DEFAULT_PAIRS,
        recalibrate_s: float = DEFAULT_RECALIBRATE_S,
        drift_ppb: float = DEFAULT_DRIFT_PPB,
        spacing_s: float = DEFAULT_SPACING_S,
        sleep: Callable[[float], None] = time.sleep,
        background: bool = True,
    ) -> None:
        if pairs < 3:
            raise ValueError(f"pairs: need at least 3, got {pairs}")
        self.name = f"sw_gcc:{name}"
        self._counter = counter
        self._reference = reference
        self._pairs = pairs
        self.recalibrate_s = recalibrate_s
        self.drift_ppb = drift_ppb
        self._spacing_s = spacing_s
        self._sleep = sleep
        self._lock = threading.Lock()
        self.recalibrations: list[str] = []  # why each recalibration happened (newest last)
        self._cal = self._calibrate("initial")
        self._cal_mono = time.monotonic()
        if background:
            refresh.register(self)

    def _calibrate(self, why: str) -> Calibration:
        samples: list[tuple[int, int, float]] = []
        worst_unc = 0
        quality = ClockQuality.OK
        for i in range(self._pairs):
            if i:
                self._sleep(self._spacing_s)
            # Narrowest of a few sandwiches, as sysoff does: a preempted read
            # makes a wide sandwich and would otherwise skew the fit.
            best: tuple[int, int, float] | None = None
            for _ in range(SANDWICH_TRIES):
                before = self._reference.now()
                tick = self._counter()
                after = self._reference.now()
                width = after.ptp_ns - before.ptp_ns
                if width >= 0 and (best is None or width / 2 < best[2]):
                    best = (tick, before.ptp_ns + width // 2, width / 2)
                worst_unc = max(worst_unc, before.uncertainty_ns, after.uncertainty_ns)
                quality = max(quality, before.clk_quality, after.clk_quality)
            if best is not None:
                samples.append(best)
        c0, tai0, frac, rate, rate_se, sigma = fit_pairs(samples)
        half_width = max(w for _, _, w in samples)
        reason = f"{why}: {len(samples)} pairs, σ {sigma:.1f} ns, rate {rate:.9f} ns/tick vs {self._reference.name}"
        self.recalibrations.append(why)
        del self.recalibrations[:-20]
        return Calibration(c0, tai0, frac, rate, rate_se, sigma, half_width, float(worst_unc),
                           ClockQuality(quality), len(samples), samples[-1][0], reason)  # fmt: skip

    def bound_at(self, counter: int, cal: Calibration | None = None) -> float:
        cal = cal or self._cal
        elapsed_ns = max(0.0, (counter - cal.at_counter) * cal.rate)
        slope_ns = 3 * cal.rate_se * abs(counter - cal.c0)
        return cal.base_bound_ns + slope_ns + self.drift_ppb * elapsed_ns / 1e9

    def refresh(self) -> None:
        """Recalibrate when due, or when a check pair falls outside the current bound (rate change)."""
        with self._lock:
            if time.monotonic() - self._cal_mono >= self.recalibrate_s:
                why = "scheduled"
            else:
                before = self._reference.now()
                tick = self._counter()
                after = self._reference.now()
                error = abs(before.ptp_ns + (after.ptp_ns - before.ptp_ns) // 2 - self._cal.predict(tick))
                allowed = self.bound_at(tick) + (after.ptp_ns - before.ptp_ns) / 2 + after.uncertainty_ns
                if error <= allowed:
                    return
                why = f"rate change: check pair off by {error:.0f} ns > bound {allowed:.0f} ns"
            self._cal = self._calibrate(why)
            self._cal_mono = time.monotonic()

    def now(self) -> Timestamp:
        # Calibration.predict and bound_at inlined (the same expressions in
        # the same order, so the same floats): four Python calls fewer on
        # the hot path.
        cal = self._cal
        tick = self._counter()
        ptp_ns = cal.tai0 + round(cal.tai0_frac + cal.rate * (tick - cal.c0))
        if cal.quality is _UNKNOWN or not 0 <= ptp_ns <= PTP_NS_MAX:
            # (A prediction outside the field's range is no time at all:
            # clamped, and UNKNOWN, so no invalid Timestamp can exist.)
            ptp_ns = min(max(0, ptp_ns), PTP_NS_MAX)
            return Timestamp(ptp_ns, _SW_GCC, _UNKNOWN, UNCERTAINTY_SATURATED)
        elapsed_ns = max(0.0, (tick - cal.at_counter) * cal.rate)
        slope_ns = 3 * cal.rate_se * abs(tick - cal.c0)
        base_ns = 3 * cal.sigma_ns + cal.half_width_ns + cal.reference_unc_ns
        unc = saturate_uncertainty(base_ns + slope_ns + self.drift_ppb * elapsed_ns / 1e9)
        return Timestamp(ptp_ns, _SW_GCC, cal.quality, unc)

    def describe(self) -> dict[str, Any]:
        cal = self._cal
        return {
            "name": self.name,
            "ts_source": TsSource.SW_GCC.name,
            "reference": self._reference.name,
            "quality": cal.quality.name,
            "rate_ns_per_tick": cal.rate,
            "sigma_ns": round(cal.sigma_ns, 3),
            "base_bound_ns": round(cal.base_bound_ns, 1),
            "drift_ppb": self.drift_ppb,
            "calibration_age_s": round(time.monotonic() - self._cal_mono, 3),
            "recalibrations": list(self.recalibrations),
            "reason": cal.reason,
        }
