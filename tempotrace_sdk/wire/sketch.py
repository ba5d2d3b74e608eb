"""The SVC sketch: a 256-bit Bloom filter over span ids (spec/tt-ext-v3.md §3.7).

The sketch is an immutable value: adding a span id or merging returns a new
sketch, so one can be shared between threads and stored in a frozen header.
Internally it is a Python int whose most significant bit is bit index 0, so
"bit j lives in byte j // 8 under mask 0x80 >> (j % 8)" is exactly the
big-endian byte string of the int.
"""

from __future__ import annotations

import functools
from typing import ClassVar

import mmh3

from ..errors import FieldError
from ._layout import SKETCH_BITS, SKETCH_BYTES, SKETCH_HASHES, SKETCH_SEED, SPAN_ID_MAX

__all__ = ["Sketch", "sketch_indices", "span_id_bytes"]

_MASK64 = 2**64 - 1
_FULL = (1 << SKETCH_BITS) - 1


def span_id_bytes(span_id: int | bytes) -> bytes:
    """Return the 8-byte big-endian form of a span id (int or bytes)."""
    if isinstance(span_id, int) and not isinstance(span_id, bool):
        if not 0 <= span_id <= SPAN_ID_MAX:
            raise FieldError("span_id", "must be an unsigned 64-bit integer", error_class="SPAN_ID")
        return span_id.to_bytes(8, "big")
    if isinstance(span_id, (bytes, bytearray, memoryview)):
        raw = bytes(span_id)
        if len(raw) != 8:
            raise FieldError("span_id", "must be exactly 8 bytes", error_class="SPAN_ID")
        return raw
    raise FieldError("span_id", "must be an int or 8 bytes", error_class="SPAN_ID")


@functools.lru_cache(maxsize=4096)
def _indices_and_mask(raw: bytes) -> tuple[tuple[int, ...], int]:
    h1, h2 = mmh3.hash64(raw, seed=SKETCH_SEED, x64arch=True, signed=False)
    indices = tuple(((h1 + i * h2) & _MASK64) % SKETCH_BITS for i in range(SKETCH_HASHES))
    mask = 0
    for j in indices:
        mask |= 1 << (SKETCH_BITS - 1 - j)
    return indices, mask


def sketch_indices(span_id: int | bytes) -> tuple[int, ...]:
    """The K bit indices (0..255) a span id sets, in hash order i = 0..K-1."""
    return _indices_and_mask(span_id_bytes(span_id))[0]


class Sketch:
    """An immutable 256-bit SVC Bloom sketch."""

    __slots__ = ("_bits",)
    _bits: int
    EMPTY: ClassVar[Sketch]

    def __init__(self, bits: int = 0) -> None:
        if not isinstance(bits, int) or isinstance(bits, bool) or not 0 <= bits <= _FULL:
            raise FieldError("svc_sketch", "must be a 256-bit unsigned integer")
        object.__setattr__(self, "_bits", bits)

    # -- construction -----------------------------------------------------
    @classmethod
    def from_bytes(cls, raw: bytes) -> Sketch:
        """Build a sketch from its 32-byte wire form."""
        if len(raw) != SKETCH_BYTES:
            raise FieldError("svc_sketch", f"must be exactly {SKETCH_BYTES} bytes")
        return cls._from_int(int.from_bytes(raw, "big"))

    @classmethod
    def of(cls, *span_ids: int | bytes) -> Sketch:
        """A sketch holding exactly the given span ids."""
        bits = 0
        for span_id in span_ids:
            bits |= _indices_and_mask(span_id_bytes(span_id))[1]
        return cls._from_int(bits)

    @classmethod
    def _from_int(cls, bits: int) -> Sketch:
        # Trusted path: callers guarantee 0 <= bits < 2**256.
        self = object.__new__(cls)
        object.__setattr__(self, "_bits", bits)
        return self

    # -- operations -------------------------------------------------------
    def with_span(self, span_id: int | bytes) -> Sketch:
        """This sketch plus one span id."""
        return Sketch._from_int(self._bits | _indices_and_mask(span_id_bytes(span_id))[1])

    def union(self, other: Sketch) -> Sketch:
        """Merge two sketches (bitwise OR, spec §3.7)."""
        return Sketch._from_int(self._bits | other._bits)

    __or__ = union

    def contains(self, span_id: int | bytes) -> bool:
        """True when all K bits of ``span_id`` are set (possibly a false positive)."""
        mask = _indices_and_mask(span_id_bytes(span_id))[1]
        return self._bits & mask == mask

    __contains__ = contains

    def issubset(self, other: Sketch) -> bool:
        """True when every bit set here is set in ``other``."""
        return self._bits & ~other._bits == 0

    @property
    def popcount(self) -> int:
        """Number of bits set (0..256)."""
        return bin(self._bits).count("1")

    @property
    def fill(self) -> float:
        """Fraction of bits set."""
        return self.popcount / SKETCH_BITS

    def false_positive_rate(self) -> float:
        """Estimated probability that ``contains`` is wrong for a span id
        that was never added: (popcount / 256) ** 4 (spec §3.7)."""
        return self.fill**SKETCH_HASHES

    def to_bytes(self) -> bytes:
        """The 32-byte wire form."""
        return self._bits.to_bytes(SKETCH_BYTES, "big")

    def __int__(self) -> int:
        return self._bits

    def __bool__(self) -> bool:
        return self._bits != 0

    # -- value semantics --------------------------------------------------
    def __setattr__(self, name: str, value: object) -> None:
        raise AttributeError("Sketch is immutable")

    def __eq__(self, other: object) -> bool:
        return isinstance(other, Sketch) and other._bits == self._bits

    def __hash__(self) -> int:
        return hash(self._bits)

    def __repr__(self) -> str:
        return f"Sketch(popcount={self.popcount}, hex={self.to_bytes().hex()})"

    def __reduce__(self) -> tuple[type[Sketch], tuple[int]]:
        return (Sketch, (self._bits,))


Sketch.EMPTY = Sketch()
