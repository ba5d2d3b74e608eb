"""A simulated clock source, for tests and demos only.

One machine has one clock, so a demo that wants to show several hosts with
differently synchronised clocks puts a *known* error on top of the real
clock: a fixed offset, a drift (ppb) and seeded Gaussian noise, and declares
the bound, quality and source class a real clock of that kind would declare.
Because the error is known, the analysis can be checked against the truth,
and a "liar" profile (error far beyond its declared bound) can be built on
purpose.

An *honest* profile (see ``SimProfile``) keeps its promise on every stamp,
not on 99.73% of them: Gaussian noise is unbounded, so its total error
(offset + drift x elapsed + noise) is clipped at the declared bound, as the
simulator of spec/analysis.md §7.2 clips at the bound too. Otherwise physics
would order edges between two honest clocks wrongly on ~0.27% of stamps. A
liar, and a clock whose claim promises nothing (UNKNOWN quality or a
saturated bound), keeps its full error. Past the one minute honesty is
judged for, an honest clock's drift stops at the bound (as a disciplined
clock would be steered back).

Never use this to stamp production spans: ``describe()`` says ``simulated``
and the ``name`` starts with ``sim:`` so nobody mistakes it for a real source.

Spec grammar (the text after ``sim:`` in ``TEMPOTRACE_CLOCK``)::

    PROFILE[,key=value...]   e.g.  ptp   ntp,offset=-650us,seed=7   liar,offset=5ms
    key=value[,key=value...] e.g.  offset=40ns,noise=10ns,bound=220ns,source=GTE

keys: offset, noise (σ), bound (the declared 3σ bound), drift (ppb, may be
negative), source (GTE|SW_GCC|CPU), quality (OK|DEGRADED|UNKNOWN), seed (int),
name (label, letters/digits/-/_), profile. Durations take ns, us, µs, ms or s
(bare numbers are ns).
"""

from __future__ import annotations

import errno
import math
import random
import re
import time
from dataclasses import dataclass, replace
from typing import Any

from ..errors import ClockError
from ..wire.layout import UNCERTAINTY_SATURATED, ClockQuality, TsSource
from .base import Timestamp, saturate_uncertainty
from .leapseconds import utc_to_tai_ns

__all__ = ["PROFILES", "SimProfile", "SimulatedClock", "from_spec"]


@dataclass(frozen=True)
class SimProfile:
    """The error a simulated clock has and the claims it makes.

    ``offset_ns``, ``drift_ppb`` and ``noise_ns`` (σ of Gaussian noise) are the
    truth; ``bound_ns``, ``quality`` and ``source`` are what the clock
    *claims* in every timestamp. An honest profile keeps
    |offset| + |drift| × 60 s + 3σ inside its bound, and its clock clips each
    stamp's error at the bound (see the module doc); a liar does not.
    """

    name: str
    offset_ns: float
    noise_ns: float
    drift_ppb: float
    bound_ns: float
    quality: ClockQuality
    source: TsSource
    imitates: str
    honest: bool = True
    seed: int = 0


#: Built-in profiles. Numbers are typical published figures: a PTP-disciplined
#: NIC clock stays within tens of ns of its grandmaster and the paper's GTE
#: budget is 220 ns; NTP over a LAN leaves hosts hundreds of µs off (the
#: paper's σ = 500 µs per node), so its 3σ bound (1.5 ms) saturates the
#: uint16 field at 65,535 ns and physics cannot use it. The liar claims PTP
#: precision while being 10 ms off: more than a localhost HTTP hop takes even
#: on a loaded machine (they take ~0.3-3 ms), so the analysis can see the broken
#: promise on causal edges; a lie smaller than the hops it stamps is invisible.
PROFILES: dict[str, SimProfile] = {
    "ptp": SimProfile(
        name="ptp",
        offset_ns=35.0,
        noise_ns=15.0,
        drift_ppb=1.0,
        bound_ns=220.0,
        quality=ClockQuality.OK,
        source=TsSource.GTE,
        imitates="PTP-disciplined NIC hardware clock (GTE)",
    ),
    "ntp": SimProfile(
        name="ntp",
        offset_ns=600_000.0,
        noise_ns=50_000.0,
        drift_ppb=5_000.0,
        bound_ns=1_500_000.0,
        quality=ClockQuality.OK,
        source=TsSource.CPU,
        imitates="NTP-synchronised CPU clock (CPU)",
    ),
    "liar": SimProfile(
        name="liar",
        offset_ns=10_000_000.0,
        noise_ns=15.0,
        drift_ppb=1.0,
        bound_ns=220.0,
        quality=ClockQuality.OK,
        source=TsSource.GTE,
        imitates="PTP-class clock that breaks its promise (claims GTE, 220 ns)",
        honest=False,
    ),
    "unsynced": SimProfile(
        name="unsynced",
        offset_ns=37_000_000_000.0,
        noise_ns=0.0,
        drift_ppb=0.0,
        bound_ns=65_535.0,
        quality=ClockQuality.UNKNOWN,
        source=TsSource.CPU,
        imitates="unsynchronised CPU clock (CPU, UNKNOWN)",
    ),
}

_UNITS = {"ns": 1.0, "us": 1e3, "µs": 1e3, "μs": 1e3, "ms": 1e6, "s": 1e9}
_DURATION = re.compile(r"([+-]?\d+(?:\.\d+)?(?:[eE][+-]?\d+)?)\s*(ns|us|µs|μs|ms|s)?")
_KEYS = "offset, noise, bound, drift, source, quality, seed, name, profile"
_NAME = re.compile(r"[A-Za-z0-9_-]{1,40}")


def _shown(text: str, limit: int = 60) -> str:
    """``text`` for an error message: a hostile 5,000-digit value is cut, with its length said."""
    return text if len(text) <= limit else f"{text[:limit]}...({len(text)} characters)"


def _bad_spec(spec: str, why: str) -> ClockError:
    return ClockError(errno.EINVAL, f"clock spec 'sim:{_shown(spec)}': {why}")


#: Largest |offset|, noise σ and bound: a simulated clock days off is already
#: absurd, and this keeps true time + error far inside the wire's ptp_ns range.
MAX_DURATION_NS = 1e15
#: Largest |drift|: 1e9 ppb is a clock running at twice (or zero) speed.
MAX_DRIFT_PPB = 1e9


def _finite(spec: str, key: str, text: str, value: float, limit: float, unit: str) -> float:
    if not math.isfinite(value) or abs(value) > limit:
        raise _bad_spec(spec, f"{key}={_shown(text)!r} is outside ±{limit:g} {unit}")
    return value


def _duration(spec: str, key: str, text: str) -> float:
    match = _DURATION.fullmatch(text.strip())
    if match is None:
        raise _bad_spec(spec, f"{key}={text!r} is not a duration (e.g. 40ns, 650us, 3ms)")
    return _finite(spec, key, text, float(match.group(1)) * _UNITS[match.group(2) or "ns"], MAX_DURATION_NS, "ns")


def _enum_value(spec: str, key: str, text: str, enum_type: type[TsSource] | type[ClockQuality]) -> Any:
    try:
        return enum_type[text.strip().upper()]
    except KeyError:
        names = "|".join(member.name for member in enum_type)
        raise _bad_spec(spec, f"{key}={text!r}: must be one of {names}") from None


def _parse(spec: str) -> SimProfile:
    parts = [p.strip() for p in spec.split(",") if p.strip()]
    if not parts:
        raise _bad_spec(spec, f"empty; give a profile ({', '.join(PROFILES)}) or key=value pairs")
    base = PROFILES["ptp"]
    if "=" not in parts[0]:
        if parts[0] not in PROFILES:
            raise _bad_spec(spec, f"unknown profile {parts[0]!r}; known: {', '.join(PROFILES)}")
        base = PROFILES[parts[0]]
        parts = parts[1:]
    profile = base
    for part in parts:
        key, sep, value = part.partition("=")
        key = key.strip().lower()
        if not sep:
            raise _bad_spec(spec, f"{part!r} is not key=value")
        if key == "profile":
            if value not in PROFILES:
                raise _bad_spec(spec, f"unknown profile {value!r}; known: {', '.join(PROFILES)}")
            profile = replace(PROFILES[value], seed=profile.seed)
        elif key == "offset":
            profile = replace(profile, offset_ns=_duration(spec, key, value))
        elif key in ("noise", "sigma"):
            profile = replace(profile, noise_ns=abs(_duration(spec, key, value)))
        elif key == "bound":
            profile = replace(profile, bound_ns=abs(_duration(spec, key, value)))
        elif key == "drift":
            try:
                drift = float(value.removesuffix("ppb"))
            except ValueError:
                raise _bad_spec(spec, f"drift={value!r} is not a number of ppb") from None
            profile = replace(profile, drift_ppb=_finite(spec, key, value, drift, MAX_DRIFT_PPB, "ppb"))
        elif key == "source":
            profile = replace(profile, source=_enum_value(spec, key, value, TsSource))
        elif key == "quality":
            profile = replace(profile, quality=_enum_value(spec, key, value, ClockQuality))
        elif key == "seed":
            try:
                profile = replace(profile, seed=int(value))
            except ValueError:
                raise _bad_spec(spec, f"seed={_shown(value)!r} is not an integer") from None
        elif key == "name":
            if _NAME.fullmatch(value) is None:
                raise _bad_spec(spec, f"name={value!r}: 1-40 letters, digits, '-' or '_'")
            profile = replace(profile, name=value)
        else:
            raise _bad_spec(spec, f"unknown key {key!r}; known: {_KEYS}")
    # Honesty is a property of the numbers, not of the label: recompute it for
    # a one-minute run so a customised "ptp" with a 5 µs offset is called a liar.
    # A saturated claim ("at least 65,535 ns") promises nothing, so it cannot be broken.
    worst = abs(profile.offset_ns) + abs(profile.drift_ppb) * 60.0 + 3.0 * profile.noise_ns
    saturated = saturate_uncertainty(profile.bound_ns) == UNCERTAINTY_SATURATED
    honest = profile.quality is ClockQuality.UNKNOWN or saturated or worst <= profile.bound_ns
    return replace(profile, honest=honest)


class SimulatedClock:
    """A ``ClockSource`` that is the real clock plus a known, configurable error.

    Truth is the host's realtime clock converted to TAI with the leap-second
    table; every process on one machine shares it, so differences between
    simulated clocks are exactly the configured errors (plus noise).
    """

    def __init__(self, profile: SimProfile, *, spec: str | None = None) -> None:
        self.profile = profile
        # The short name goes on every span (tempotrace.clock); the full spec
        # is in describe().
        self.name = f"sim:{profile.name}"
        self.spec = spec if spec is not None else profile.name
        self._rng = random.Random(profile.seed)
        self._start_tai_ns = utc_to_tai_ns(time.time_ns())
        self._bound = saturate_uncertainty(profile.bound_ns)
        # Only a promise that means something is kept by clipping: a liar must
        # break its bound, and UNKNOWN or saturated claims bound nothing.
        keeps_promise = (
            profile.honest and profile.quality is not ClockQuality.UNKNOWN and self._bound != UNCERTAINTY_SATURATED
        )
        self._clip_ns: float | None = profile.bound_ns if keeps_promise else None

    def true_tai_ns(self) -> int:
        """The real TAI time this clock's error is measured against."""
        return utc_to_tai_ns(time.time_ns())

    def error_ns(self, true_ns: int) -> float:
        """The error this clock has at a true instant, without noise."""
        elapsed_s = (true_ns - self._start_tai_ns) / 1e9
        return self.profile.offset_ns + self.profile.drift_ppb * elapsed_s

    def now(self) -> Timestamp:
        true_ns = self.true_tai_ns()
        noise = self._rng.normalvariate(0.0, self.profile.noise_ns) if self.profile.noise_ns else 0.0
        # Add the (small) error as an int: true_ns + a float would go through a
        # double and lose everything below 256 ns at today's TAI values.
        error = self.error_ns(true_ns) + noise
        if self._clip_ns is not None:
            # |error| <= bound_ns <= the declared (rounded-up) bound, so round() cannot push it past.
            error = min(max(error, -self._clip_ns), self._clip_ns)
        ptp_ns = max(0, true_ns + round(error))
        return Timestamp(ptp_ns, self.profile.source, self.profile.quality, self._bound)

    def describe(self) -> dict[str, Any]:
        p = self.profile
        return {
            "name": self.name,
            "kind": "simulated",
            "simulated": True,
            "note": "for tests and demos only: the real clock plus a known error",
            "spec": self.spec,
            "profile": p.name,
            "imitates": p.imitates,
            "ts_source": p.source.name,
            "clk_quality": p.quality.name,
            "declared_bound_ns": self._bound,
            "bound_saturated": self._bound == 0xFFFF,
            "true_offset_ns": p.offset_ns,
            "drift_ppb": p.drift_ppb,
            "noise_sigma_ns": p.noise_ns,
            "seed": p.seed,
            "honest": p.honest,
        }

    def __repr__(self) -> str:
        return f"SimulatedClock({self.name!r})"


def from_spec(spec: str) -> SimulatedClock:
    """Build a simulated clock from the text after ``sim:`` (see module doc).

    Raises ``ClockError`` (errno EINVAL) naming the offending part.
    """
    return SimulatedClock(_parse(spec), spec=spec.strip())
