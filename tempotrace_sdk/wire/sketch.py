"""The SVC sketch: a 256-bit Bloom filter over span ids (spec/tt-ext-v3.md §8).

The sketch is an immutable value: adding a span id or merging returns a new
sketch, so one can be shared between threads and stored in a frozen header.
Internally it is a Python int whose most significant bit is bit index 0, so
"bit j lives in byte j // 8 under mask 0x80 >> (j % 8)" is exactly the
big-endian byte string of the int.

Either form is computed on first use and cached: a decoded header keeps the
32 wire bytes and only converts them to an int when a sketch operation needs
it (most received headers are forwarded or stored, never queried), and a
sketch built by operations converts to bytes once however often it is sent.
"""

from __future__ import annotations

import binascii
import functools
from typing import ClassVar

import mmh3

from ..errors import FieldError
from .layout import SKETCH_BITS, SKETCH_BYTES, SKETCH_HASHES, SKETCH_SEED, SPAN_ID_MAX

assert SKETCH_HASHES == 4 and SKETCH_BITS == 256, "_indices_and_mask is written out for k=4, m=256"

__all__ = ["Sketch", "sketch_indices", "span_id_bytes"]

_hash64 = mmh3.hash64
_b2a = binascii.b2a_base64
_TO_URL = bytes.maketrans(b"+/", b"-_")
#: The int of bit index j alone: index 0 is the most significant bit (spec §8.1).
_BIT = tuple(1 << (SKETCH_BITS - 1 - j) for j in range(SKETCH_BITS))
_FULL = (1 << SKETCH_BITS) - 1


def span_id_bytes(span_id: int | bytes) -> bytes:
    """Return the 8-byte big-endian form of a span id (int or bytes), spec §8.1."""
    if type(span_id) is int:  # the common case, checked first
        if 0 <= span_id <= SPAN_ID_MAX:
            return span_id.to_bytes(8, "big")
    elif isinstance(span_id, int) and not isinstance(span_id, bool):
        if 0 <= span_id <= SPAN_ID_MAX:
            return int(span_id).to_bytes(8, "big")
    elif isinstance(span_id, (bytes, bytearray, memoryview)):
        raw = bytes(span_id)
        if len(raw) == 8:
            return raw
        raise FieldError("span_id", f"must be exactly 8 bytes, got {len(raw)}", error_class="SPAN_ID")
    else:
        raise FieldError("span_id", "must be an int or 8 bytes", error_class="SPAN_ID")
    raise FieldError("span_id", "must be an unsigned 64-bit integer", error_class="SPAN_ID")


@functools.lru_cache(maxsize=4096)
def _indices_and_mask(raw: bytes) -> tuple[tuple[int, int, int, int], int]:
    # Cached: a span's id is hashed when it starts, again for each child and
    # each send, and in every membership test against it.
    h1, h2 = _hash64(raw, SKETCH_SEED, True, False)  # seed, x64arch, signed: positional is faster
    # ((h1 + i*h2) mod 2^64) mod 256 == (h1 + i*h2) mod 256, as 256 divides
    # 2^64 (spec §8.1); K = 4 written out, which is several times faster
    # than a generator on this path.
    i0 = h1 & 0xFF
    i1 = (h1 + h2) & 0xFF
    i2 = (h1 + 2 * h2) & 0xFF
    i3 = (h1 + 3 * h2) & 0xFF
    bit = _BIT
    return (i0, i1, i2, i3), bit[i0] | bit[i1] | bit[i2] | bit[i3]


def _mask(span_id: int | bytes) -> int:
    return _indices_and_mask(span_id_bytes(span_id))[1]


def sketch_indices(span_id: int | bytes) -> tuple[int, ...]:
    """The K bit indices (0..255) a span id sets, in hash order i = 0..K-1."""
    return _indices_and_mask(span_id_bytes(span_id))[0]


class Sketch:
    """An immutable 256-bit SVC Bloom sketch.

    Immutable the way ``fractions.Fraction`` is: no public attribute can be
    set (slots, no ``__dict__``) and no method mutates; the private slots
    are written only here. There is deliberately no ``__setattr__``
    override: it would turn every slot store into a slow generic call, and a
    received header builds one sketch per decode.
    """

    # _b: the bits as an int, or None until needed; _r: the 32 wire bytes, or
    # None until needed (at least one of the two is always set); _t: the
    # 43-character base64url text of the 32 bytes, or None until needed.
    __slots__ = ("_b", "_r", "_t")
    _b: int | None
    _r: bytes | None
    _t: str | None
    EMPTY: ClassVar[Sketch]

    def __init__(self, bits: int = 0) -> None:
        if not isinstance(bits, int) or isinstance(bits, bool) or not 0 <= bits <= _FULL:
            raise FieldError("svc_sketch", "must be a 256-bit unsigned integer", error_class="SVC_SKETCH")
        self._b = int(bits)
        self._r = None
        self._t = None

    # -- construction -----------------------------------------------------
    @classmethod
    def from_bytes(cls, raw: bytes | bytearray | memoryview) -> Sketch:
        """Build a sketch from its 32-byte wire form."""
        if not isinstance(raw, (bytes, bytearray, memoryview)):
            raise FieldError("svc_sketch", "must be 32 bytes", error_class="SVC_SKETCH")
        raw = bytes(raw)  # a memoryview's len() counts items, not bytes
        if len(raw) != SKETCH_BYTES:
            raise FieldError(
                "svc_sketch", f"must be exactly {SKETCH_BYTES} bytes, got {len(raw)}", error_class="SVC_SKETCH"
            )
        return _new(None, raw)

    @classmethod
    def of(cls, *span_ids: int | bytes) -> Sketch:
        """A sketch holding exactly the given span ids."""
        bits = 0
        for span_id in span_ids:
            bits |= _mask(span_id)
        return _new(bits, None)

    @classmethod
    def _from_int(cls, bits: int) -> Sketch:
        # Trusted path: callers guarantee 0 <= bits < 2**256.
        return _new(bits, None)

    @classmethod
    def _from_wire(cls, raw: bytes) -> Sketch:
        # Trusted path: callers guarantee exactly 32 bytes.
        return from_wire(raw)

    # -- the two representations --------------------------------------------
    @property
    def _bits(self) -> int:
        bits = self._b
        if bits is None:
            bits = int.from_bytes(self._r, "big")  # type: ignore[arg-type]
            self._b = bits  # a benign race: every thread stores the same value
        return bits

    def to_bytes(self) -> bytes:
        """The 32-byte wire form."""
        raw = self._r
        if raw is None:
            raw = self._b.to_bytes(SKETCH_BYTES, "big")  # type: ignore[union-attr]
            self._r = raw
        return raw

    def _text(self) -> str:
        # The sketch starts at byte 21 = 7 * 3 of the header, on a base64
        # group boundary, so its 43 characters are the last 43 of the
        # header's text whatever the other fields hold (spec §5.1): cached,
        # a sketch that is sent many times is encoded once.
        text = self._t
        if text is None:
            text = _b2a(self.to_bytes(), newline=False).translate(_TO_URL, b"=").decode()
            self._t = text
        return text

    # -- operations -------------------------------------------------------
    def with_span(self, span_id: int | bytes) -> Sketch:
        """This sketch plus one span id."""
        bits = self._b
        return _new((self._bits if bits is None else bits) | _mask(span_id), None)

    def union(self, other: Sketch) -> Sketch:
        """Merge two sketches (bitwise OR, spec §8.3)."""
        a, b = self._b, other._b
        return _new((self._bits if a is None else a) | (other._bits if b is None else b), None)

    __or__ = union

    def contains(self, span_id: int | bytes) -> bool:
        """True when all K bits of ``span_id`` are set (possibly a false positive, spec §8.4)."""
        mask = _mask(span_id)
        return self._bits & mask == mask

    __contains__ = contains

    def issubset(self, other: Sketch) -> bool:
        """True when every bit set here is set in ``other``."""
        return self._bits & ~other._bits == 0

    @property
    def popcount(self) -> int:
        """Number of bits set (0..256)."""
        return self._bits.bit_count()

    @property
    def fill(self) -> float:
        """Fraction of bits set."""
        return self.popcount / SKETCH_BITS

    def false_positive_rate(self) -> float:
        """Estimated probability that ``contains`` is wrong for a span id
        that was never added: (popcount / 256) ** 4 (spec §8.4). Assumes
        independent uniform hash bits; conditional on this sketch's fill."""
        return float(self.popcount**SKETCH_HASHES / SKETCH_BITS**SKETCH_HASHES)

    def __int__(self) -> int:
        return self._bits

    def __bool__(self) -> bool:
        return self._bits != 0

    # -- value semantics --------------------------------------------------
    def __eq__(self, other: object) -> bool:
        if not isinstance(other, Sketch):
            return NotImplemented
        if self._r is not None and other._r is not None:
            return self._r == other._r
        return other._bits == self._bits

    def __hash__(self) -> int:
        return hash(self._bits)

    def __repr__(self) -> str:
        return f"Sketch(popcount={self.popcount}, hex={self.to_bytes().hex()})"

    def __reduce__(self) -> tuple[type[Sketch], tuple[int]]:
        return (Sketch, (self._bits,))


_object_new = object.__new__


def from_wire(raw: bytes) -> Sketch:
    """A sketch of exactly 32 bytes the caller guarantees (a decoder, the native stamp): no check,
    no conversion; the int form is made only if a sketch operation needs it."""
    obj = _object_new(Sketch)
    obj._b = None
    obj._r = raw
    obj._t = None
    return obj


def _new(bits: int | None, raw: bytes | None) -> Sketch:
    # Plain slot stores (no __setattr__ override, see the class docstring).
    obj = _object_new(Sketch)
    obj._b = bits
    obj._r = raw
    obj._t = None
    return obj


Sketch.EMPTY = Sketch()
