"""SVC sketch vectors (spec §8), from reference.py.

Every MurmurHash3 result is cross-checked against the mmh3 package, so the
written-out reference and a widely used implementation must agree before a
vector is written.
"""

from __future__ import annotations

import random
from typing import Any

import mmh3
from reference import murmur3_x64_128, popcount, sketch_indices, sketch_of


def _hash(span_id: bytes) -> tuple[int, int]:
    ours = murmur3_x64_128(span_id, 0)
    theirs = mmh3.hash64(span_id, seed=0, x64arch=True, signed=False)
    assert ours == tuple(theirs), span_id.hex()
    return ours


def _ids(seed: int, n: int) -> list[bytes]:
    rng = random.Random(seed)
    return [rng.getrandbits(64).to_bytes(8, "big") for _ in range(n)]


def _hash_case(comment: str, flags: list[str], span_id: bytes) -> dict[str, Any]:
    h1, h2 = _hash(span_id)
    indices = sketch_indices(span_id)
    return {
        "comment": comment,
        "flags": flags,
        "spanId": span_id.hex(),
        "result": "valid",
        "h1": str(h1),
        "h2": str(h2),
        "indices": indices,
        "sketch": sketch_of(span_id).hex(),
        "popcount": popcount(sketch_of(span_id)),
    }


def _find(pred: Any, start: int = 0) -> bytes:
    # Deterministic search over span ids start, start+1, ... (as 8 bytes).
    n = start
    while True:
        span_id = n.to_bytes(8, "big")
        if pred(sketch_indices(span_id)):
            return span_id
        n += 1


def hashing() -> list[dict[str, Any]]:
    fixed = [
        ("0000000000000000", "all-zero span id (invalid in W3C, still hashable)"),
        ("0000000000000001", "span id 1"),
        ("ffffffffffffffff", "all-ones span id"),
        ("0102030405060708", "bytes 01..08: shows the little-endian block read"),
        ("8000000000000000", "only the top bit set"),
        ("00f067aa0ba902b7", "the W3C traceparent example span id"),
        ("b7ad6b7169203331", "the W3C tracestate example span id"),
    ]
    out = [_hash_case(comment, ["SpanIdHash"], bytes.fromhex(hex_id)) for hex_id, comment in fixed]
    out += [_hash_case(f"pseudo-random span id #{i}", ["SpanIdHash"], s) for i, s in enumerate(_ids(2, 12))]
    pair = _find(lambda ix: len(set(ix)) < 4)
    out.append(
        _hash_case("two of the four indices coincide: 3 bits or fewer set", ["SpanIdHash", "IndexCollision"], pair)
    )
    same = _find(lambda ix: len(set(ix)) == 1)
    out.append(_hash_case("h2 = 0 mod 256: all four indices equal, 1 bit set", ["SpanIdHash", "IndexCollision"], same))
    for raw, comment in ((b"", "empty span id"), (bytes(7), "7-byte span id"), (bytes(9), "9-byte span id")):
        out.append(
            {
                "comment": comment,
                "flags": ["SpanIdLength"],
                "spanId": raw.hex(),
                "result": "invalid",
                "errorClass": "SPAN_ID",
            }
        )
    return out


def _or(sketches: list[bytes]) -> bytes:
    out = bytearray(32)
    for s in sketches:
        for i, b in enumerate(s):
            out[i] |= b
    return bytes(out)


def _merge_case(comment: str, sketches: list[bytes]) -> dict[str, Any]:
    merged = _or(sketches)
    return {
        "comment": comment,
        "flags": ["Merge"],
        "sketches": [s.hex() for s in sketches],
        "result": "valid",
        "merged": merged.hex(),
        "popcount": popcount(merged),
    }


def merging() -> list[dict[str, Any]]:
    a, b, c, d, e = _ids(3, 5)
    sa, sb = sketch_of(a), sketch_of(b)
    many = [sketch_of(x) for x in _ids(4, 5)]
    return [
        _merge_case("merging nothing gives the empty sketch", []),
        _merge_case("one sketch merges to itself", [sa]),
        _merge_case("two single-span sketches", [sa, sb]),
        _merge_case("merge with the empty sketch is the identity", [sa, bytes(32)]),
        _merge_case("merge with the full sketch is full", [sa, b"\xff" * 32]),
        _merge_case("merging a sketch with itself changes nothing", [sa, sa]),
        _merge_case("complementary halves make a full sketch", [b"\xf0" * 32, b"\x0f" * 32]),
        _merge_case("five single-span sketches", many),
        _merge_case("a three-span sketch and a two-span sketch", [sketch_of(c, d, e), sketch_of(a, b)]),
    ]


def _member_case(comment: str, flags: list[str], sketch: bytes, span_id: bytes) -> dict[str, Any]:
    bits = [sketch[j // 8] & (0x80 >> (j % 8)) for j in sketch_indices(span_id)]
    count = popcount(sketch)
    return {
        "comment": comment,
        "flags": ["Membership", *flags],
        "sketch": sketch.hex(),
        "spanId": span_id.hex(),
        "result": "valid",
        "member": all(bits),
        "popcount": count,
        # Exact in binary floating point: count^4 / 2^32 with count <= 256.
        "falsePositiveEstimate": count**4 / 2**32,
    }


def membership() -> list[dict[str, Any]]:
    ids = _ids(5, 30)
    s1 = sketch_of(ids[0])
    s20 = sketch_of(*ids[:20])
    outsider = next(x for x in ids[20:] if not all(s20[j // 8] & (0x80 >> (j % 8)) for j in sketch_indices(x)))
    dense = sketch_of(*_ids(6, 60))

    def in_dense(ix: list[int]) -> bool:
        return all(dense[j // 8] & (0x80 >> (j % 8)) for j in ix)

    false_positive = _find(in_dense, start=1 << 40)
    assert false_positive not in _ids(6, 60)
    return [
        _member_case("empty sketch contains nothing", [], bytes(32), ids[0]),
        _member_case("full sketch 'contains' everything: estimate 1.0", [], b"\xff" * 32, ids[0]),
        _member_case("a span id is in its own sketch", [], s1, ids[0]),
        _member_case("another span id is not in a one-span sketch", [], s1, ids[1]),
        _member_case("first of 20 added span ids", [], s20, ids[0]),
        _member_case("last of 20 added span ids", [], s20, ids[19]),
        _member_case("a span id never added to a 20-span sketch", [], s20, outsider),
        _member_case(
            "a span id never added, yet all its bits are set in a 60-span sketch",
            ["FalsePositive"],
            dense,
            false_positive,
        ),
        _member_case("three of four bits set is not membership", [], _drop_one(sketch_of(ids[2]), ids[2]), ids[2]),
    ]


def _drop_one(sketch: bytes, span_id: bytes) -> bytes:
    out = bytearray(sketch)
    j = sketch_indices(span_id)[3]
    if sum(1 for i in sketch_indices(span_id) if i == j) > 1:  # pragma: no cover - not for this id
        raise AssertionError("pick a span id without index collisions")
    out[j // 8] &= ~(0x80 >> (j % 8)) & 0xFF
    return bytes(out)
