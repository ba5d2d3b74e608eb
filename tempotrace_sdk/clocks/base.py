"""The one small interface where clocks meet the rest of the SDK.

A clock source's ``now()`` returns a ``Timestamp``: TAI nanoseconds plus the
three fields that say how far to trust them, ready to go into a ``TTExt``.
The OpenTelemetry layer depends only on this module; the sources themselves
(CPU, PHC, calibrated, simulated) live beside it.
"""

from __future__ import annotations

import operator
from dataclasses import FrozenInstanceError
from typing import TYPE_CHECKING, Any, Protocol, runtime_checkable

from ..wire._layout import PTP_NS_MAX, UNCERTAINTY_SATURATED, ClockQuality, TsSource

__all__ = ["ClockSource", "Timestamp", "saturate_uncertainty"]

_UNKNOWN = ClockQuality.UNKNOWN
_tuple_new = tuple.__new__

try:  # the C field descriptor namedtuple uses (CPython); a property is the portable spelling
    from collections import _tuplegetter  # type: ignore[attr-defined]
except ImportError:  # pragma: no cover - other interpreters

    def _tuplegetter(index: int, doc: str) -> Any:
        return property(operator.itemgetter(index), doc=doc)


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


class Timestamp(tuple):  # type: ignore[type-arg]  # fields are typed one by one below
    """A reading of a clock source: when, from where, and how far to trust it.

    ``uncertainty_ns`` is a 3-sigma bound on |ptp_ns - true TAI| in ns,
    already saturated into 0..65535; it is 65535 whenever the quality is
    UNKNOWN (encoders write 0xFFFF with UNKNOWN, spec §3.5).

    An immutable value validated by its constructor. It is stored as a tuple
    because ``now()`` builds one per call and a tuple is the cheapest
    immutable object CPython can make (one allocation, no per-field
    stores); otherwise it behaves as the frozen dataclass it replaced: equal
    only to another Timestamp, unordered, attribute stores raise
    ``FrozenInstanceError``. Sources that have already validated the fields
    build it with ``clocks._fast.make_timestamp``.
    """

    __slots__ = ()
    __match_args__ = ("ptp_ns", "ts_source", "clk_quality", "uncertainty_ns")
    #: namedtuple's marker: dataclasses.asdict() of a dataclass holding a
    #: Timestamp (e.g. PreflightResult) rebuilds it field by field.
    _fields = __match_args__

    if TYPE_CHECKING:

        @property
        def ptp_ns(self) -> int: ...
        @property
        def ts_source(self) -> TsSource: ...
        @property
        def clk_quality(self) -> ClockQuality: ...
        @property
        def uncertainty_ns(self) -> int: ...

    else:
        ptp_ns = _tuplegetter(0, "TAI nanoseconds (0 .. 2^63-1)")
        ts_source = _tuplegetter(1, "where the time came from (TsSource)")
        clk_quality = _tuplegetter(2, "how far the source trusts itself (ClockQuality)")
        uncertainty_ns = _tuplegetter(3, "3-sigma bound in ns, 0..65535 (65535 when UNKNOWN)")

    def __new__(cls, ptp_ns: int, ts_source: TsSource, clk_quality: ClockQuality, uncertainty_ns: int) -> Timestamp:
        if not 0 <= ptp_ns <= PTP_NS_MAX:
            raise ValueError(f"ptp_ns out of range: {ptp_ns}")
        if not 0 <= uncertainty_ns <= UNCERTAINTY_SATURATED:
            raise ValueError(f"uncertainty_ns out of range: {uncertainty_ns}")
        if clk_quality == _UNKNOWN:
            uncertainty_ns = UNCERTAINTY_SATURATED
        return _tuple_new(cls, (ptp_ns, ts_source, clk_quality, uncertainty_ns))

    def __getnewargs__(self) -> tuple[int, TsSource, ClockQuality, int]:
        # pickle and copy rebuild through the validating __new__.
        return (self[0], self[1], self[2], self[3])

    def __repr__(self) -> str:
        return (
            f"Timestamp(ptp_ns={self[0]!r}, ts_source={self[1]!r}, clk_quality={self[2]!r}, uncertainty_ns={self[3]!r})"
        )

    # Value semantics of the dataclass: equal only to another Timestamp (never
    # to a bare tuple), hashable, and not ordered.
    # (NotImplemented alone would not do: Python would then ask the bare
    # tuple, which compares by items.)
    def __eq__(self, other: object) -> bool:
        if type(other) is Timestamp:
            return tuple.__eq__(self, other)
        return False if isinstance(other, tuple) else NotImplemented

    def __ne__(self, other: object) -> bool:
        if type(other) is Timestamp:
            return tuple.__ne__(self, other)
        return True if isinstance(other, tuple) else NotImplemented

    __hash__ = tuple.__hash__

    def __lt__(self, other: object) -> bool:
        return NotImplemented

    __le__ = __gt__ = __ge__ = __lt__

    def __setattr__(self, name: str, value: object) -> None:
        raise FrozenInstanceError(f"cannot assign to field {name!r}")

    def __delattr__(self, name: str) -> None:
        raise FrozenInstanceError(f"cannot delete field {name!r}")


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
