"""In-memory spans (analyze_spans / records_from_readable) take the per-process attributes from the
Resource as the file reader does (semantic-conventions §1.2): configure() puts host, clock and rank
there, not on each span, so without the fallback every in-memory span was host '?', clock ''."""

from __future__ import annotations

from opentelemetry.sdk.resources import Resource
from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

from tempotrace_sdk import semconv as S
from tempotrace_sdk.analysis import records_from_readable


def _spans(resource: dict[str, object]) -> InMemorySpanExporter:
    exporter = InMemorySpanExporter()
    provider = TracerProvider(resource=Resource.create(resource))
    provider.add_span_processor(SimpleSpanProcessor(exporter))
    tracer = provider.get_tracer("t")
    with tracer.start_as_current_span("parent"), tracer.start_as_current_span("child"):
        pass
    provider.shutdown()
    return exporter


def test_host_rank_and_clock_come_from_the_resource() -> None:
    exporter = _spans({S.HOST: "node7", S.CLOCK: "sim:ptp", S.RANK: 3})
    records = list(records_from_readable(exporter.get_finished_spans()))
    assert len(records) == 2
    assert {(r.host, r.rank, r.clock_source) for r in records} == {("node7", 3, "sim:ptp")}


def test_host_name_is_the_fallback_for_the_host() -> None:
    exporter = _spans({"host.name": "box-1"})
    assert {r.host for r in records_from_readable(exporter.get_finished_spans())} == {"box-1"}
