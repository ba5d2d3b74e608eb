"""The tt-ext v3 header value and its binary and text codecs (spec/tt-ext-v3.md §2-§5, §9).

Sans-IO: bytes and str in, values out. Imports neither OpenTelemetry nor the
native clock module.

``TTExt`` is a msgspec frozen Struct (the project's one immutable-record
strategy) whose ``__post_init__`` checks every field, h11 style: an invalid
header cannot exist, whether it was built by a caller, by ``replace()``, by
unpickling or by the decoder, which builds it through the same constructor
and only re-labels a refusal as the peer's (``remote=True``).

``pack_header`` and ``header_text`` are the one definition of the two wire
forms; the propagator's send path uses them directly with fields it has
already validated, so it does not build a header object per hop.
"""

from __future__ import annotations

import binascii
from typing import Any

import msgspec

from ..errors import FieldError, HeaderError, LengthError, VersionError
from . import layout as L
from .layout import ClockQuality, TsSource
from .sketch import Sketch, from_wire
from .text import _CANONICAL_LAST, _DECODE_TABLE, decode_text

__all__ = ["TTExt", "header_text", "pack_header"]

_TS_SOURCE_BY_VALUE: dict[int, TsSource] = {int(v): v for v in TsSource}
_QUALITY_BY_VALUE: dict[int, ClockQuality] = {int(v): v for v in ClockQuality}
_UNKNOWN = ClockQuality.UNKNOWN
_SATURATED = L.UNCERTAINTY_SATURATED
_VERSION = L.VERSION
_LTS_MAX = L.LTS_MAX
_PTP_MAX = L.PTP_NS_MAX
_TENANT_MAX = L.TENANT_MAX
_HEADER_LEN = L.HEADER_LEN
_TEXT_LEN = L.TEXT_LEN
_unpack = L.STRUCT.unpack
_pack = L.STRUCT.pack
_pack_head = L.STRUCT_HEAD.pack
_b2a = binascii.b2a_base64
_a2b = binascii.a2b_base64
_TO_URL = bytes.maketrans(b"+/", b"-_")
_set = msgspec.structs.force_setattr


def pack_header(
    tenant_id: int, ptp_ns: int, ts_source: int, clk_quality: int, uncertainty_ns: int, lts: int, sketch: Sketch
) -> bytes:
    """The 53-byte binary form of already-valid fields (spec §4)."""
    return _pack((tenant_id << 4) | _VERSION, ptp_ns, ts_source, clk_quality, uncertainty_ns, lts, sketch.to_bytes())


def header_text(
    tenant_id: int, ptp_ns: int, ts_source: int, clk_quality: int, uncertainty_ns: int, lts: int, sketch: Sketch
) -> str:
    """The 71-character base64url text form of already-valid fields (spec §5).

    Bytes 0..20 are exactly 28 characters (21 = 7 groups of 3 bytes), so the
    text is the head's characters followed by the sketch's 43, which the
    sketch caches: a span that sends several times encodes its sketch once.
    """
    head = _pack_head((tenant_id << 4) | _VERSION, ptp_ns, ts_source, clk_quality, uncertainty_ns, lts)
    return _b2a(head, newline=False).translate(_TO_URL).decode() + sketch._text()


def _in_range(value: object, high: int) -> bool:
    """True for an int (not bool) in 0..high."""
    return isinstance(value, int) and not isinstance(value, bool) and 0 <= value <= high


def _enum_member(value: object, by_value: dict[int, Any]) -> Any:
    """The enum member for an int (or member) value, or None."""
    if isinstance(value, int) and not isinstance(value, bool):
        return by_value.get(int(value))
    return None


class TTExt(msgspec.Struct, frozen=True, gc=False):
    """One tt-ext v3 header. Validated at construction: an invalid one cannot exist.

    ``TTExt(ptp_ns, ts_source, clk_quality, uncertainty_ns, lts,
    svc_sketch=Sketch.EMPTY, tenant_id=0)``; keyword arguments work too.
    Enum fields accept their int values and are stored as members; int
    subclasses are stored as plain ints. ``uncertainty_ns`` is normalised to
    65535 when ``clk_quality`` is UNKNOWN (spec §3.5): such a header carries
    no usable physical time, and every implementation reports the same value.
    """

    ptp_ns: int
    ts_source: TsSource
    clk_quality: ClockQuality
    uncertainty_ns: int
    lts: int
    svc_sketch: Sketch = Sketch.EMPTY
    tenant_id: int = 0

    def __post_init__(self) -> None:
        # The common case in one expression (exact types, every range); any
        # other value takes _normalise, which checks in spec §9.2 order.
        if not (
            type(self.ptp_ns) is int
            and type(self.ts_source) is TsSource
            and type(self.clk_quality) is ClockQuality
            and type(self.uncertainty_ns) is int
            and type(self.lts) is int
            and type(self.svc_sketch) is Sketch
            and type(self.tenant_id) is int
            and 0 <= self.tenant_id <= _TENANT_MAX
            and 0 <= self.ptp_ns <= _PTP_MAX
            and 0 <= self.uncertainty_ns <= _SATURATED
            and 0 <= self.lts <= _LTS_MAX
        ):
            _normalise(self)
        if self.clk_quality is _UNKNOWN and self.uncertainty_ns != _SATURATED:
            _set(self, "uncertainty_ns", _SATURATED)

    # -- binary form (spec §4) ------------------------------------------------
    def encode(self) -> bytes:
        """The 53-byte binary form."""
        return pack_header(self.tenant_id, self.ptp_ns, self.ts_source, self.clk_quality,
                           self.uncertainty_ns, self.lts, self.svc_sketch)  # fmt: skip

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
                view = memoryview(data)
                if view.nbytes != _HEADER_LEN:  # measured before any copy: a 100 MB value is not copied
                    raise LengthError("length", f"must be exactly {_HEADER_LEN} bytes, got {view.nbytes}", remote=True)
                data = view.tobytes()
            except HeaderError:
                raise
            except Exception as err:
                raise HeaderError("binary", "unreadable buffer", error_class="BINARY_TYPE", remote=True) from err
        if len(data) != _HEADER_LEN:
            raise LengthError("length", f"must be exactly {_HEADER_LEN} bytes, got {len(data)}", remote=True)
        return _from_wire(data)

    # -- text form (spec §5) ----------------------------------------------------
    def to_header(self) -> str:
        """The 71-character base64url text form (no padding)."""
        return header_text(self.tenant_id, self.ptp_ns, self.ts_source, self.clk_quality,
                           self.uncertainty_ns, self.lts, self.svc_sketch)  # fmt: skip

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


def _normalise(header: TTExt) -> None:
    """Check every caller value in the order of spec §9.2; store ints as ints, enums as members."""
    tenant_id, ptp_ns, lts = header.tenant_id, header.ptp_ns, header.lts
    if not _in_range(tenant_id, _TENANT_MAX):
        raise FieldError("tenant_id", "must be an integer 0..15", error_class="TENANT_ID")
    if not _in_range(ptp_ns, _PTP_MAX):
        raise FieldError("ptp_ns", "must be an integer 0..2^63-1", error_class="PTP_NS_RANGE")
    source = _enum_member(header.ts_source, _TS_SOURCE_BY_VALUE)
    if source is None:
        raise FieldError("ts_source", "must be 0 (GTE), 1 (SW_GCC) or 2 (CPU)", error_class="TS_SOURCE")
    quality = _enum_member(header.clk_quality, _QUALITY_BY_VALUE)
    if quality is None:
        raise FieldError("clk_quality", "must be 0 (OK), 1 (DEGRADED) or 2 (UNKNOWN)", error_class="CLK_QUALITY")
    if not _in_range(header.uncertainty_ns, _SATURATED):
        raise FieldError("uncertainty_ns", "must be an integer 0..65535", error_class="UNCERTAINTY_RANGE")
    if not _in_range(lts, _LTS_MAX):
        raise FieldError("lts", "must be an integer 0..2^63-1", error_class="LTS_RANGE")
    if not isinstance(header.svc_sketch, Sketch):
        raise FieldError("svc_sketch", "must be a Sketch", error_class="SVC_SKETCH")
    _set(header, "tenant_id", int(tenant_id))
    _set(header, "ptp_ns", int(ptp_ns))
    _set(header, "ts_source", source)
    _set(header, "clk_quality", quality)
    _set(header, "uncertainty_ns", int(header.uncertainty_ns))
    _set(header, "lts", int(lts))


def _from_wire(data: bytes) -> TTExt:
    """Validate exactly 53 received bytes; checks in wire order (spec §9.1).

    The version is the wire's own rule; every other field is judged by the
    constructor (the wire order and §9.2's agree on every field 53 bytes can
    get wrong), and a refusal is re-labelled as the peer's.
    """
    flags, ptp_ns, source, quality, uncertainty, lts, sketch = _unpack(data)
    if flags & 0x0F != _VERSION:
        raise VersionError("version", f"must be {_VERSION}, got {flags & 0x0F}", remote=True)
    try:
        return TTExt(
            ptp_ns,
            _TS_SOURCE_BY_VALUE.get(source, source),
            _QUALITY_BY_VALUE.get(quality, quality),
            uncertainty,
            lts,
            from_wire(sketch),
            flags >> 4,
        )
    except FieldError as err:
        # The peer's words for the same rule: what the bytes held.
        rule = {
            "ptp_ns": "must not be negative",
            "ts_source": f"unknown value {source}",
            "clk_quality": f"unknown value {quality}",
            "lts": "must be below 2^63",
        }.get(err.field, err.rule)
        raise FieldError(err.field, rule, error_class=err.error_class, remote=True) from None
