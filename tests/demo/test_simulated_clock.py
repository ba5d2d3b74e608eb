"""The simulated clock source: known error on top of the real clock, honest labels."""

from __future__ import annotations

import time

import pytest

from tempotrace_sdk import ClockError, ClockQuality, ClockSource, TsSource
from tempotrace_sdk.clocks.leapseconds import utc_to_tai_ns
from tempotrace_sdk.clocks.simulated import PROFILES, SimulatedClock, from_spec


def _mean_error(clock: SimulatedClock, samples: int = 200) -> float:
    total = 0.0
    for _ in range(samples):
        before = utc_to_tai_ns(time.time_ns())
        ts = clock.now()
        after = utc_to_tai_ns(time.time_ns())
        total += ts.ptp_ns - (before + after) / 2
    return total / samples


def test_is_a_clock_source_and_says_it_is_simulated() -> None:
    clock = from_spec("ptp")
    assert isinstance(clock, ClockSource)
    assert clock.name == "sim:ptp"
    info = clock.describe()
    assert info["simulated"] is True and info["kind"] == "simulated"
    assert "GTE" in info["imitates"]
    assert info["declared_bound_ns"] == 220


@pytest.mark.parametrize(
    ("spec", "source", "quality", "bound"),
    [
        ("ptp", TsSource.GTE, ClockQuality.OK, 220),
        # An NTP-class 3σ bound (1.5 ms) does not fit the uint16 field: it saturates.
        ("ntp", TsSource.CPU, ClockQuality.OK, 65535),
        ("liar", TsSource.GTE, ClockQuality.OK, 220),
        ("unsynced", TsSource.CPU, ClockQuality.UNKNOWN, 65535),
    ],
)
def test_profiles_claim_what_the_class_they_imitate_claims(
    spec: str, source: TsSource, quality: ClockQuality, bound: int
) -> None:
    ts = from_spec(spec).now()
    assert (ts.ts_source, ts.clk_quality, ts.uncertainty_ns) == (source, quality, bound)


def test_offset_is_applied_to_the_real_clock() -> None:
    """The measured mean error matches the configured offset (noise averages out)."""
    clock = from_spec("ntp,offset=-2ms,noise=0,drift=0")
    assert abs(_mean_error(clock) - (-2_000_000)) < 200_000  # reads take µs, not 200 µs
    plus = from_spec("ptp,offset=5ms,noise=0")
    assert abs(_mean_error(plus) - 5_000_000) < 200_000


def test_readings_keep_nanosecond_resolution() -> None:
    """ptp_ns is ~1.8e18: mixing it with floats would round every reading to 256 ns."""
    clock = from_spec("ptp,offset=35ns,noise=15ns")
    assert len({clock.now().ptp_ns % 256 for _ in range(50)}) > 10


def test_noise_is_seeded_and_reproducible() -> None:
    a = from_spec("ptp,noise=1ms,seed=42")
    b = from_spec("ptp,noise=1ms,seed=42")
    draws_a = [a._rng.random() for _ in range(5)]
    draws_b = [b._rng.random() for _ in range(5)]
    assert draws_a == draws_b
    assert from_spec("ptp,seed=1")._rng.random() != from_spec("ptp,seed=2")._rng.random()


def test_key_value_spec_without_profile() -> None:
    clock = from_spec("offset=40ns,noise=10ns,bound=300ns,source=SW_GCC,quality=DEGRADED,name=gpu-0")
    ts = clock.now()
    assert (ts.ts_source, ts.clk_quality, ts.uncertainty_ns) == (TsSource.SW_GCC, ClockQuality.DEGRADED, 300)
    assert clock.name == "sim:gpu-0"
    assert clock.describe()["true_offset_ns"] == 40.0


def test_honesty_follows_the_numbers_not_the_label() -> None:
    assert from_spec("ptp").describe()["honest"] is True
    assert from_spec("ntp").describe()["honest"] is True
    assert from_spec("liar").describe()["honest"] is False
    # A "ptp" 5 µs off breaks its 220 ns promise.
    assert from_spec("ptp,offset=5us").describe()["honest"] is False
    # A saturated claim ("at least 65,535 ns") cannot be broken, however far off the clock is.
    assert from_spec("ntp,offset=50ms").describe()["honest"] is True
    assert from_spec("ptp,offset=50ms,bound=1ms").describe()["honest"] is True
    assert from_spec("ptp,offset=50us,bound=40us").describe()["honest"] is False
    assert PROFILES["liar"].offset_ns > 1_000_000  # beyond a localhost HTTP hop


def test_drift_grows_the_error_with_time() -> None:
    clock = from_spec("ptp,offset=0,noise=0,drift=1000000")  # 1 ms per second
    start = clock._start_tai_ns
    assert clock.error_ns(start) == 0
    assert clock.error_ns(start + 2_000_000_000) == pytest.approx(2_000_000)


@pytest.mark.parametrize(
    ("spec", "words"),
    [
        ("", "empty"),
        ("gps", "unknown profile 'gps'"),
        ("ptp,offset=fast", "offset='fast' is not a duration"),
        ("ptp,colour=red", "unknown key 'colour'"),
        ("ptp,source=GPS", "source='GPS': must be one of GTE|SW_GCC|CPU"),
        ("ptp,quality=great", "must be one of OK|DEGRADED|UNKNOWN"),
        ("ptp,seed=x", "seed='x' is not an integer"),
        ("ptp,drift=lots", "drift='lots'"),
        ("ptp,name=has space", "name='has space'"),
        ("ptp,offset", "'offset' is not key=value"),
    ],
)
def test_bad_specs_name_the_part_that_is_wrong(spec: str, words: str) -> None:
    with pytest.raises(ClockError) as info:
        from_spec(spec)
    assert words in str(info.value)
    assert isinstance(info.value, OSError)


def test_an_honest_profile_never_breaks_its_bound_against_the_real_clock() -> None:
    """3σ Gaussian noise alone breaks a 3σ bound on ~0.27% of stamps; an honest clock must break it on none.

    σ = 20 µs, bound = 60 µs: the Gaussian tail beyond 3σ reaches µs past the bound, far more than
    the two real-clock reads that sandwich each stamp take, so an unclipped clock fails here.
    """
    clock = from_spec("offset=0,noise=20us,bound=60us,drift=0,seed=3")
    assert clock.describe()["honest"] is True
    bound = clock.now().uncertainty_ns
    worst = 0
    for _ in range(20_000):
        before = utc_to_tai_ns(time.time_ns())
        stamp = clock.now().ptp_ns
        after = utc_to_tai_ns(time.time_ns())
        # The truth at the stamp lies in [before, after]: the error is beyond the bound only
        # when the stamp is outside [before - bound, after + bound].
        worst = max(worst, before - bound - stamp, stamp - after - bound)
    assert worst <= 0, f"an honest clock broke its {bound} ns bound by {worst} ns"


def test_an_honest_profile_clips_its_error_exactly_at_the_bound() -> None:
    """With the truth pinned, every stamp's error is within the declared bound, offset and drift included."""
    clock = from_spec("offset=120ns,noise=60ns,bound=300ns,drift=0,seed=5")
    assert clock.describe()["honest"] is True
    truth = clock._start_tai_ns
    clock.true_tai_ns = lambda: truth  # type: ignore[method-assign]
    errors = [clock.now().ptp_ns - truth for _ in range(50_000)]
    assert max(abs(e) for e in errors) <= 300
    # Still noisy on both sides of the offset, not a constant.
    assert min(errors) < 120 < max(errors)


def test_a_liar_is_not_clipped() -> None:
    """Clipping is what makes an honest clock honest; a liar keeps its full error."""
    clock = from_spec("liar,noise=0")
    truth = clock._start_tai_ns
    clock.true_tai_ns = lambda: truth  # type: ignore[method-assign]
    assert clock.now().ptp_ns - truth == 10_000_000
