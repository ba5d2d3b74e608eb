"""SW_GCC calibrated source (spec/clocks.md §SW_GCC): fit, bound, recalibration on rate change."""

from __future__ import annotations

import random
import time
from typing import Any

import pytest

from tempotrace_sdk.clocks import Timestamp
from tempotrace_sdk.clocks.calibrated import CalibratedClock, fit_pairs
from tempotrace_sdk.wire.layout import ClockQuality, TsSource


class World:
    """True TAI advancing a fixed step per reference read, plus a counter with its own rate and jitter."""

    def __init__(self, ticks_per_ns: float = 1.5, jitter_ns: float = 20.0, seed: int = 7) -> None:
        self.true_ns = 1_800_000_000_000_000_000
        self.ticks_per_ns = ticks_per_ns
        self.tick_base = 10**12
        self.tick_at_true = self.true_ns
        self.jitter_ns = jitter_ns
        self.rng = random.Random(seed)

    def advance(self, ns: int) -> None:
        self.true_ns += ns

    def counter(self) -> int:
        self.advance(50)
        noise = self.rng.gauss(0, self.jitter_ns)
        return int(self.tick_base + (self.true_ns - self.tick_at_true + noise) * self.ticks_per_ns)

    def change_rate(self, ticks_per_ns: float) -> None:
        """DVFS: keep the counter continuous, change its slope."""
        self.tick_base = int(self.tick_base + (self.true_ns - self.tick_at_true) * self.ticks_per_ns)
        self.tick_at_true = self.true_ns
        self.ticks_per_ns = ticks_per_ns


class Reference:
    name = "ref"

    def __init__(self, world: World, quality: ClockQuality = ClockQuality.OK, unc: int = 100) -> None:
        self.world, self.quality, self.unc = world, quality, unc

    def now(self) -> Timestamp:
        self.world.advance(30)
        return Timestamp(self.world.true_ns, TsSource.GTE, self.quality, self.unc)

    def describe(self) -> dict[str, Any]:
        return {"name": self.name}


def _sleeper(world: World) -> Any:
    return lambda seconds: world.advance(int(seconds * 1e9))


def test_fit_recovers_offset_and_rate_exactly_without_noise() -> None:
    pairs = [(1000 + 3 * i, 1_800_000_000_000_005_000 + 2 * 3 * i, 0.0) for i in range(10)]
    c0, tai0, frac, rate, rate_se, sigma = fit_pairs(pairs)
    assert (c0, tai0, rate) == (1000, 1_800_000_000_000_005_000, pytest.approx(2.0))
    assert frac == pytest.approx(0.0, abs=1e-6)
    assert sigma == pytest.approx(0.0, abs=1e-9) and rate_se == pytest.approx(0.0, abs=1e-12)


@pytest.mark.parametrize(("pairs", "words"), [([(1, 1, 0.0)] * 2, "at least 3"), ([(5, 1, 0.0)] * 4, "advance")])
def test_fit_rejects_degenerate_input(pairs: list[tuple[int, int, float]], words: str) -> None:
    with pytest.raises(ValueError, match=words):
        fit_pairs(pairs)


def test_calibrated_time_is_within_its_bound() -> None:
    world = World()
    clock = CalibratedClock(world.counter, Reference(world), pairs=32, background=False, sleep=_sleeper(world))
    for _ in range(200):
        ts = clock.now()
        truth = world.true_ns
        assert ts.ts_source is TsSource.SW_GCC and ts.clk_quality is ClockQuality.OK
        assert abs(ts.ptp_ns - truth) <= ts.uncertainty_ns, (ts, truth)
        world.advance(1_000)
    assert 100 < clock.describe()["base_bound_ns"] < 1_000  # 3σ of 20 ns jitter + ref 100 ns + sandwich


def test_bound_grows_with_time_since_calibration() -> None:
    world = World(jitter_ns=0.0)
    clock = CalibratedClock(world.counter, Reference(world), background=False, sleep=_sleeper(world))
    first = clock.now().uncertainty_ns
    world.advance(100_000_000)  # 0.1 s at 50 ppm: +5 µs
    later = clock.now().uncertainty_ns
    assert later - first == pytest.approx(5_000, abs=10)


def test_rate_change_is_detected_and_recalibrated() -> None:
    world = World(jitter_ns=5.0)
    clock = CalibratedClock(
        world.counter, Reference(world), background=False, recalibrate_s=3600, sleep=_sleeper(world)
    )
    clock.refresh()
    assert clock.recalibrations == ["initial"]  # on track: no recalibration
    world.change_rate(1.5 * (1 + 2e-3))  # 2000 ppm jump
    world.advance(10_000_000)
    stale = clock.now()
    assert abs(stale.ptp_ns - world.true_ns) > stale.uncertainty_ns  # the old fit is now wrong...
    clock.refresh()
    assert clock.recalibrations[-1].startswith("rate change")  # ...and the refresher notices
    fresh = clock.now()
    assert abs(fresh.ptp_ns - world.true_ns) <= fresh.uncertainty_ns


def test_scheduled_recalibration() -> None:
    world = World()
    clock = CalibratedClock(world.counter, Reference(world), background=False, recalibrate_s=0.0, sleep=_sleeper(world))
    clock.refresh()
    assert clock.recalibrations == ["initial", "scheduled"]


@pytest.mark.parametrize("quality", [ClockQuality.DEGRADED, ClockQuality.UNKNOWN])
def test_never_better_than_the_reference(quality: ClockQuality) -> None:
    world = World()
    ts = CalibratedClock(world.counter, Reference(world, quality), background=False, sleep=_sleeper(world)).now()
    assert ts.clk_quality is quality
    if quality is ClockQuality.UNKNOWN:
        assert ts.uncertainty_ns == 65535


def test_real_counter_against_real_clock() -> None:
    """CLOCK_MONOTONIC_RAW calibrated against CLOCK_TAI (labelled OK only for this test) tracks it closely."""

    class TaiAsOk:
        name = "tai"

        def now(self) -> Timestamp:
            return Timestamp(time.clock_gettime_ns(time.CLOCK_TAI), TsSource.CPU, ClockQuality.OK, 0)

        def describe(self) -> dict[str, Any]:
            return {}

    raw = time.CLOCK_MONOTONIC_RAW
    clock = CalibratedClock(lambda: time.clock_gettime_ns(raw), TaiAsOk(), background=False)
    for _ in range(5):
        # Sandwich the truth: on a busy VM a read can be delayed by tens of µs.
        lo = time.clock_gettime_ns(time.CLOCK_TAI)
        ts = clock.now()
        hi = time.clock_gettime_ns(time.CLOCK_TAI)
        assert lo - ts.uncertainty_ns <= ts.ptp_ns <= hi + ts.uncertainty_ns  # the bound holds on real clocks
        time.sleep(0.01)
    assert clock.describe()["rate_ns_per_tick"] == pytest.approx(1.0, abs=1e-3)


def test_now_agrees_with_the_calibration_and_bound_exactly() -> None:
    """now()'s inlined arithmetic gives exactly Calibration.predict and saturate(bound_at) at the same tick."""
    from tempotrace_sdk.clocks import saturate_uncertainty

    world = World()
    ticks: list[int] = []

    def counter() -> int:
        ticks.append(world.counter())
        return ticks[-1]

    clock = CalibratedClock(counter, Reference(world), pairs=16, background=False, sleep=_sleeper(world))
    cal = clock._cal
    for step in (0, 1_000, 10**6, 10**9, 3 * 10**10):
        world.advance(step)
        ts = clock.now()
        tick = ticks[-1]
        assert ts.ptp_ns == cal.predict(tick)
        assert ts.uncertainty_ns == saturate_uncertainty(clock.bound_at(tick, cal))
        assert ts == Timestamp(ts.ptp_ns, TsSource.SW_GCC, ClockQuality.OK, ts.uncertainty_ns)


def test_a_prediction_outside_the_field_is_unknown_not_an_invalid_timestamp() -> None:
    """A counter far outside the calibrated range cannot produce ptp_ns beyond 0..2^63-1."""
    world = World(jitter_ns=0.0)
    value = [0]
    clock = CalibratedClock(world.counter, Reference(world), background=False, sleep=_sleeper(world))
    clock._counter = lambda: value[0]
    for tick, expected in ((-(10**22), 0), (10**22, 2**63 - 1)):
        value[0] = tick
        ts = clock.now()
        assert ts == Timestamp(expected, TsSource.SW_GCC, ClockQuality.UNKNOWN, 65535)
