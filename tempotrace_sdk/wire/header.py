"""The tt-ext v3 header value and its binary codec (spec/tt-ext-v3.md §2-§4, §9).

Sans-IO: bytes and str in, values out. Imports neither OpenTelemetry nor the
native clock module.

Speed matters here (every hop encodes and decodes one header), so the hot
paths avoid the generic frozen-dataclass machinery: ``TTExt.__new__``
validates with exact-type fast paths and builds the instance through a
layout-identical builder class (see ``_Builder``); decoding checks the fields
straight from ``struct.unpack``. Neither path skips a rule.
"""

from __future__ import annotations

import binascii
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from ..errors import FieldError, HeaderError, LengthError, VersionError
from . import _layout as L
from ._layout import ClockQuality, TsSource
from .sketch import Sketch
from .text import _CANONICAL_LAST, _DECODE_TABLE, decode_text

__all__ = ["TTExt"]

_TS_SOURCE_BY_VALUE = {int(v): v for v in TsSource}
_QUALITY_BY_VALUE = {int(v): v for v in ClockQuality}
_UNKNOWN = ClockQuality.UNKNOWN
_SATURATED = L.UNCERTAINTY_SATURATED
_VERSION = L.VERSION
_LTS_MAX = L.LTS_MAX
_PTP_MAX = L.PTP_NS_MAX
_TENANT_MAX = L.TENANT_MAX
_HEADER_LEN = L.HEADER_LEN
_unpack = L.STRUCT.unpack
_pack = L.STRUCT.pack
_pack_head = L.STRUCT_HEAD.pack
_b2a = binascii.b2a_base64
_a2b = binascii.a2b_base64
_TEXT_LEN = L.TEXT_LEN
_TO_URL = bytes.maketrans(b"+/", b"-_")
_object_new = object.__new__


def _in_range(value: object, high: int) -> bool:
    """True for an int (not bool) in 0..high."""
    if type(value) is int:
        return 0 <= value <= high
    return isinstance(value, int) and not isinstance(value, bool) and 0 <= value <= high


def _enum_member(value: object, by_value: dict[int, Any]) -> Any:
    """The enum member for an int (or member) value, or None."""
    if isinstance(value, int) and not isinstance(value, bool):
        return by_value.get(int(value))
    return None


@dataclass(frozen=True, slots=True, init=False)
class TTExt:
    """One tt-ext v3 header. Validated at construction: an invalid one cannot exist.

    ``TTExt(ptp_ns, ts_source, clk_quality, uncertainty_ns, lts,
    svc_sketch=Sketch.EMPTY, tenant_id=0)``; keyword arguments work too.
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

    def __new__(
        cls,
        ptp_ns: int,
        ts_source: TsSource | int,
        clk_quality: ClockQuality | int,
        uncertainty_ns: int,
        lts: int,
        svc_sketch: Sketch = Sketch.EMPTY,
        tenant_id: int = 0,
    ) -> TTExt:
        # The common case in one expression: exact types, every range.
        if (
            type(ptp_ns) is int
            and type(ts_source) is TsSource
            and type(clk_quality) is ClockQuality
            and type(uncertainty_ns) is int
            and type(lts) is int
            and type(svc_sketch) is Sketch
            and type(tenant_id) is int
            and 0 <= tenant_id <= _TENANT_MAX
            and 0 <= ptp_ns <= _PTP_MAX
            and 0 <= uncertainty_ns <= _SATURATED
            and 0 <= lts <= _LTS_MAX
        ):
            if clk_quality is _UNKNOWN:
                uncertainty_ns = _SATURATED
            if cls is TTExt and _FAST:  # _new_fast, inlined: this is the per-hop path
                obj: Any = _Builder()
                obj.ptp_ns = ptp_ns
                obj.ts_source = ts_source
                obj.clk_quality = clk_quality
                obj.uncertainty_ns = uncertainty_ns
                obj.lts = lts
                obj.svc_sketch = svc_sketch
                obj.tenant_id = tenant_id
                obj.__class__ = TTExt
                return obj  # type: ignore[no-any-return]
            return _new_portable(cls, ptp_ns, ts_source, clk_quality, uncertainty_ns, lts, svc_sketch, tenant_id)
        values = _validate(ptp_ns, ts_source, clk_quality, uncertainty_ns, lts, svc_sketch, tenant_id)
        return _new(*values) if cls is TTExt else _new_portable(cls, *values)

    def __reduce__(self) -> tuple[type[TTExt], tuple[Any, ...]]:
        # __new__ takes the fields, so pickle/copy go through validation.
        return (
            type(self),
            (
                self.ptp_ns,
                self.ts_source,
                self.clk_quality,
                self.uncertainty_ns,
                self.lts,
                self.svc_sketch,
                self.tenant_id,
            ),
        )

    # -- binary form (spec §4) ------------------------------------------------
    def encode(self) -> bytes:
        """The 53-byte binary form."""
        return _pack(
            (self.tenant_id << 4) | _VERSION,
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
        in wire order, that breaks a rule (spec §9.1).
        """
        if type(data) is not bytes:
            # The real type (isinstance can be faked), and a plain copy (a
            # memoryview's len() counts items, not bytes; a subclass may
            # override anything): received input never runs foreign code
            # that could raise something other than HeaderError.
            if not issubclass(type(data), (bytes, bytearray, memoryview)):
                raise HeaderError("binary", "binary form must be bytes", error_class="BINARY_TYPE", remote=True)
            try:
                data = memoryview(data).tobytes()
            except Exception as err:
                raise HeaderError("binary", "unreadable buffer", error_class="BINARY_TYPE", remote=True) from err
        if len(data) != _HEADER_LEN:
            raise LengthError("length", f"must be exactly {_HEADER_LEN} bytes, got {len(data)}", remote=True)
        return _from_wire(data)

    # -- text form (spec §5) ----------------------------------------------------
    def to_header(self) -> str:
        """The 71-character base64url text form (no padding)."""
        # Bytes 0..20 are 28 characters exactly (21 = 7 groups of 3 bytes);
        # the sketch's 43 characters follow and are cached on the sketch.
        head = _pack_head(
            (self.tenant_id << 4) | _VERSION,
            self.ptp_ns,
            self.ts_source,
            self.clk_quality,
            self.uncertainty_ns,
            self.lts,
        )
        return _b2a(head, newline=False).translate(_TO_URL).decode() + self.svc_sketch._text()

    @classmethod
    def from_header(cls, value: Any) -> TTExt:
        """Parse and validate a received text-form value (surrounding OWS allowed)."""
        # decode_text's fast path, inlined (one call fewer per hop); any
        # value it does not accept outright goes through decode_text itself.
        if type(value) is str and len(value) == _TEXT_LEN and value[-1] in _CANONICAL_LAST:
            try:
                raw = _a2b(value.encode().translate(_DECODE_TABLE) + b"=")
            except (UnicodeEncodeError, binascii.Error):
                raw = b""
            if len(raw) == _HEADER_LEN:
                return _from_wire(raw)
        return _from_wire(decode_text(value))

    # -- convenience ------------------------------------------------------------
    @property
    def has_physical_time(self) -> bool:
        """False when quality is UNKNOWN: never order by this ptp_ns (spec §3.4)."""
        return self.clk_quality is not _UNKNOWN

    @property
    def saturated(self) -> bool:
        """True when uncertainty_ns means "at least 65,535 ns" (spec §3.5)."""
        return self.uncertainty_ns == _SATURATED

    def interval(self) -> tuple[int, int] | None:
        """[ptp_ns - u, ptp_ns + u], or None when physics cannot use this header:
        quality UNKNOWN, or a saturated bound, which is only a lower bound on
        the error (spec §3.5, §11)."""
        if self.clk_quality is _UNKNOWN or self.uncertainty_ns == _SATURATED:
            return None
        return self.ptp_ns - self.uncertainty_ns, self.ptp_ns + self.uncertainty_ns


def _validate(
    ptp_ns: object,
    ts_source: object,
    clk_quality: object,
    uncertainty_ns: object,
    lts: object,
    svc_sketch: object,
    tenant_id: object,
) -> tuple[Any, ...]:
    """Every caller value checked in the order of spec §9.2; ints normalised, enums as members."""
    if not _in_range(tenant_id, L.TENANT_MAX):
        raise FieldError("tenant_id", "must be an integer 0..15", error_class="TENANT_ID")
    if not _in_range(ptp_ns, _PTP_MAX):
        raise FieldError("ptp_ns", "must be an integer 0..2^63-1", error_class="PTP_NS_RANGE")
    source = _enum_member(ts_source, _TS_SOURCE_BY_VALUE)
    if source is None:
        raise FieldError("ts_source", "must be 0 (GTE), 1 (SW_GCC) or 2 (CPU)", error_class="TS_SOURCE")
    quality = _enum_member(clk_quality, _QUALITY_BY_VALUE)
    if quality is None:
        raise FieldError("clk_quality", "must be 0 (OK), 1 (DEGRADED) or 2 (UNKNOWN)", error_class="CLK_QUALITY")
    if not _in_range(uncertainty_ns, _SATURATED):
        raise FieldError("uncertainty_ns", "must be an integer 0..65535", error_class="UNCERTAINTY_RANGE")
    if not _in_range(lts, _LTS_MAX):
        raise FieldError("lts", "must be an integer 0..2^63-1", error_class="LTS_RANGE")
    if not isinstance(svc_sketch, Sketch):
        raise FieldError("svc_sketch", "must be a Sketch", error_class="SVC_SKETCH")
    uncertainty = _SATURATED if quality is _UNKNOWN else int(uncertainty_ns)  # type: ignore[call-overload]
    return (int(ptp_ns), source, quality, uncertainty, int(lts), svc_sketch, int(tenant_id))  # type: ignore[call-overload]


def _from_wire(data: bytes | bytearray | memoryview) -> TTExt:
    """Validate exactly 53 received bytes; checks in wire order (spec §9.1)."""
    flags, ptp_ns, source, quality, uncertainty, lts, sketch = _unpack(data)
    if flags & 0x0F != _VERSION:
        raise VersionError("version", f"must be {_VERSION}, got {flags & 0x0F}", remote=True)
    if ptp_ns < 0:
        raise FieldError("ptp_ns", "must not be negative", error_class="PTP_NS_RANGE", remote=True)
    ts_source = _TS_SOURCE_BY_VALUE.get(source)
    if ts_source is None:
        raise FieldError("ts_source", f"unknown value {source}", error_class="TS_SOURCE", remote=True)
    clk_quality = _QUALITY_BY_VALUE.get(quality)
    if clk_quality is None:
        raise FieldError("clk_quality", f"unknown value {quality}", error_class="CLK_QUALITY", remote=True)
    if lts > _LTS_MAX:
        raise FieldError("lts", "must be below 2^63", error_class="LTS_RANGE", remote=True)
    if clk_quality is _UNKNOWN:
        uncertainty = _SATURATED
    svc_sketch = _object_new(Sketch)
    svc_sketch._b = None  # converted to an int only if a sketch operation needs it
    svc_sketch._r = sketch
    svc_sketch._t = None
    if not _FAST:
        return _new(ptp_ns, ts_source, clk_quality, uncertainty, lts, svc_sketch, flags >> 4)
    obj: Any = _Builder()  # _new_fast, inlined: this is the per-hop path
    obj.ptp_ns = ptp_ns
    obj.ts_source = ts_source
    obj.clk_quality = clk_quality
    obj.uncertainty_ns = uncertainty
    obj.lts = lts
    obj.svc_sketch = svc_sketch
    obj.tenant_id = flags >> 4
    obj.__class__ = TTExt
    return obj  # type: ignore[no-any-return]


class _Builder:
    """Same slot layout as TTExt, but with plain attribute stores.

    A frozen dataclass sets each field through ``object.__setattr__``, which
    costs more than the rest of a decode together. Storing into a
    layout-identical plain object (a specialised slot store) and then
    assigning ``__class__`` builds the same TTExt about three times faster.
    Used only after every field has been validated.
    """

    __slots__ = TTExt.__slots__


def _new_fast(
    ptp_ns: int, ts_source: TsSource, clk_quality: ClockQuality, uncertainty: int, lts: int, sketch: Sketch, tenant: int
) -> TTExt:
    obj: Any = _Builder()
    obj.ptp_ns = ptp_ns
    obj.ts_source = ts_source
    obj.clk_quality = clk_quality
    obj.uncertainty_ns = uncertainty
    obj.lts = lts
    obj.svc_sketch = sketch
    obj.tenant_id = tenant
    obj.__class__ = TTExt
    return obj  # type: ignore[no-any-return]


def _new_portable(cls: type[TTExt], *values: Any) -> TTExt:
    obj = object.__new__(cls)
    for name, value in zip(TTExt.__slots__, values, strict=True):
        object.__setattr__(obj, name, value)
    return obj


def _pick_constructor() -> Callable[..., TTExt]:
    # __class__ assignment between layout-identical slotted classes is
    # CPython behaviour; elsewhere fall back to the portable path.
    try:
        probe = _new_fast(0, TsSource.CPU, ClockQuality.OK, 0, 0, Sketch.EMPTY, 0)
    except TypeError:
        probe = None
    if type(probe) is TTExt and probe.ts_source is TsSource.CPU:
        return _new_fast
    return lambda *values: _new_portable(TTExt, *values)


_new = _pick_constructor()
_FAST = _new is _new_fast
