"""OpenTelemetry layer costs, as ratios against peers measured in the same run.

    python -m benchmarks.bench_otel [--json] [--clock SPEC] [--rounds N]

Ours and the peer are measured in alternating rounds and every ratio is the
median of the per-round ratios, so a load change on a shared machine moves
both sides of a ratio together instead of landing on one of them.

Per span: a bare SDK span (provider with no processor) is the floor; our
processor's overhead (ours - bare) is compared with the bare span itself
(target <= 20%) and with a SimpleSpanProcessor feeding a no-op exporter.
"Required work alone" is a processor doing only what the spec demands of
every span (two clock reads, two Lamport ticks, the span id hashed into the
sketch, the attributes stored): the least any implementation on these
clock and wire layers can add.
Propagator: inject/extract of tt-ext side by side with W3C TraceContext
(targets 0.5x and 0.6x; malformed input 1.0x).
"""

from __future__ import annotations

import argparse
import statistics
import sys
from collections.abc import Callable, Sequence
from pathlib import Path

if __package__ in (None, ""):  # run as a script: make the repo root importable
    sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from opentelemetry import context as context_api
from opentelemetry import trace
from opentelemetry.sdk.trace import ReadableSpan, Span, SpanProcessor, TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor, SpanExporter, SpanExportResult
from opentelemetry.trace.propagation.tracecontext import TraceContextTextMapPropagator

from benchmarks.harness import Row, as_json, measure, print_table
from tempotrace_sdk.clocks.select import select_clock
from tempotrace_sdk.otel import TempoTracePropagator, TempoTraceSpanProcessor, TempoTraceState
from tempotrace_sdk.otel.context import get_state
from tempotrace_sdk.otel.sdk_internals import attribute_store as _direct_store
from tempotrace_sdk.wire import LamportClock, Sketch


class NullExporter(SpanExporter):
    def export(self, spans: Sequence[ReadableSpan]) -> SpanExportResult:
        return SpanExportResult.SUCCESS


class Paired:
    """Median ns of each function and median per-round ratios, from alternating rounds."""

    def __init__(self, fns: dict[str, Callable[[], object]], rounds: int, min_time: float) -> None:
        self.samples: dict[str, list[float]] = {name: [] for name in fns}
        for _ in range(rounds):
            for name, fn in fns.items():
                self.samples[name].append(measure(fn, min_time=min_time, repeat=3))

    def ns(self, name: str) -> float:
        return statistics.median(self.samples[name])

    def ratio(self, ours: str, peer: str) -> float:
        return statistics.median(a / b for a, b in zip(self.samples[ours], self.samples[peer], strict=True))

    def overhead(self, ours: str, base: str) -> float:
        """Median of (ours - base) / base: the fraction ours adds to base."""
        return statistics.median((a - b) / b for a, b in zip(self.samples[ours], self.samples[base], strict=True))


class RequiredWork(SpanProcessor):
    """Only the per-span work the spec requires, with our clock and wire layers."""

    def __init__(self, state: TempoTraceState) -> None:
        self.clock, self.lamport = state.clock, LamportClock()

    def on_start(self, span: Span, parent_context: context_api.Context | None = None) -> None:
        ts, lts = self.clock.now(), self.lamport.tick()
        sketch = Sketch.EMPTY.with_span(span.get_span_context().span_id)
        attrs = {"a": ts.ptp_ns, "b": ts.uncertainty_ns, "c": "OK", "d": "CPU", "e": lts, "f": 1}
        attrs.update({"g": sketch.to_bytes().hex(), "h": "cpu", "i": "host"})
        store = _direct_store(span, len(attrs))
        assert store is not None
        store.update(attrs)

    def _on_ending(self, span: Span) -> None:
        ts, lts = self.clock.now(), self.lamport.tick()
        store = _direct_store(span, 4)
        assert store is not None
        store.update({"j": ts.ptp_ns, "k": ts.uncertainty_ns, "l": "OK", "m": lts})


def _tracer(*processors: object) -> trace.Tracer:
    provider = TracerProvider()
    for p in processors:
        provider.add_span_processor(p)  # type: ignore[arg-type]
    return provider.get_tracer("bench")


def _current(tracer: trace.Tracer) -> None:
    with tracer.start_as_current_span("op"):
        pass


def span_rows(state: TempoTraceState, rounds: int, min_time: float) -> list[Row]:
    bare = _tracer()
    simple = _tracer(SimpleSpanProcessor(NullExporter()))
    ours = _tracer(TempoTraceSpanProcessor(state=state))
    required = _tracer(RequiredWork(state))
    p = Paired(
        {
            "bare": lambda: bare.start_span("op").end(),
            "simple": lambda: simple.start_span("op").end(),
            "ours": lambda: ours.start_span("op").end(),
            "required": lambda: required.start_span("op").end(),
            "bare_cur": lambda: _current(bare),
            "ours_cur": lambda: _current(ours),
        },
        rounds,
        min_time,
    )
    t_bare = p.ns("bare")
    ours_frac, simple_frac = p.overhead("ours", "bare"), p.overhead("simple", "bare")
    return [
        Row("bare SDK span (start+end)", t_bare),
        Row("span + SimpleSpanProcessor(null)", p.ns("simple"), "bare span", p.ratio("simple", "bare")),
        Row("span + TempoTraceSpanProcessor", p.ns("ours"), "bare span", p.ratio("ours", "bare")),
        Row("  our overhead per span", ours_frac * t_bare, "bare span", ours_frac, 0.20 * t_bare),
        Row("  our overhead per span", ours_frac * t_bare, "Simple's overhead", ours_frac / max(simple_frac, 1e-9)),
        Row(
            "  required work alone (see doc)",
            p.overhead("required", "bare") * t_bare,
            "bare span",
            p.overhead("required", "bare"),
        ),
        # The usual way spans are made (context attached): same overhead, larger base.
        Row("bare `with start_as_current_span`", p.ns("bare_cur")),
        Row(
            "  our overhead per span",
            p.overhead("ours_cur", "bare_cur") * p.ns("bare_cur"),
            "bare with-span",
            p.overhead("ours_cur", "bare_cur"),
            0.20 * p.ns("bare_cur"),
        ),
    ]


def propagator_rows(state: TempoTraceState, rounds: int, min_time: float) -> list[Row]:
    w3c = TraceContextTextMapPropagator()
    ours = TempoTracePropagator(state=state)
    tracer = _tracer(TempoTraceSpanProcessor(state=state))
    sp = tracer.start_span("client")  # a live span we track: the realistic inject path
    ctx = trace.set_span_in_context(sp)
    record = state.live[sp.get_span_context().span_id]

    def inject_ours() -> None:
        ours.inject({}, ctx)
        record.sends = None  # keep the send list from growing across millions of calls

    carrier_w3c: dict[str, str] = {}
    w3c.inject(carrier_w3c, ctx)
    carrier_ours: dict[str, str] = {}
    ours.inject(carrier_ours, ctx)
    sp.end()
    bad_w3c = {"traceparent": "00-" + "z" * 32 + "-" + "b" * 16 + "-01"}
    bad_ours = {"tt-ext": carrier_ours["tt-ext"][:-1] + "!"}

    p = Paired(
        {
            "inj_w3c": lambda: w3c.inject({}, ctx),
            "inj": inject_ours,
            "ext_w3c": lambda: w3c.extract(carrier_w3c),
            "ext": lambda: ours.extract(carrier_ours),
            "bad_w3c": lambda: w3c.extract(bad_w3c),
            "bad": lambda: ours.extract(bad_ours),
        },
        rounds,
        min_time,
    )
    return [
        Row("W3C traceparent inject", p.ns("inj_w3c")),
        Row("tt-ext inject (send event)", p.ns("inj"), "W3C inject", p.ratio("inj", "inj_w3c"), 0.5 * p.ns("inj_w3c")),
        Row("W3C traceparent extract", p.ns("ext_w3c")),
        Row(
            "tt-ext extract (receive event)",
            p.ns("ext"),
            "W3C extract",
            p.ratio("ext", "ext_w3c"),
            0.6 * p.ns("ext_w3c"),
        ),
        Row("W3C extract, malformed", p.ns("bad_w3c")),
        Row("tt-ext extract, malformed", p.ns("bad"), "W3C extract", p.ratio("bad", "ext_w3c"), p.ns("ext_w3c")),
        Row("tt-ext extract, malformed", p.ns("bad"), "W3C malformed", p.ratio("bad", "bad_w3c")),
    ]


def main(argv: Sequence[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--json", action="store_true")
    parser.add_argument("--clock", default="cpu", help="clock spec for the stamps (default: cpu)")
    parser.add_argument("--rounds", type=int, default=15, help="alternating rounds (default 15)")
    parser.add_argument("--min-time", type=float, default=0.03, help="seconds per measurement in a round")
    args = parser.parse_args(argv)
    state = TempoTraceState(clock=select_clock(args.clock), tenant=1, host="bench")
    clock_ns = measure(state.clock.now, min_time=args.min_time)
    spans = [*span_rows(state, args.rounds, args.min_time), Row(f"clock.now() [{state.clock.name}]", clock_ns)]
    props = propagator_rows(state, args.rounds, args.min_time)
    assert state.errors() == {} and get_state() is not state
    if args.json:
        import json

        print(json.dumps([as_json("otel: per-span cost", spans), as_json("otel: propagator", props)], indent=2))
    else:
        print_table("otel: per-span cost", spans)
        print_table("otel: propagator", props)


if __name__ == "__main__":
    main()
