"""Traces made with the real OpenTelemetry SDK, the real TempoTrace span
processor and propagator, and the real OTLP JSON file exporter.

Several simulated hosts live in one process: each has its own TempoTraceState
(clock, Lamport counter, host name), TracerProvider and propagator, and all
export to one file, as the demo's processes do. A step: the coordinator calls
every worker (CLIENT -> SERVER hop over a real carrier dict), each worker
computes and calls the next two workers in a ring.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from opentelemetry.exporter.otlp.json.file import FileSpanExporter
from opentelemetry.propagators.composite import CompositePropagator
from opentelemetry.sdk.resources import Resource
from opentelemetry.sdk.trace import ReadableSpan, TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor, SpanExporter
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter
from opentelemetry.trace import SpanKind, Tracer
from opentelemetry.trace.propagation.tracecontext import TraceContextTextMapPropagator

from tempotrace_sdk.clocks.simulated import from_spec
from tempotrace_sdk.otel import TempoTracePropagator, TempoTraceSpanProcessor
from tempotrace_sdk.otel.context import TempoTraceState


@dataclass
class Host:
    name: str
    tracer: Tracer
    provider: TracerProvider
    propagator: CompositePropagator


def _host(name: str, clock: str, exporter: SpanExporter, rank: int) -> Host:
    state = TempoTraceState(clock=from_spec(clock.removeprefix("sim:")), host=name)
    provider = TracerProvider(resource=Resource.create({"service.name": name}))
    provider.add_span_processor(TempoTraceSpanProcessor(state=state))
    provider.add_span_processor(SimpleSpanProcessor(exporter))
    prop = CompositePropagator([TraceContextTextMapPropagator(), TempoTracePropagator(state=state)])
    return Host(name, provider.get_tracer("tracegen"), provider, prop)


def _call(src: Host, dst: Host, work: Any = None) -> None:
    with src.tracer.start_as_current_span(f"call {dst.name}", kind=SpanKind.CLIENT):
        carrier: dict[str, str] = {}
        src.propagator.inject(carrier)
        ctx = dst.propagator.extract(carrier)
        with dst.tracer.start_as_current_span("serve", context=ctx, kind=SpanKind.SERVER):
            with dst.tracer.start_as_current_span("compute"):
                sum(range(200))
            if work is not None:
                work(dst)


def write_trace(path: str, clocks: dict[str, str], steps: int = 2) -> dict[str, int]:
    """Write a trace; ``clocks`` maps host name -> sim clock spec ("sim:ptp", "sim:liar", ...).
    The first host coordinates. Returns counts the tests check against."""
    with open(path, "a", encoding="utf-8") as stream:
        return _trace(clocks, steps, lambda: FileSpanExporter(stream=stream))


def trace_spans(clocks: dict[str, str], steps: int = 2) -> list[ReadableSpan]:
    """The trace ``write_trace`` writes, its spans kept in memory (in the order they ended)."""
    memory = InMemorySpanExporter()
    _trace(clocks, steps, lambda: memory)
    return list(memory.get_finished_spans())


def _trace(clocks: dict[str, str], steps: int, exporter: Callable[[], SpanExporter]) -> dict[str, int]:
    hosts = [_host(name, spec, exporter(), i) for i, (name, spec) in enumerate(clocks.items())]
    coord, workers = hosts[0], hosts[1:]
    hops = 0

    def ring(me: Host) -> None:
        nonlocal hops
        i = workers.index(me)
        for k in (1, 2):
            peer = workers[(i + k) % len(workers)]
            if peer is not me:
                hops += 1
                _call(me, peer)

    for step in range(steps):
        with coord.tracer.start_as_current_span(f"step {step}"):
            for w in workers:
                hops += 1
                _call(coord, w, ring)
    for h in hosts:
        h.provider.shutdown()
    return {"hops": hops}
