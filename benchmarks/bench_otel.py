"""OpenTelemetry layer costs, as ratios against peers measured in the same run.

    python -m benchmarks.bench_otel [--json] [--clock SPEC]

Per span: a bare SDK span (provider with no processor) is the floor; our
processor's overhead (ours - bare) is compared with the bare span itself
(target <= 20%) and with a SimpleSpanProcessor feeding a no-op exporter.
Propagator: inject/extract of tt-ext side by side with W3C TraceContext
(targets 0.5x and 0.6x; malformed input 1.0x).
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Sequence
from pathlib import Path

if __package__ in (None, ""):  # run as a script: make the repo root importable
    sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from opentelemetry import trace
from opentelemetry.sdk.trace import ReadableSpan, TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor, SpanExporter, SpanExportResult
from opentelemetry.trace.propagation.tracecontext import TraceContextTextMapPropagator

from benchmarks.harness import Row, as_json, measure, print_table
from tempotrace_sdk.clocks.select import select_clock
from tempotrace_sdk.otel import TempoTracePropagator, TempoTraceSpanProcessor, TempoTraceState
from tempotrace_sdk.otel.context import get_state


class NullExporter(SpanExporter):
    def export(self, spans: Sequence[ReadableSpan]) -> SpanExportResult:
        return SpanExportResult.SUCCESS


def _tracer(*processors: object) -> trace.Tracer:
    provider = TracerProvider()
    for p in processors:
        provider.add_span_processor(p)  # type: ignore[arg-type]
    return provider.get_tracer("bench")


def span_rows(state: TempoTraceState, min_time: float) -> list[Row]:
    bare = _tracer()
    simple = _tracer(SimpleSpanProcessor(NullExporter()))
    ours = _tracer(TempoTraceSpanProcessor(state=state))

    def one(tracer: trace.Tracer) -> None:
        tracer.start_span("op").end()

    t_bare = measure(lambda: one(bare), min_time=min_time)
    t_simple = measure(lambda: one(simple), min_time=min_time)
    t_ours = measure(lambda: one(ours), min_time=min_time)
    over_ours, over_simple = t_ours - t_bare, t_simple - t_bare
    return [
        Row("bare SDK span (start+end)", t_bare),
        Row("span + SimpleSpanProcessor(null)", t_simple, "bare span", t_simple / t_bare),
        Row("span + TempoTraceSpanProcessor", t_ours, "bare span", t_ours / t_bare),
        Row("  our overhead per span", over_ours, "bare span", over_ours / t_bare, 0.20 * t_bare),
        Row("  our overhead per span", over_ours, "Simple's overhead", over_ours / max(over_simple, 1.0)),
    ]


def propagator_rows(state: TempoTraceState, min_time: float) -> list[Row]:
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

    t_inj_w3c = measure(lambda: w3c.inject({}, ctx), min_time=min_time)
    t_inj = measure(inject_ours, min_time=min_time)
    t_ext_w3c = measure(lambda: w3c.extract(carrier_w3c), min_time=min_time)
    t_ext = measure(lambda: ours.extract(carrier_ours), min_time=min_time)
    t_bad_w3c = measure(lambda: w3c.extract(bad_w3c), min_time=min_time)
    t_bad = measure(lambda: ours.extract(bad_ours), min_time=min_time)
    return [
        Row("W3C traceparent inject", t_inj_w3c),
        Row("tt-ext inject (send event)", t_inj, "W3C inject", t_inj / t_inj_w3c, 0.5 * t_inj_w3c),
        Row("W3C traceparent extract", t_ext_w3c),
        Row("tt-ext extract (receive event)", t_ext, "W3C extract", t_ext / t_ext_w3c, 0.6 * t_ext_w3c),
        Row("W3C extract, malformed", t_bad_w3c),
        Row("tt-ext extract, malformed", t_bad, "W3C extract", t_bad / t_ext_w3c, 1.0 * t_ext_w3c),
        Row("tt-ext extract, malformed", t_bad, "W3C malformed", t_bad / t_bad_w3c),
    ]


def main(argv: Sequence[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--json", action="store_true")
    parser.add_argument("--clock", default="cpu", help="clock spec for the stamps (default: cpu)")
    parser.add_argument("--min-time", type=float, default=0.2)
    args = parser.parse_args(argv)
    state = TempoTraceState(clock=select_clock(args.clock), tenant=1, host="bench")
    clock_ns = measure(state.clock.now, min_time=args.min_time)
    spans = [*span_rows(state, args.min_time), Row(f"clock.now() [{state.clock.name}]", clock_ns)]
    props = propagator_rows(state, args.min_time)
    assert state.errors() == {} and get_state() is not state
    if args.json:
        import json

        print(json.dumps([as_json("otel: per-span cost", spans), as_json("otel: propagator", props)], indent=2))
    else:
        print_table("otel: per-span cost", spans)
        print_table("otel: propagator", props)


if __name__ == "__main__":
    main()
