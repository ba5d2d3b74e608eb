"""@traced and span(): our clock times the span, TAI converted to UTC for OTel."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator, Iterator
from typing import Any

import pytest
from _otel_helpers import StepClock, exported
from opentelemetry import trace
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter
from opentelemetry.trace import SpanKind, StatusCode

from tempotrace_sdk import semconv as S
from tempotrace_sdk.clocks.leapseconds import tai_to_utc_ns
from tempotrace_sdk.otel import configure, span, traced


@pytest.fixture
def setup() -> Iterator[tuple[InMemorySpanExporter, StepClock]]:
    exporter = InMemorySpanExporter()
    clock = StepClock()
    handle = configure(clock=clock, exporter=exporter, batch=False, tenant=4, host="dec", set_propagator=False)
    yield exporter, clock
    handle.shutdown()


def by_name(exporter: InMemorySpanExporter) -> dict[str, Any]:
    return {s.name: s for s in exported(exporter)}


def test_span_times_are_our_clock_in_utc(setup: tuple[InMemorySpanExporter, StepClock]) -> None:
    exporter, clock = setup
    with span("work", attributes={"k": 1}, kind=SpanKind.CLIENT) as s:
        assert s.is_recording()
    (done,) = exported(exporter)
    start, end = clock.readings[0], clock.readings[-1]
    assert len(clock.readings) == 2  # one reading per event: no second read in on_start
    assert done.start_time == tai_to_utc_ns(start.ptp_ns)
    assert done.end_time == tai_to_utc_ns(end.ptp_ns)
    assert start.ptp_ns - done.start_time == 37_000_000_000  # TAI - UTC since 2017
    assert done.attributes[S.PTP_NS] == start.ptp_ns
    assert done.attributes[S.END_PTP_NS] == end.ptp_ns
    assert done.attributes[S.END_UNCERTAINTY_NS] == end.uncertainty_ns
    assert done.attributes["k"] == 1
    # The OTel times are the readings: the text needs no dt for either (semantic-conventions §2, §3).
    lts = done.attributes[S.LTS]
    assert done.raw.attributes[S.STAMPS] == f"s{lts},0 e{done.attributes[S.END_LTS] - lts}"
    assert done.kind is SpanKind.CLIENT


def test_traced_function_names_and_nests(setup: tuple[InMemorySpanExporter, StepClock]) -> None:
    exporter, _ = setup

    @traced
    def outer() -> int:
        return inner() + 1

    @traced(name="inner-step", attributes={"layer": 3})
    def inner() -> int:
        return 41

    assert outer() == 42
    spans = by_name(exporter)
    outer_span = spans["test_traced_function_names_and_nests.<locals>.outer"]
    assert spans["inner-step"].parent.span_id == outer_span.context.span_id
    assert spans["inner-step"].attributes["layer"] == 3


def test_exceptions_are_recorded_and_propagate(setup: tuple[InMemorySpanExporter, StepClock]) -> None:
    exporter, _ = setup

    @traced(name="fails")
    def fails() -> None:
        raise KeyError("x")

    with pytest.raises(KeyError):
        fails()
    (s,) = exported(exporter)
    assert s.status.status_code is StatusCode.ERROR
    assert s.events[0].name == "exception"
    assert S.END_PTP_NS in s.attributes


def test_coroutines_keep_their_own_parents(setup: tuple[InMemorySpanExporter, StepClock]) -> None:
    exporter, _ = setup

    @traced(name="task")
    async def task(i: int) -> int:
        await asyncio.sleep(0)
        with span(f"inside-{i}"):
            await asyncio.sleep(0)
        return i

    @traced(name="main")
    async def main() -> list[int]:
        return list(await asyncio.gather(*(task(i) for i in range(3))))

    assert asyncio.run(main()) == [0, 1, 2]
    spans = exported(exporter)
    tasks = {s.context.span_id for s in spans if s.name == "task"}
    main_id = next(s.context.span_id for s in spans if s.name == "main")
    assert {s.parent.span_id for s in spans if s.name == "task"} == {main_id}
    inside = [s for s in spans if s.name.startswith("inside-")]
    assert len(inside) == 3 and {s.parent.span_id for s in inside} == tasks


def test_generator_span_is_current_only_inside_the_body(setup: tuple[InMemorySpanExporter, StepClock]) -> None:
    exporter, _ = setup
    seen: list[int] = []

    @traced(name="gen")
    def numbers(n: int) -> Iterator[int]:
        for i in range(n):
            seen.append(trace.get_current_span().get_span_context().span_id)
            received = yield i
            if received is not None:
                yield received * 10

    with span("caller") as caller:
        gen = numbers(3)
        assert next(gen) == 0
        assert trace.get_current_span() is caller  # paused generator is not current
        assert gen.send(7) == 70
        assert list(gen) == [1, 2]
    spans = by_name(exporter)
    assert set(seen) == {spans["gen"].context.span_id}
    assert spans["gen"].parent.span_id == spans["caller"].context.span_id


def test_generator_close_and_throw_end_the_span(setup: tuple[InMemorySpanExporter, StepClock]) -> None:
    exporter, _ = setup

    @traced(name="closable")
    def forever() -> Iterator[int]:
        i = 0
        while True:
            try:
                yield i
            except ValueError:
                i = -100
            i += 1

    gen = forever()
    assert next(gen) == 0
    assert gen.throw(ValueError()) == -99  # thrown into the body, handled there
    gen.close()
    (s,) = exported(exporter)
    assert s.status.status_code is not StatusCode.ERROR
    assert S.END_LTS in s.attributes


def test_async_generator(setup: tuple[InMemorySpanExporter, StepClock]) -> None:
    exporter, _ = setup

    @traced(name="agen")
    async def ticks(n: int) -> AsyncIterator[int]:
        for i in range(n):
            await asyncio.sleep(0)
            yield i

    async def consume() -> list[int]:
        return [i async for i in ticks(3)]

    assert asyncio.run(consume()) == [0, 1, 2]
    (s,) = exported(exporter)
    assert s.name == "agen" and S.END_PTP_NS in s.attributes


def test_async_with_span(setup: tuple[InMemorySpanExporter, StepClock]) -> None:
    exporter, _ = setup

    async def main() -> None:
        async with span("outer-async"):
            async with span("inner-async"):
                await asyncio.sleep(0)

    asyncio.run(main())
    spans = by_name(exporter)
    assert spans["inner-async"].parent.span_id == spans["outer-async"].context.span_id


def test_a_failing_clock_never_fails_the_decorated_function(setup: tuple[InMemorySpanExporter, StepClock]) -> None:
    exporter, clock = setup

    def broken() -> Any:
        raise OSError("PHC vanished")

    clock.now = broken  # type: ignore[method-assign]

    @traced(name="still-runs")
    def work() -> int:
        return 7

    assert work() == 7
    (s,) = exported(exporter)
    assert s.name == "still-runs" and s.end_time is not None
    from tempotrace_sdk.otel import get_state

    assert get_state().errors().get("decorator_clock", 0) >= 2


@pytest.mark.parametrize("limited", [False, True], ids=["direct_store", "validating_path"])
def test_end_stamp_and_sends_with_and_without_attribute_limits(
    setup: tuple[InMemorySpanExporter, StepClock], limited: bool
) -> None:
    """span()'s end stamp is the closing reading whichever way it is stored (limits force the SDK's path)."""
    from opentelemetry.sdk.trace import SpanLimits, TracerProvider
    from opentelemetry.sdk.trace.export import SimpleSpanProcessor

    from tempotrace_sdk.otel import TempoTracePropagator, TempoTraceSpanProcessor, get_state

    _, clock = setup
    errors_before = get_state().errors()  # the process state outlives earlier tests
    exporter = InMemorySpanExporter()
    limits = SpanLimits(max_span_attribute_length=100, max_span_attributes=64) if limited else None
    provider = TracerProvider(span_limits=limits)
    provider.add_span_processor(TempoTraceSpanProcessor())
    provider.add_span_processor(SimpleSpanProcessor(exporter))
    with span("step", tracer=provider.get_tracer("t"), attributes={"user": "kept"}) as sp:
        carrier: dict[str, str] = {}
        TempoTracePropagator().inject(carrier)
    (done,) = exported(exporter)
    end = clock.readings[-1]
    assert done.end_time == tai_to_utc_ns(end.ptp_ns)
    assert done.attributes[S.END_PTP_NS] == end.ptp_ns
    assert done.attributes[S.END_UNCERTAINTY_NS] == end.uncertainty_ns
    assert done.attributes[S.END_CLK_QUALITY] == end.clk_quality.name
    assert done.attributes[S.END_LTS] == done.attributes[S.SEND_LTS][0] + 1
    assert done.attributes["user"] == "kept"
    assert get_state().errors() == errors_before
    assert sp.get_span_context().span_id not in get_state().live
