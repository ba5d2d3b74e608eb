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
from collections.abc import Callable, Sequence

import mmh3
import msgspec
from opentelemetry.trace.propagation.tracecontext import TraceContextTextMapPropagator

from benchmarks.harness import Row, compare, emit, measure
from tempotrace_sdk import ClockQuality, LamportClock, Sketch, TsSource, TTExt
from tempotrace_sdk.wire.header import header_text

ENCODE_TARGET_NS = 1000.0
DECODE_TARGET_NS = 1200.0
_STRUCT = struct.Struct(">BqBBHQ32s")  # written out again: the floor must not call the codec


class _Unchecked(msgspec.Struct, frozen=True, gc=False):
    """TTExt's fields in the same kind of record, without its __post_init__: what the checks cost."""

    ptp_ns: int
    ts_source: TsSource
    clk_quality: ClockQuality
    uncertainty_ns: int
    lts: int
    svc_sketch: Sketch
    tenant_id: int


def run(min_time: float) -> list[Row]:
    rows: list[Row] = []
    clock, tai = time.clock_gettime_ns, time.CLOCK_TAI
    gte, ok = TsSource.GTE, ClockQuality.OK
    sketch = Sketch.of(0x00F067AA0BA902B7, 0x0102030405060708, 0xB7AD6B7169203331)
    sketch_raw = sketch.to_bytes()

    def m(fn: Callable[[], object]) -> float:
        return measure(fn, min_time=min_time)

    def pair(
        name: str, ours: Callable[[], object], peer_name: str, peer: Callable[[], object], target: float | None = None
    ) -> float:
        ns, _, ratio = compare(ours, peer, min_time=2 * min_time)
        rows.append(Row(name, ns, peer_name, ratio, target))
        return ns

    def alone(name: str, ours: Callable[[], object]) -> None:
        rows.append(Row(name, m(ours)))

    # -- encode: what inject does per hop ----------------------------------------
    def encode() -> str:
        return TTExt(clock(tai), gte, ok, 220, 42, sketch, 0).to_header()

    def encode_floor() -> str:
        raw = _STRUCT.pack(0x03, clock(tai), 0, 0, 220, 42, sketch_raw)
        return base64.urlsafe_b64encode(raw)[:-1].decode("ascii")

    pair("encode: clock+TTExt+text", encode, "clock+pack+b64 floor", encode_floor, ENCODE_TARGET_NS)
    header = TTExt(clock(tai), gte, ok, 220, 42, sketch, 0)
    alone("  TTExt(...) construct (validated)", lambda: TTExt(1, gte, ok, 220, 42, sketch, 0))
    alone("  to_header()", header.to_header)
    pair("  floor: clock+header_text (no record)", lambda: header_text(0, clock(tai), gte, ok, 220, 42, sketch),
         "clock+pack+b64 floor", encode_floor)  # fmt: skip

    # -- decode: what extract does per hop -------------------------------------------
    text = encode()
    padded = text + "="

    def decode_floor() -> object:
        return _STRUCT.unpack(base64.urlsafe_b64decode(padded))

    pair("decode: text->TTExt", lambda: TTExt.from_header(text), "b64+unpack floor", decode_floor, DECODE_TARGET_NS)
    fields = (1, gte, ok, 220, 42, Sketch._from_wire(sketch_raw), 0)
    pair("  floor: b64+unpack + validated record", lambda: (decode_floor(), TTExt(*fields)), "b64+unpack floor",
         decode_floor)  # fmt: skip
    pair("  floor: b64+unpack + record, no checks", lambda: (decode_floor(), _Unchecked(*fields)),
         "b64+unpack floor", decode_floor)  # fmt: skip
    w3c = TraceContextTextMapPropagator()
    carrier = {"traceparent": "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01"}
    pair("decode: text->TTExt", lambda: TTExt.from_header(text), "OTel W3C extract", lambda: w3c.extract(carrier))
    with_ows = f" \t{text} "
    pair("decode with OWS", lambda: TTExt.from_header(with_ows), "b64+unpack floor", decode_floor)
    bad = text[:-1] + "B"  # non-canonical: the slow, classifying path
    pair("decode rejected (non-canonical)", lambda: _reject(bad), "b64+unpack floor", decode_floor)

    # -- round trip and binary form --------------------------------------------------
    pair("text round trip", lambda: TTExt.from_header(header.to_header()), "floors", _roundtrip_floor(padded))
    raw = header.encode()
    pair("binary encode", header.encode, "struct.pack", lambda: _STRUCT.pack(3, 1, 0, 0, 220, 42, sketch_raw))
    pair("binary decode", lambda: TTExt.decode(raw), "struct.unpack", lambda: _STRUCT.unpack(raw))

    # -- sketch -----------------------------------------------------------------------
    fresh = itertools.count(1 << 40)

    def hash_floor() -> object:
        return mmh3.hash64(next(fresh).to_bytes(8, "big"), seed=0, x64arch=True, signed=False)

    pair("sketch add (new span id)", lambda: sketch.with_span(next(fresh)), "mmh3.hash64", hash_floor)
    pair("sketch add (cached id)", lambda: sketch.with_span(0x0102030405060708), "mmh3.hash64", hash_floor)
    other = Sketch.of(7, 8, 9)
    a_int, b_int = int(sketch), int(other)
    pair("sketch merge a | b", lambda: sketch | other, "int | int", lambda: a_int | b_int)
    pair("sketch contains (new id)", lambda: sketch.contains(next(fresh)), "mmh3.hash64", hash_floor)
    pair("sketch contains (cached id)", lambda: 0x0102030405060708 in sketch, "mmh3.hash64", hash_floor)

    # -- Lamport ------------------------------------------------------------------------
    lamport = LamportClock()
    lock = threading.Lock()
    box = [0]

    def locked_add() -> int:
        with lock:
            box[0] += 1
            return box[0]

    pair("Lamport tick", lamport.tick, "lock + int add", locked_add)
    pair("Lamport merge", lambda: lamport.merge(5), "lock + int add", locked_add)
    return rows


def _reject(text: str) -> None:
    try:
        TTExt.from_header(text)
    except ValueError:
        return
    raise AssertionError("a non-canonical text was accepted")


def _roundtrip_floor(padded: str) -> Callable[[], object]:
    def both() -> object:
        fields = _STRUCT.unpack(base64.urlsafe_b64decode(padded))
        return base64.urlsafe_b64decode(base64.urlsafe_b64encode(_STRUCT.pack(*fields)))

    return both


def main(argv: Sequence[str] | None = None) -> int:
    args = list(sys.argv[1:] if argv is None else argv)
    rows = run(min_time=0.05 if "--quick" in args else 0.3)
    emit("tt-ext v3 wire layer (median ns per call; ratio = ours / peer)", rows, args)
    if "--json" not in args:
        by: dict[str, Row] = {}
        for r in rows:
            by.setdefault(r.name.strip(), r)  # the first row of a name: the one against the floor
        print(ANALYSIS.format(
            enc=by["encode: clock+TTExt+text"].ns, enc_floor=by["floor: clock+header_text (no record)"].ns,
            ctor=by["TTExt(...) construct (validated)"].ns, dec=by["decode: text->TTExt"].ns,
            dec_ratio=by["decode: text->TTExt"].ratio, dec_floor=by["floor: b64+unpack + validated record"].ratio,
            dec_bare=by["floor: b64+unpack + record, no checks"].ratio,
        ))  # fmt: skip
    return 0


ANALYSIS = """
Floors (issue 12 targets: encode <= 1.0 µs, decode <= 1.2 µs; absolute, so they move with the
machine's load: the ratios to the same-run floors are what carry over):
- encode {enc:.0f} ns: a validated TTExt record costs {ctor:.0f} ns of it (every field checked in
  __post_init__, the price of "an invalid header cannot exist"); the send path never builds one:
  clock + header_text is {enc_floor:.0f} ns (the propagator's inject uses exactly that).
- decode {dec:.0f} ns = {dec_ratio:.2f}x the unvalidated b64+unpack floor; the floor plus the same
  record without checks is {dec_bare:.2f}x, plus the validated TTExt {dec_floor:.2f}x. Nothing is
  checked twice: the decoder itself checks only the text form (spec §5.2, one translate and one
  a2b_base64) and the version; every field rule is the constructor's __post_init__, the one
  check that makes "an invalid TTExt cannot exist" true for decoded and caller-built headers
  alike. What it costs beyond the bare record is msgspec running __post_init__ with its
  exact-type checks (needed for caller input; a decoded header always passes them), and msgspec
  has no constructor that skips __post_init__ (only __copy__ plus one force_setattr per field:
  slower, and the slot-write trick the project removed)."""


if __name__ == "__main__":
    raise SystemExit(main())
