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
from tempotrace_sdk.stamptext import TAI_UTC_BASE_NS, expand
from tempotrace_sdk.wire import ClockQuality, Sketch, TsSource, TTExt


def sketch(attrs: Any, key: str = S.SVC_SKETCH) -> Sketch:
    return Sketch.from_bytes(bytes.fromhex(attrs[key]))


def sketch_of(pipe: Pipeline, span: Any) -> Sketch:
    """The sketch the SDK keeps for a span (what its sends carry; written only on receiving spans)."""
    found = pipe.state.sketch_of(span.get_span_context().span_id)
    assert found is not None
    return found


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
    assert S.SVC_SKETCH not in attrs  # a span that received no header writes no sketch (§2)


def test_a_span_writes_its_stamps_in_three_attributes(pipe: Pipeline, clock: StepClock) -> None:
    """§1.2: the stamps text and the two queryable start fields; host, clock and tenant only because this
    provider's Resource does not carry them; nothing of the previous attribute set."""
    with pipe.tracer.start_as_current_span("op"):
        pass
    raw = dict(pipe.raw_spans()["op"].attributes)
    assert set(raw) == {S.STAMPS, S.CLK_QUALITY, S.UNCERTAINTY_NS, S.HOST, S.CLOCK, S.TENANT_ID}
    start, end = clock.readings
    span = pipe.raw_spans()["op"]
    # start: lts 1, source GTE (0), the reading 37 s + dt after the OTel start time; end: one tick later
    dt = start.ptp_ns - span.start_time - TAI_UTC_BASE_NS
    edt = end.ptp_ns - span.end_time - TAI_UTC_BASE_NS
    assert raw[S.STAMPS] == f"s1,0,{dt} e1,{edt}"
    assert (raw[S.CLK_QUALITY], raw[S.UNCERTAINTY_NS]) == ("OK", 100)


def test_a_resource_that_carries_the_process_attributes_keeps_them_off_the_spans(clock: StepClock) -> None:
    """§1.2: host, clock and tenant on a Resource that says them are not repeated on every span; a
    Resource that says another host does not count."""
    from opentelemetry.sdk.resources import Resource

    state = TempoTraceState(clock=clock, tenant=4, host="node-r")
    for resource, on_span in (
        (Resource({S.HOST: "node-r", S.CLOCK: "fake:step", S.TENANT_ID: 4}), False),
        (Resource({S.HOST: "elsewhere", S.CLOCK: "fake:step", S.TENANT_ID: 4}), True),
    ):
        exporter = InMemorySpanExporter()
        provider = TracerProvider(resource=resource)
        provider.add_span_processor(TempoTraceSpanProcessor(state=state))
        provider.add_span_processor(SimpleSpanProcessor(exporter))
        with provider.get_tracer("t").start_as_current_span("s"):
            pass
        (span,) = exporter.get_finished_spans()
        assert (S.HOST in span.attributes) is on_span
        assert (span.attributes.get(S.HOST, "node-r"), span.attributes.get(S.TENANT_ID, 4)) == ("node-r", 4)
    state.host = "node-s"  # a configuration change is seen at once
    exporter = InMemorySpanExporter()
    provider = TracerProvider(resource=Resource({S.HOST: "node-r", S.CLOCK: "fake:step", S.TENANT_ID: 4}))
    provider.add_span_processor(TempoTraceSpanProcessor(state=state))
    provider.add_span_processor(SimpleSpanProcessor(exporter))
    with provider.get_tracer("t").start_as_current_span("s"):
        pass
    assert exporter.get_finished_spans()[0].attributes[S.HOST] == "node-s"


def test_sketches_hold_every_ancestor(pipe: Pipeline) -> None:
    with pipe.tracer.start_as_current_span("root") as root:
        with pipe.tracer.start_as_current_span("mid") as mid:
            with pipe.tracer.start_as_current_span("leaf") as leaf:
                pass
        with pipe.tracer.start_as_current_span("sibling"):
            pass
    spans = pipe.spans()
    ids = {n: s.get_span_context().span_id for n, s in (("root", root), ("mid", mid), ("leaf", leaf))}
    leaf_sketch = sketch_of(pipe, spans["leaf"])
    assert all(leaf_sketch.contains(i) for i in ids.values())
    assert sketch_of(pipe, spans["root"]) == Sketch.of(ids["root"])
    assert sketch_of(pipe, spans["mid"]) == Sketch.of(ids["root"], ids["mid"])
    assert not sketch_of(pipe, spans["sibling"]).contains(ids["leaf"])  # not in its causal past


def test_a_long_chain_of_spans_keeps_few_records_alive(pipe: Pipeline) -> None:
    """Sketches are computed on first use; a chain of spans each started under the previous one (which
    then ended) is resolved every SKETCH_CHAIN_MAX links, so it never holds the whole chain, and the
    sketch at its end is still every ancestor's."""
    from opentelemetry import trace

    from tempotrace_sdk.otel.records import SKETCH_CHAIN_MAX, SpanRecord

    ids, parent = [], pipe.tracer.start_span("link-0")
    ids.append(parent.get_span_context().span_id)
    for n in range(1, 3 * SKETCH_CHAIN_MAX):
        child = pipe.tracer.start_span(f"link-{n}", context=trace.set_span_in_context(parent))
        parent.end()
        parent = child
        ids.append(child.get_span_context().span_id)
    record = pipe.state.live[ids[-1]]
    held, link = 0, record  # the records this one keeps alive through its links
    while isinstance(link.base, SpanRecord):
        held, link = held + 1, link.base
    assert held <= SKETCH_CHAIN_MAX
    assert record.sketch == Sketch.of(*ids)


def test_a_child_started_after_its_parent_ended_keeps_the_ancestry(pipe: Pipeline) -> None:
    with pipe.tracer.start_as_current_span("root"):
        parent = pipe.tracer.start_span("parent")
    parent.end()
    from opentelemetry import trace

    child = pipe.tracer.start_span("late-child", context=trace.set_span_in_context(parent))
    child.end()
    spans = pipe.spans()
    assert sketch_of(pipe, spans["parent"]).issubset(sketch_of(pipe, spans["late-child"]))


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
    return pipe.spans()["server"], pipe.spans()["handler"]


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
    server_span, handler_span = _server_span(pipe, remote)
    server, handler = server_span.attributes, handler_span.attributes
    assert server[S.REMOTE_PTP_NS] == remote.ptp_ns
    assert server[S.REMOTE_UNCERTAINTY_NS] == 40
    assert server[S.REMOTE_CLK_QUALITY] == "OK"
    assert server[S.REMOTE_TS_SOURCE] == "GTE"
    assert server[S.REMOTE_TENANT_ID] == 3
    assert server[S.REMOTE_LTS] == 500 < server[S.RECV_LTS] < server[S.LTS]
    own = sketch(server)  # written: the header brought a causal past (§4)
    assert own == sketch_of(pipe, server_span)
    assert remote.svc_sketch.issubset(own)
    assert own.contains(0xB7AD6B7169203331)  # the remote parent span
    assert S.REMOTE_SVC_SKETCH not in server  # the sender's own sketch, contained in the server's
    # The hop belongs to the server span only, not to its local children.
    assert S.REMOTE_LTS not in handler and S.SVC_SKETCH not in handler
    assert own.issubset(sketch_of(pipe, handler_span))


def test_a_header_without_traceparent_still_roots_the_sketch(pipe: Pipeline) -> None:
    remote = TTExt(ptp_ns=5, ts_source=TsSource.CPU, clk_quality=2, uncertainty_ns=0, lts=7, svc_sketch=Sketch.of(99))
    server, _ = _server_span(pipe, remote, traceparent=False)
    assert server.attributes[S.REMOTE_LTS] == 7
    assert sketch(server.attributes).contains(99)


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
        attrs = expand(span.attributes, span.start_time, span.end_time)
        assert attrs[S.END_PTP_NS] == clock.readings[-1].ptp_ns
        assert attrs[S.END_LTS] > attrs[S.LTS]
        assert attrs[S.END_CLK_QUALITY] == "OK"
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
    assert spans["both"].attributes[S.STAMPS].startswith("s")
    assert dict(spans["after-shutdown"].attributes) == {}


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


def test_without_the_sdk_end_hook_the_start_is_written_at_start(
    clock: StepClock, monkeypatch: pytest.MonkeyPatch
) -> None:
    """No end hook: every attribute would be lost if they waited for the end, so the start's go on at on_start."""
    from tempotrace_sdk.otel import processor

    monkeypatch.setattr(processor, "_ON_ENDING_CALLED", False)
    state = TempoTraceState(clock=clock, tenant=0, host="h")
    exporter = InMemorySpanExporter()
    provider = TracerProvider()
    provider.add_span_processor(TempoTraceSpanProcessor(state=state))
    provider.add_span_processor(SimpleSpanProcessor(exporter))
    with provider.get_tracer("t").start_as_current_span("s"):
        pass
    (span,) = exporter.get_finished_spans()
    attrs = expand(span.attributes, span.start_time, span.end_time)
    assert attrs[S.PTP_NS] == clock.readings[0].ptp_ns and attrs[S.LTS] == 1


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
    assert state.sketch_of(sp.get_span_context().span_id) == Sketch.of(sp.get_span_context().span_id)
    attrs = expand(span.attributes, span.start_time, span.end_time)
    assert attrs[S.END_LTS] > attrs[S.LTS]
    assert list(attrs[S.SEND_LTS]) == [attrs[S.LTS] + 1]
    assert state.errors() == {}


def test_a_value_length_limit_cuts_whole_tokens(clock: StepClock) -> None:
    """With OTEL_ATTRIBUTE_VALUE_LENGTH_LIMIT below the text, sends are dropped from its end (counted), never
    cut mid-token: what remains is still a valid text."""
    from opentelemetry.sdk.trace import SpanLimits

    state = TempoTraceState(clock=clock, tenant=0, host="h")
    exporter = InMemorySpanExporter()
    provider = TracerProvider(span_limits=SpanLimits(max_span_attribute_length=40))
    provider.add_span_processor(TempoTraceSpanProcessor(state=state))
    provider.add_span_processor(SimpleSpanProcessor(exporter))
    with provider.get_tracer("t").start_as_current_span("limited"):
        for _ in range(5):
            TempoTracePropagator(state=state).inject({})
    (span,) = exporter.get_finished_spans()
    text = span.attributes[S.STAMPS]
    assert len(text) <= 40 and text.startswith("s")
    attrs = expand(span.attributes, span.start_time, span.end_time)  # decodes: no token was cut
    assert len(attrs.get(S.SEND_LTS, ())) < 5
    assert state.errors() == {"stamps_truncated": 1}


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
        assert sketch_of(pipe, child).contains(grandparent.get_span_context().span_id)
    # Round 0 needed three slots (one per level): the three oldest leaks went.
    assert pipe.state.errors() == {"live_evicted": 3}
    assert [span_id in pipe.state.live for span_id in leaked] == [False] * 3 + [True] * 5


def test_a_send_after_the_decorators_end_stamp_is_added_by_the_end_hook(pipe: Pipeline, clock: StepClock) -> None:
    """§5: a header sent between stamp_end (our decorators, just before end()) and end() is not lost:
    the end hook appends its x token to the text already written."""
    from opentelemetry import trace

    from tempotrace_sdk.otel.processor import stamp_end

    sp = pipe.tracer.start_span("decorated")
    span_id = sp.get_span_context().span_id
    with trace.use_span(sp, end_on_exit=False):
        pipe.propagator.inject({})  # before the end stamp
        stamp_end(pipe.state, sp, span_id, clock.now())  # type: ignore[arg-type]
        pipe.propagator.inject({})  # after it: only the end hook can record this one
    sp.end()
    raw = pipe.raw_spans()["decorated"].attributes[S.STAMPS]
    tokens = raw.split(" ")
    assert [t[0] for t in tokens] == ["s", "e", "x", "x"]
    attrs = pipe.spans()["decorated"].attributes
    assert list(attrs[S.SEND_LTS]) == [attrs[S.LTS] + 1, attrs[S.END_LTS] + 1]
    assert pipe.state.errors() == {}


def test_a_span_records_at_most_max_sends(pipe: Pipeline, monkeypatch: pytest.MonkeyPatch) -> None:
    """A span that keeps sending keeps a bounded record: headers past MAX_SENDS still go out, unrecorded
    and counted, so its text stays one a reader accepts."""
    from tempotrace_sdk.otel import hop

    monkeypatch.setattr(hop, "MAX_SENDS", 2)
    with pipe.tracer.start_as_current_span("chatty"):
        carriers: list[dict[str, str]] = [{} for _ in range(3)]
        for carrier in carriers:
            pipe.propagator.inject(carrier)
    assert all("tt-ext" in c for c in carriers)
    assert len(pipe.spans()["chatty"].attributes[S.SEND_LTS]) == 2
    assert pipe.state.errors() == {"sends_dropped": 1}
