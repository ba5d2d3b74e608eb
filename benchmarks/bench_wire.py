"""Wire-layer benchmarks: each operation beside a peer or floor run in the same process.

    .venv/bin/python -m benchmarks.bench_wire [--json] [--quick]

Ratios are ours / peer (lower is better). Targets from issue 2 (2-core box):
encode (clock read + TTExt construct + pack + text) <= 1.0 µs and decode
(text -> validated TTExt) <= 1.2 µs. The floors do the same byte work with
no validation at all, so they show what the rules cost; OTel's W3C
TraceContext extract is the peer a user compares us with.
"""

from __future__ import annotations

import base64
import itertools
import struct
import sys
import threading
import time
from collections.abc import Sequence

import mmh3
from opentelemetry.trace.propagation.tracecontext import TraceContextTextMapPropagator

from benchmarks.harness import Row, emit, measure
from tempotrace_sdk import ClockQuality, LamportClock, Sketch, TsSource, TTExt

ENCODE_TARGET_NS = 1000.0
DECODE_TARGET_NS = 1200.0
_STRUCT = struct.Struct(">BqBBHQ32s")  # written out again: the floor must not call the codec


def run(min_time: float) -> list[Row]:
    rows: list[Row] = []
    clock, tai = time.clock_gettime_ns, time.CLOCK_TAI
    gte, ok = TsSource.GTE, ClockQuality.OK
    sketch = Sketch.of(0x00F067AA0BA902B7, 0x0102030405060708, 0xB7AD6B7169203331)
    sketch_raw = sketch.to_bytes()

    def m(fn: object) -> float:
        return measure(fn, min_time=min_time)  # type: ignore[arg-type]

    def add(name: str, ours: float, peer_name: str | None, peer: float | None, target: float | None = None) -> None:
        rows.append(Row(name, ours, peer_name, None if peer is None else ours / peer, target))

    # -- encode: what inject does per hop ----------------------------------------
    def encode() -> str:
        return TTExt(clock(tai), gte, ok, 220, 42, sketch, 0).to_header()

    def encode_floor() -> str:
        raw = _STRUCT.pack(0x03, clock(tai), 0, 0, 220, 42, sketch_raw)
        return base64.urlsafe_b64encode(raw)[:-1].decode("ascii")

    floor = m(encode_floor)
    add("encode: clock+TTExt+text", m(encode), "clock+pack+b64 floor", floor, ENCODE_TARGET_NS)
    header = TTExt(clock(tai), gte, ok, 220, 42, sketch, 0)
    add("  TTExt(...) construct", m(lambda: TTExt(1, gte, ok, 220, 42, sketch, 0)), None, None)
    add("  to_header()", m(header.to_header), None, None)

    # -- decode: what extract does per hop -------------------------------------------
    text = encode()
    padded = text + "="
    floor = m(lambda: _STRUCT.unpack(base64.urlsafe_b64decode(padded)))
    ours = m(lambda: TTExt.from_header(text))
    add("decode: text->TTExt", ours, "b64+unpack floor", floor, DECODE_TARGET_NS)
    w3c = TraceContextTextMapPropagator()
    carrier = {"traceparent": "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01"}
    add("decode: text->TTExt", ours, "OTel W3C extract", m(lambda: w3c.extract(carrier)))
    with_ows = f" \t{text} "
    add("decode with OWS", m(lambda: TTExt.from_header(with_ows)), "b64+unpack floor", floor)
    bad = text[:-1] + "B"  # non-canonical: the slow, classifying path
    add("decode rejected (non-canonical)", m(lambda: _reject(bad)), "b64+unpack floor", floor)

    # -- round trip and binary form --------------------------------------------------
    add("text round trip", m(lambda: TTExt.from_header(header.to_header())), "floors", m(_roundtrip_floor(padded)))
    raw = header.encode()
    add("binary encode", m(header.encode), "struct.pack", m(lambda: _STRUCT.pack(3, 1, 0, 0, 220, 42, sketch_raw)))
    add("binary decode", m(lambda: TTExt.decode(raw)), "struct.unpack", m(lambda: _STRUCT.unpack(raw)))

    # -- sketch -----------------------------------------------------------------------
    fresh = itertools.count(1 << 40)
    hash_floor = m(lambda: mmh3.hash64(next(fresh).to_bytes(8, "big"), seed=0, x64arch=True, signed=False))
    add("sketch add (new span id)", m(lambda: sketch.with_span(next(fresh))), "mmh3.hash64", hash_floor)
    add("sketch add (cached id)", m(lambda: sketch.with_span(0x0102030405060708)), "mmh3.hash64", hash_floor)
    other = Sketch.of(7, 8, 9)
    a_int, b_int = int(sketch), int(other)
    add("sketch merge a | b", m(lambda: sketch | other), "int | int", m(lambda: a_int | b_int))
    add("sketch contains (new id)", m(lambda: sketch.contains(next(fresh))), "mmh3.hash64", hash_floor)
    add("sketch contains (cached id)", m(lambda: 0x0102030405060708 in sketch), "mmh3.hash64", hash_floor)

    # -- Lamport ------------------------------------------------------------------------
    lamport = LamportClock()
    lock = threading.Lock()
    box = [0]

    def locked_add() -> int:
        with lock:
            box[0] += 1
            return box[0]

    lock_floor = m(locked_add)
    add("Lamport tick", m(lamport.tick), "lock + int add", lock_floor)
    add("Lamport merge", m(lambda: lamport.merge(5)), "lock + int add", lock_floor)
    return rows


def _reject(text: str) -> None:
    try:
        TTExt.from_header(text)
    except ValueError:
        return
    raise AssertionError("a non-canonical text was accepted")


def _roundtrip_floor(padded: str) -> object:
    def both() -> object:
        fields = _STRUCT.unpack(base64.urlsafe_b64decode(padded))
        return base64.urlsafe_b64decode(base64.urlsafe_b64encode(_STRUCT.pack(*fields)))

    return both


def main(argv: Sequence[str] | None = None) -> int:
    args = list(sys.argv[1:] if argv is None else argv)
    rows = run(min_time=0.05 if "--quick" in args else 0.3)
    emit("tt-ext v3 wire layer (median ns per call; ratio = ours / peer)", rows, args)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
