"""Span ids' sketch bits over a column (spec/tt-ext-v3.md §8.1; spec/analysis.md §5.6): what ``order.span_mask``
gives one id at a time, for many at once.

A span without a recorded sketch is known to have its own id and its parent's in its causal past (values.py);
the reference hashes both ids for every such span, a Python call each (1.5 µs, as many span ids as spans: no
cache holds them). Here MurmurHash3 x64 128 of the 8-byte ids runs as numpy uint64 arithmetic, the
arithmetic wrapping modulo 2^64 as the C does; test_columnar_sketchmask.py checks it against mmh3.
"""

from __future__ import annotations

import numpy as np

from ...wire.layout import SKETCH_BITS, SKETCH_HASHES, SKETCH_SEED
from ..order import own_mask

__all__ = ["own_masks", "own_sketches"]

assert SKETCH_HASHES == 4 and SKETCH_BITS == 256, "written for k=4, m=256 (as wire.sketch)"

_U = np.uint64
_C1, _C2 = _U(0x87C37B91114253D5), _U(0x4CF5AD432745937F)
_LEN = _U(8)  # every key is a span id's 8 bytes


def _fmix(k: np.ndarray) -> np.ndarray:
    k ^= k >> _U(33)
    k *= _U(0xFF51AFD7ED558CCD)
    k ^= k >> _U(33)
    k *= _U(0xC4CEB9FE1A85EC53)
    k ^= k >> _U(33)
    return k


def _hashes(raw: bytes) -> tuple[np.ndarray, np.ndarray]:
    """mmh3.hash64(key, SKETCH_SEED, x64arch=True, signed=False) of each 8-byte key in ``raw``."""
    k1 = np.frombuffer(raw, dtype="<u8").copy()  # an 8-byte key is MurmurHash3's tail alone, little-endian
    k1 *= _C1
    k1 = (k1 << _U(31)) | (k1 >> _U(33))
    k1 *= _C2
    h1 = k1 ^ _U(SKETCH_SEED)
    h2 = np.full(len(h1), SKETCH_SEED, dtype=np.uint64)
    h1 ^= _LEN
    h2 ^= _LEN
    h1 += h2
    h2 += h1
    h1, h2 = _fmix(h1), _fmix(h2)
    h1 += h2
    h2 += h1
    return h1, h2


def _words(ids: list[str]) -> np.ndarray | None:
    """Each id's sketch bits as 4 uint64 words, the most significant first; None unless every id is 16 hex
    digits."""
    if ids and set(map(len, ids)) != {16}:
        return None
    try:
        raw = bytes.fromhex("".join(ids))
    except ValueError:
        return None
    if len(raw) != 8 * len(ids):  # fromhex skips whitespace: "0123456789ab    " is 6 bytes
        return None
    h1, h2 = _hashes(raw)
    n = len(ids)
    words = np.zeros((n, 4), dtype=np.uint64)
    row = np.arange(n)
    for i in range(SKETCH_HASHES):  # index (h1 + i h2) mod 256; bit index 0 is the most significant (§8.1)
        j = (h1 + _U(i) * h2) & _U(0xFF)
        words[row, (j >> _U(6)).astype(np.intp)] |= _U(1) << (_U(63) - (j & _U(63)))
    return words


def own_masks(span_id: list[str], parent: list[str], rows: list[int]) -> list[int] | None:
    """``order.own_mask(span_id[i], parent[i])`` for each i in ``rows``; None when an id is not 16 hex digits (the
    caller asks own_mask, which says what is wrong)."""
    own = _words([span_id[i] for i in rows])
    if own is None:
        return None
    parented = [k for k, i in enumerate(rows) if parent[i]]
    if parented:
        theirs = _words([parent[rows[k]] for k in parented])
        if theirs is None:
            return None
        own[parented] |= theirs
    flat = own.astype(">u8").tobytes()
    return [int.from_bytes(flat[32 * k:32 * k + 32], "big") for k in range(len(rows))]


def own_sketches(span_id: list[str], parent: list[str], rows: list[int], which: np.ndarray) -> list[int | None]:
    """A list over ``rows``: where ``which`` holds, the sketch a span without a recorded one is known to hold
    (its own id and its parent's, values.build_record), else None."""
    out: list[int | None] = [None] * len(rows)
    at = np.flatnonzero(which).tolist()
    if not at:
        return out
    want = [rows[k] for k in at]
    masks = own_masks(span_id, parent, want)
    if masks is None:  # an id that is not 16 hex digits: own_mask (span_mask) says what is wrong with it
        masks = [own_mask(span_id[i], parent[i]) for i in want]
    for k, mask in zip(at, masks, strict=True):
        out[k] = mask
    return out
