"""The tt-ext v3 header value and its binary codec (spec/tt-ext-v3.md §2–§4).

Sans-IO: bytes and str in, values out. Imports neither OpenTelemetry nor the
native clock module.
"""

from __future__ import annotations

import struct
from dataclasses import dataclass
from typing import Any

from ..errors import FieldError, HeaderError, LengthError, VersionError
from . import _layout as L
from ._layout import ClockQuality, TsSource
from .sketch import Sketch
from .text import decode_text, encode_text

__all__ = ["TTExt"]

_TS_SOURCES = frozenset(int(v) for v in TsSource)
_QUALITIES = frozenset(int(v) for v in ClockQuality)
_TS_SOURCE_BY_VALUE = {int(v): v for v in TsSource}
_QUALITY_BY_VALUE = {int(v): v for v in ClockQuality}


def _is_int(value: object) -> bool:
    return isinstance(value, int) and not isinstance(value, bool)


@dataclass(frozen=True, slots=True)
class TTExt:
    """One tt-ext v3 header. Validated at construction: an invalid one cannot exist.

    ``uncertainty_ns`` is normalised to 65535 when ``clk_quality`` is
    UNKNOWN (spec §3.5): such a header carries no usable physical time, and
    every implementation reports the same value for it.
    """

    ptp_ns: int
    ts_source: TsSource
    clk_quality: ClockQuality
    uncertainty_ns: int
    lts: int
    svc_sketch: Sketch = Sketch.EMPTY
    tenant_id: int = 0

    def __post_init__(self) -> None:
        if not _is_int(self.tenant_id) or not 0 <= self.tenant_id <= L.TENANT_MAX:
            raise FieldError("tenant_id", "must be an integer 0..15", error_class="TENANT_ID")
        if not _is_int(self.ptp_ns) or not 0 <= self.ptp_ns <= L.PTP_NS_MAX:
            raise FieldError("ptp_ns", "must be an integer 0..2^63-1", error_class="PTP_NS_RANGE")
        if not _is_int(self.ts_source) or self.ts_source not in _TS_SOURCES:
            raise FieldError("ts_source", "must be 0 (GTE), 1 (SW_GCC) or 2 (CPU)", error_class="TS_SOURCE")
        if not _is_int(self.clk_quality) or self.clk_quality not in _QUALITIES:
            raise FieldError("clk_quality", "must be 0 (OK), 1 (DEGRADED) or 2 (UNKNOWN)", error_class="CLK_QUALITY")
        if not _is_int(self.uncertainty_ns) or not 0 <= self.uncertainty_ns <= L.UNCERTAINTY_SATURATED:
            raise FieldError("uncertainty_ns", "must be an integer 0..65535", error_class="UNCERTAINTY_RANGE")
        if not _is_int(self.lts) or not 0 <= self.lts <= L.LTS_MAX:
            raise FieldError("lts", "must be an integer 0..2^63-1", error_class="LTS_RANGE")
        if not isinstance(self.svc_sketch, Sketch):
            raise FieldError("svc_sketch", "must be a Sketch", error_class="SVC_SKETCH")
        # Store the enum members, not bare ints, so repr and comparisons read well.
        object.__setattr__(self, "ts_source", _TS_SOURCE_BY_VALUE[int(self.ts_source)])
        object.__setattr__(self, "clk_quality", _QUALITY_BY_VALUE[int(self.clk_quality)])
        if self.clk_quality is ClockQuality.UNKNOWN:
            object.__setattr__(self, "uncertainty_ns", L.UNCERTAINTY_SATURATED)

    # -- binary form (spec §4) ------------------------------------------------
    def encode(self) -> bytes:
        """The 53-byte binary form."""
        return L.STRUCT.pack(
            (self.tenant_id << 4) | L.VERSION,
            self.ptp_ns,
            self.ts_source,
            self.clk_quality,
            self.uncertainty_ns,
            self.lts,
            self.svc_sketch.to_bytes(),
        )

    @classmethod
    def decode(cls, data: bytes | bytearray | memoryview) -> TTExt:
        """Parse and validate the 53-byte binary form of a received header.

        Raises ``HeaderError`` (with ``remote=True``) naming the first field,
        in wire order, that breaks a rule (spec §7).
        """
        if not isinstance(data, (bytes, bytearray, memoryview)):
            raise HeaderError("length", "binary form must be bytes", error_class="TYPE", remote=True)
        if len(data) != L.HEADER_LEN:
            raise LengthError("length", f"must be exactly {L.HEADER_LEN} bytes, got {len(data)}", remote=True)
        try:
            flags, ptp_ns, source, quality, uncertainty, lts, sketch = L.STRUCT.unpack(data)
        except struct.error as err:  # pragma: no cover - length checked above
            raise LengthError("length", str(err), remote=True) from err
        return cls._from_fields(flags, ptp_ns, source, quality, uncertainty, lts, sketch)

    @classmethod
    def _from_fields(
        cls, flags: int, ptp_ns: int, source: int, quality: int, uncertainty: int, lts: int, sketch: bytes
    ) -> TTExt:
        # Checks in wire order so every implementation reports the same
        # error class for the same bytes (spec §7.1).
        if flags & 0x0F != L.VERSION:
            raise VersionError("version", f"must be {L.VERSION}, got {flags & 0x0F}", remote=True)
        if ptp_ns < 0:
            raise FieldError("ptp_ns", "must not be negative", error_class="PTP_NS_RANGE", remote=True)
        ts_source = _TS_SOURCE_BY_VALUE.get(source)
        if ts_source is None:
            raise FieldError("ts_source", f"unknown value {source}", error_class="TS_SOURCE", remote=True)
        clk_quality = _QUALITY_BY_VALUE.get(quality)
        if clk_quality is None:
            raise FieldError("clk_quality", f"unknown value {quality}", error_class="CLK_QUALITY", remote=True)
        if lts > L.LTS_MAX:
            raise FieldError("lts", "must be below 2^63", error_class="LTS_RANGE", remote=True)
        if clk_quality is ClockQuality.UNKNOWN:
            uncertainty = L.UNCERTAINTY_SATURATED
        # Every field is now known valid: skip __post_init__'s re-checks.
        self = object.__new__(cls)
        _set = object.__setattr__
        _set(self, "ptp_ns", ptp_ns)
        _set(self, "ts_source", ts_source)
        _set(self, "clk_quality", clk_quality)
        _set(self, "uncertainty_ns", uncertainty)
        _set(self, "lts", lts)
        _set(self, "svc_sketch", Sketch._from_int(int.from_bytes(sketch, "big")))
        _set(self, "tenant_id", flags >> 4)
        return self

    # -- text form (spec §5) ----------------------------------------------------
    def to_header(self) -> str:
        """The 71-character base64url text form (no padding)."""
        return encode_text(self.encode())

    @classmethod
    def from_header(cls, value: Any) -> TTExt:
        """Parse and validate a received text-form value (surrounding OWS allowed)."""
        return cls.decode(decode_text(value))

    # -- convenience ------------------------------------------------------------
    @property
    def has_physical_time(self) -> bool:
        """False when quality is UNKNOWN: never order by this ptp_ns (spec §3.4)."""
        return self.clk_quality is not ClockQuality.UNKNOWN

    @property
    def saturated(self) -> bool:
        """True when uncertainty_ns means "at least 65,535 ns"."""
        return self.uncertainty_ns == L.UNCERTAINTY_SATURATED

    def interval(self) -> tuple[int, int] | None:
        """[ptp_ns - u, ptp_ns + u], or None when physics cannot use this header:
        quality UNKNOWN, or a saturated bound, which is only a lower bound on
        the error (spec §3.5)."""
        if not self.has_physical_time or self.saturated:
            return None
        return self.ptp_ns - self.uncertainty_ns, self.ptp_ns + self.uncertainty_ns
