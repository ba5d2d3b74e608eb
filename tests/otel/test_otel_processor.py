"""TempoTraceSpanProcessor: start/end stamps, sketches, hop fields (spec/semantic-conventions.md)."""

from __future__ import annotations

from typing import Any

import pytest
from _otel_helpers import Pipeline, StepClock
from opentelemetry import context as context_api
from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

from tempotrace_sdk import semconv as S
from tempotrace_sdk.otel import TempoTracePropagator, TempoTraceSpanProcessor, TempoTraceState
from tempotrace_sdk.wire import ClockQuality, Sketch, TsSource, TTExt


def sketch(attrs: Any, key: str = S.SVC_SKETCH) -> Sketch:
    return Sketch.from_bytes(bytes.fromhex(attrs[key]))


def test_start_attributes_come_from_one_clock_reading(pipe: Pipeline, clock: StepClock) -> None:
    clock.source, clock.quality, clock.uncertainty = TsSource.SW_GCC, ClockQuality.DEGRADED, 1_234
    with pipe.tracer.start_as_current_span("step"):
        start_reading = clock.readings[0]
    attrs = pipe.spans()["step"].attributes
    assert attrs[S.PTP_NS] == start_reading.ptp_ns
    assert attrs[S.UNCERTAINTY_NS] == 1_234
    assert attrs[S.CLK_QUALITY] == "DEGRADED"
    assert attrs[S.TS_SOURCE] == "SW_GCC"
    assert attrs[S.LTS] == 1
    assert attrs[S.TENANT_ID] == 5
    assert attrs[S.CLOCK] == "fake:step"
    assert attrs[S.HOST] == "node-a"
    assert len(attrs[S.SVC_SKETCH]) == 64


def test_sketches_hold_every_ancestor(pipe: Pipeline) -> None:
    with pipe.tracer.start_as_current_span("root") as root:
        with pipe.tracer.start_as_current_span("mid") as mid:
            with pipe.tracer.start_as_current_span("leaf") as leaf:
                pass
        with pipe.tracer.start_as_current_span("sibling"):
            pass
    spans = pipe.spans()
    ids = {n: s.get_span_context().span_id for n, s in (("root", root), ("mid", mid), ("leaf", leaf))}
    leaf_sketch = sketch(spans["leaf"].attributes)
    assert all(leaf_sketch.contains(i) for i in ids.values())
    assert sketch(spans["root"].attributes) == Sketch.of(ids["root"])
    assert sketch(spans["mid"].attributes) == Sketch.of(ids["root"], ids["mid"])
    assert not sketch(spans["sibling"].attributes).contains(ids["leaf"])  # not in its causal past


def test_a_child_started_after_its_parent_ended_keeps_the_ancestry(pipe: Pipeline) -> None:
    with pipe.tracer.start_as_current_span("root"):
        parent = pipe.tracer.start_span("parent")
    parent.end()
    from opentelemetry import trace

    child = pipe.tracer.start_span("late-child", context=trace.set_span_in_context(parent))
    child.end()
    spans = pipe.spans()
    assert sketch(spans["parent"].attributes).issubset(sketch(spans["late-child"].attributes))


def test_lamport_values_increase_with_every_start_and_end(pipe: Pipeline) -> None:
    with pipe.tracer.start_as_current_span("a"):
        with pipe.tracer.start_as_current_span("b"):
            pass
    a, b = pipe.spans()["a"].attributes, pipe.spans()["b"].attributes
    assert a[S.LTS] < b[S.LTS] < b[S.END_LTS] < a[S.END_LTS]


def _server_span(pipe: Pipeline, header: TTExt, traceparent: bool = True) -> tuple[Any, Any]:
    from opentelemetry.trace.propagation.tracecontext import TraceContextTextMapPropagator

    carrier = {"tt-ext": header.to_header()}
    if traceparent:
        carrier["traceparent"] = "00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01"
    ctx = TraceContextTextMapPropagator().extract(carrier)
    ctx = TempoTracePropagator(state=pipe.state).extract(carrier, ctx)
    token = context_api.attach(ctx)
    try:  # parent_context=None: the processor falls back to the current context
        with pipe.tracer.start_as_current_span("server"):
            with pipe.tracer.start_as_current_span("handler"):
                pass
    finally:
        context_api.detach(token)
    return pipe.spans()["server"].attributes, pipe.spans()["handler"].attributes


def test_server_span_carries_both_ends_of_the_hop(pipe: Pipeline) -> None:
    remote = TTExt(
        ptp_ns=1_800_000_000_000_000_000,
        ts_source=TsSource.GTE,
        clk_quality=ClockQuality.OK,
        uncertainty_ns=40,
        lts=500,
        svc_sketch=Sketch.of(11, 22),
        tenant_id=3,
    )
    server, handler = _server_span(pipe, remote)
    assert server[S.REMOTE_PTP_NS] == remote.ptp_ns
    assert server[S.REMOTE_UNCERTAINTY_NS] == 40
    assert server[S.REMOTE_CLK_QUALITY] == "OK"
    assert server[S.REMOTE_TS_SOURCE] == "GTE"
    assert server[S.REMOTE_TENANT_ID] == 3
    assert server[S.REMOTE_LTS] == 500 < server[S.RECV_LTS] < server[S.LTS]
    assert sketch(server, S.REMOTE_SVC_SKETCH) == remote.svc_sketch
    own = sketch(server)
    assert remote.svc_sketch.issubset(own)
    assert own.contains(0xB7AD6B7169203331)  # the remote parent span
    # The hop belongs to the server span only, not to its local children.
    assert S.REMOTE_LTS not in handler
    assert own.issubset(sketch(handler))


def test_a_header_without_traceparent_still_roots_the_sketch(pipe: Pipeline) -> None:
    remote = TTExt(ptp_ns=5, ts_source=TsSource.CPU, clk_quality=2, uncertainty_ns=0, lts=7, svc_sketch=Sketch.of(99))
    server, _ = _server_span(pipe, remote, traceparent=False)
    assert server[S.REMOTE_LTS] == 7
    assert sketch(server).contains(99)


def test_plain_span_end_stamp_reaches_exporters_in_any_order(clock: StepClock) -> None:
    """Spans not made by our decorators still get tempotrace.end.* before any exporter sees them."""
    state = TempoTraceState(clock=clock, tenant=0, host="h")
    before, after = InMemorySpanExporter(), InMemorySpanExporter()
    provider = TracerProvider()
    provider.add_span_processor(SimpleSpanProcessor(before))  # registered before ours
    provider.add_span_processor(TempoTraceSpanProcessor(state=state))
    provider.add_span_processor(SimpleSpanProcessor(after))
    with provider.get_tracer("t").start_as_current_span("plain"):
        pass
    for exporter in (before, after):
        (span,) = exporter.get_finished_spans()
        assert span.attributes[S.END_PTP_NS] == clock.readings[-1].ptp_ns
        assert span.attributes[S.END_LTS] > span.attributes[S.LTS]
        assert span.attributes[S.END_CLK_QUALITY] == "OK"
    assert state.errors() == {}
    assert state.live == {}  # ended spans leave the live table


class BrokenClock:
    name = "broken"

    def now(self) -> Any:
        raise OSError("device vanished")

    def describe(self) -> dict[str, Any]:
        return {}


def test_hooks_never_raise_into_the_program() -> None:
    state = TempoTraceState(clock=BrokenClock(), tenant=0, host="h")  # type: ignore[arg-type]
    pipe = Pipeline(state)
    with pipe.tracer.start_as_current_span("survives"):
        carrier: dict[str, str] = {}
        pipe.propagator.inject(carrier)
    assert "survives" in pipe.spans()
    assert carrier == {}
    assert state.errors() == {"on_start": 1, "inject": 1}


def test_several_tempotrace_processors_and_shutdown(clock: StepClock) -> None:
    state = TempoTraceState(clock=clock, tenant=0, host="h")
    first, second = TempoTraceSpanProcessor(state=state), TempoTraceSpanProcessor(state=state)
    exporter = InMemorySpanExporter()
    provider = TracerProvider()
    for p in (first, second, SimpleSpanProcessor(exporter)):
        provider.add_span_processor(p)
    with provider.get_tracer("t").start_as_current_span("both"):
        pass
    assert state.errors() == {}
    assert first.force_flush() and second.force_flush()
    first.shutdown()
    second.shutdown()
    with provider.get_tracer("t").start_as_current_span("after-shutdown"):
        pass
    spans = {s.name: s for s in exporter.get_finished_spans()}
    assert S.LTS in spans["both"].attributes
    assert S.LTS not in spans["after-shutdown"].attributes


def test_without_the_sdk_end_hook_records_are_still_released(
    clock: StepClock, monkeypatch: pytest.MonkeyPatch
) -> None:
    """An SDK without the on-ending hook (the probe says so): no end stamp, but no leak either."""
    from tempotrace_sdk.otel import processor

    monkeypatch.setattr(processor, "_ON_ENDING_CALLED", False)
    state = TempoTraceState(clock=clock, tenant=0, host="h")

    class NoEndingHook(TempoTraceSpanProcessor):
        def _on_ending(self, span: Any) -> None:
            return None

    provider = TracerProvider()
    provider.add_span_processor(NoEndingHook(state=state))
    for _ in range(3):
        with provider.get_tracer("t").start_as_current_span("s"):
            pass
    assert state.live == {}
    assert state.errors() == {"no_end_hook": 3}


def test_a_failing_end_stamp_still_releases_the_record(state: TempoTraceState) -> None:
    """The record goes even when the end's clock read fails (counted): the table stays bounded."""
    provider = TracerProvider()
    provider.add_span_processor(TempoTraceSpanProcessor(state=state))
    with provider.get_tracer("t").start_as_current_span("s"):
        state.clock = _FailingClock()  # type: ignore[assignment]
    assert state.live == {} and state.errors() == {"on_ending": 1}


class _FailingClock:
    name = "failing"

    def now(self) -> Any:
        raise OSError("clock gone")

    def describe(self) -> dict[str, Any]:
        return {}


def test_configured_attribute_limits_are_respected(clock: StepClock) -> None:
    """With span limits set, stamps go through the SDK's validating path, start and end."""
    from opentelemetry.sdk.trace import SpanLimits

    state = TempoTraceState(clock=clock, tenant=0, host="h")
    exporter = InMemorySpanExporter()
    provider = TracerProvider(span_limits=SpanLimits(max_span_attribute_length=100, max_span_attributes=64))
    provider.add_span_processor(TempoTraceSpanProcessor(state=state))
    provider.add_span_processor(SimpleSpanProcessor(exporter))
    with provider.get_tracer("t").start_as_current_span("limited") as sp:
        TempoTracePropagator(state=state).inject({})
    (span,) = exporter.get_finished_spans()
    assert span.attributes[S.SVC_SKETCH] == Sketch.of(sp.get_span_context().span_id).to_bytes().hex()
    assert span.attributes[S.END_LTS] > span.attributes[S.LTS]
    assert list(span.attributes[S.SEND_LTS]) == [span.attributes[S.LTS] + 1]
    assert state.errors() == {}


def test_ended_sketches_are_kept_for_late_children_and_evicted_oldest_first(clock: StepClock) -> None:
    """The ended-span table is bounded (ENDED_SKETCHES) and forgets the oldest spans first."""
    from tempotrace_sdk.otel.context import ENDED_SKETCHES

    state = TempoTraceState(clock=clock, tenant=0, host="h")
    provider = TracerProvider()
    provider.add_span_processor(TempoTraceSpanProcessor(state=state))
    tracer = provider.get_tracer("t")
    first = tracer.start_span("first")
    first.end()
    first_id = first.get_span_context().span_id
    assert state.sketch_of(first_id) is not None
    for _ in range(ENDED_SKETCHES - 1):
        tracer.start_span("filler").end()
    assert state.sketch_of(first_id) is not None  # exactly ENDED_SKETCHES kept
    last = tracer.start_span("last")
    last.end()
    assert state.sketch_of(first_id) is None  # the oldest went first
    assert state.sketch_of(last.get_span_context().span_id) is not None
    assert len(state.ended) == ENDED_SKETCHES and state.live == {}


def test_spans_that_never_end_give_way_to_new_ones(pipe: Pipeline, monkeypatch: Any) -> None:
    # Spans that are never ended must not fill the live table for good: the
    # oldest records are evicted (and counted) so new spans still get one and
    # their children keep the whole causal past.
    from tempotrace_sdk.otel import context as context_module
    from tempotrace_sdk.otel import processor as processor_module

    monkeypatch.setattr(context_module, "LIVE_SPANS_MAX", 8)
    monkeypatch.setattr(processor_module, "LIVE_SPANS_MAX", 8)
    leaked = [pipe.tracer.start_span(f"leak-{i}").get_span_context().span_id for i in range(8)]
    for n in range(3):
        with pipe.tracer.start_as_current_span(f"grandparent-{n}") as grandparent:
            with pipe.tracer.start_as_current_span(f"parent-{n}"):
                with pipe.tracer.start_as_current_span(f"child-{n}"):
                    pass
        child = pipe.spans()[f"child-{n}"]
        assert sketch(child.attributes).contains(grandparent.get_span_context().span_id)
    # Round 0 needed three slots (one per level): the three oldest leaks went.
    assert pipe.state.errors() == {"live_evicted": 3}
    assert [span_id in pipe.state.live for span_id in leaked] == [False] * 3 + [True] * 5
