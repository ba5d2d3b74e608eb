"""The one small interface where clocks meet the rest of the SDK.

A clock source's ``now()`` returns a ``Timestamp``: TAI nanoseconds plus the
three fields that say how far to trust them, ready to go into a ``TTExt``.
The OpenTelemetry layer depends only on this module; the sources themselves
(CPU, PHC, calibrated, simulated) live beside it.
"""

from __future__ import annotations

from typing import Any, Protocol, runtime_checkable

import msgspec

from ..wire.layout import PTP_NS_MAX, UNCERTAINTY_SATURATED, ClockQuality, TsSource

__all__ = ["ClockSource", "Timestamp", "saturate_uncertainty"]

_UNKNOWN = ClockQuality.UNKNOWN
_set = msgspec.structs.force_setattr


def saturate_uncertainty(bound_ns: float) -> int:
    """Round a bound *up* to whole ns and clamp it into the uint16 field.

    Rounding up keeps the bound honest: 12.1 ns of evidence is a 13 ns claim.
    """
    if bound_ns != bound_ns or bound_ns >= UNCERTAINTY_SATURATED:  # NaN or too big
        return UNCERTAINTY_SATURATED
    if bound_ns <= 0:
        return 0
    whole = int(bound_ns)
    return whole if whole == bound_ns else whole + 1


class Timestamp(msgspec.Struct, frozen=True, gc=False):
    """A reading of a clock source: when, from where, and how far to trust it.

    ``uncertainty_ns`` is a 3-sigma bound on |ptp_ns - true TAI| in ns,
    already saturated into 0..65535; it is 65535 whenever the quality is
    UNKNOWN (encoders write 0xFFFF with UNKNOWN, spec §3.5).

    A msgspec frozen Struct validated by its constructor (``__post_init__``:
    two range checks, kept that small because ``now()`` builds one per call;
    the enum fields are the sources' own constants). Equal only to another
    Timestamp, hashable, unordered; pickle and ``replace`` re-validate.
    """

    ptp_ns: int
    ts_source: TsSource
    clk_quality: ClockQuality
    uncertainty_ns: int

    def __post_init__(self) -> None:
        if not 0 <= self.ptp_ns <= PTP_NS_MAX:
            raise ValueError(f"ptp_ns out of range: {self.ptp_ns}")
        if not 0 <= self.uncertainty_ns <= UNCERTAINTY_SATURATED:
            raise ValueError(f"uncertainty_ns out of range: {self.uncertainty_ns}")
        if self.clk_quality is _UNKNOWN and self.uncertainty_ns != UNCERTAINTY_SATURATED:
            _set(self, "uncertainty_ns", UNCERTAINTY_SATURATED)


@runtime_checkable
class ClockSource(Protocol):
    """What the OTel layer needs of a clock.

    ``now()`` is the hot path: it reads the clock and a cached sync state and
    never blocks on I/O. ``describe()`` is the slow path for humans and the
    CLI: a JSON-ready dict saying what the source is and why it reports the
    quality it does.
    """

    #: A short stable name, e.g. "cpu", "phc:/dev/ptp0", "sim:ntp-1".
    name: str

    def now(self) -> Timestamp: ...

    def describe(self) -> dict[str, Any]: ...
