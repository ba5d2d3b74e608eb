"""Helpers for the OpenTelemetry layer's tests (a unique module name: tests/ has no packages).

A stepping clock stands in for real hardware only where exact values must be
asserted; the integration tests use the real ``select_clock``.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

from tempotrace_sdk import semconv as S
from tempotrace_sdk.clocks.base import Timestamp
from tempotrace_sdk.otel import TempoTracePropagator, TempoTraceSpanProcessor, TempoTraceState
from tempotrace_sdk.stamptext import expand
from tempotrace_sdk.wire import ClockQuality, Sketch, TsSource

#: 2027-01-01 in TAI ns, roughly: far from any leap second.
T0 = 1_798_761_637_000_000_000


class StepClock:
    """Every reading is ``step`` ns after the previous one; fields are settable."""

    name = "fake:step"

    def __init__(
        self,
        start: int = T0,
        step: int = 1_000,
        source: TsSource = TsSource.GTE,
        quality: ClockQuality = ClockQuality.OK,
        uncertainty: int = 100,
    ) -> None:
        self.t = start
        self.step = step
        self.source = source
        self.quality = quality
        self.uncertainty = uncertainty
        self.readings: list[Timestamp] = []

    def now(self) -> Timestamp:
        self.t += self.step
        ts = Timestamp(self.t, self.source, self.quality, self.uncertainty)
        self.readings.append(ts)
        return ts

    def describe(self) -> dict[str, Any]:
        return {"name": self.name}


class Pipeline:
    """A private provider with our processor and an in-memory exporter."""

    def __init__(self, state: TempoTraceState) -> None:
        self.state = state
        self.exporter = InMemorySpanExporter()
        self.processor = TempoTraceSpanProcessor(state=state)
        self.provider = TracerProvider()
        self.provider.add_span_processor(self.processor)
        self.provider.add_span_processor(SimpleSpanProcessor(self.exporter))
        self.tracer = self.provider.get_tracer("tests")
        self.propagator = TempoTracePropagator(state=state)

    def spans(self) -> dict[str, Any]:
        """Exported spans by name, as a reader sees them (``Exported``)."""
        return {s.name: Exported(s) for s in self.exporter.get_finished_spans()}

    def raw_spans(self) -> dict[str, Any]:
        """Exported spans by name, their attributes as written."""
        return {s.name: s for s in self.exporter.get_finished_spans()}


def exported(exporter: InMemorySpanExporter) -> list[Exported]:
    """An in-memory exporter's spans as a reader sees them (``Exported``)."""
    return [Exported(s) for s in exporter.get_finished_spans()]


class Exported:
    """An exported span whose ``attributes`` are what a reader gets: ``tempotrace.stamps`` written out under
    the names of §1.5 (``stamptext.expand``), and the Resource's per-process attributes where the span has
    none. ``raw`` is the span itself; every other attribute is the span's."""

    def __init__(self, span: Any) -> None:
        self.raw = span
        attrs = expand(span.attributes or {}, span.start_time, span.end_time)
        for key, value in (span.resource.attributes if span.resource is not None else {}).items():
            if key.startswith("tempotrace.") and key not in attrs:
                attrs[key] = value
        self.attributes = attrs

    def __getattr__(self, name: str) -> Any:
        return getattr(self.raw, name)


def read_spans(*paths: Path) -> list[dict[str, Any]]:
    """Flatten OTLP JSON lines into dicts: name, trace/span/parent ids (hex), attributes as a reader gets
    them (``attrs``: stamps written out, the Resource's per-process attributes added) and as written (``raw``)."""
    out = []
    for path in paths:
        for line in Path(path).read_text().splitlines():
            doc = json.loads(line)
            for rs in doc["resourceSpans"]:
                resource = {a["key"]: _value(a["value"]) for a in rs["resource"]["attributes"]}
                service = {"stringValue": resource.get("service.name")}
                for ss in rs["scopeSpans"]:
                    for sp in ss["spans"]:
                        raw = {a["key"]: _value(a["value"]) for a in sp.get("attributes", [])}
                        attrs = expand(raw, int(sp["startTimeUnixNano"]), int(sp["endTimeUnixNano"]))
                        for key, value in resource.items():  # per-process attributes (semantic-conventions §1.2)
                            if key.startswith("tempotrace.") and key not in attrs:
                                attrs[key] = value
                        out.append(
                            {
                                "name": sp["name"],
                                "service": service.get("stringValue"),
                                "trace_id": sp["traceId"],
                                "span_id": sp["spanId"],
                                "parent": sp.get("parentSpanId") or None,
                                "start": int(sp["startTimeUnixNano"]),
                                "end": int(sp["endTimeUnixNano"]),
                                "attrs": attrs,
                                "raw": raw,
                            }
                        )
    return out


def full_sketch(span: dict[str, Any], spans: list[dict[str, Any]]) -> Sketch:
    """A span's sketch as a reader of the whole export has it (semantic-conventions §2): the written one
    (a span that received a header), else its parent's plus its own id (a root: its own id; a parent not
    in the export: that id)."""
    by_id = {s["span_id"]: s for s in spans}
    chain, sketch = [], None
    while span is not None:
        written = span["attrs"].get(S.SVC_SKETCH)
        if written:
            sketch = Sketch.from_bytes(bytes.fromhex(written))
            break
        chain.append(int(span["span_id"], 16))
        parent = span["parent"]
        span = by_id.get(parent) if parent else None
        if span is None:
            sketch = Sketch.of(int(parent, 16)) if parent else Sketch.EMPTY
    assert sketch is not None
    for span_id in reversed(chain):
        sketch = sketch.with_span(span_id)
    return sketch


def _value(v: dict[str, Any]) -> Any:
    if "intValue" in v:
        return int(v["intValue"])
    if "arrayValue" in v:
        return [_value(x) for x in v["arrayValue"].get("values", [])]
    for key in ("stringValue", "boolValue", "doubleValue"):
        if key in v:
            return v[key]
    return v


def subprocess_env(**extra: str) -> dict[str, str]:
    """The test process's environment minus anything that would change the setup under test."""
    env = {k: v for k, v in os.environ.items() if not k.startswith(("OTEL_", "TEMPOTRACE_"))}
    env.update(extra)
    return env


#: The node program of the multi-process tests (tests/otel/_otel_node.py).
NODE = str(Path(__file__).with_name("_otel_node.py"))


class Cluster:
    """Real node processes over localhost HTTP, all exporting to one OTLP JSON-lines file."""

    def __init__(self, export: Path) -> None:
        self.export = export
        self.procs: list[subprocess.Popen[str]] = []

    def env(self, host: str, clock: str) -> dict[str, str]:
        return subprocess_env(
            OTEL_PROPAGATORS="tracecontext,baggage,tempotrace",
            TEMPOTRACE_EXPORT_PATH=str(self.export),
            TEMPOTRACE_EXPORT_SYNC="1",
            TEMPOTRACE_HOST=host,
            TEMPOTRACE_CLOCK=clock,
        )

    def server(self, *args: str, host: str, clock: str = "sim:ptp") -> int:
        proc = subprocess.Popen(
            [sys.executable, NODE, *args], env=self.env(host, clock), stdout=subprocess.PIPE, text=True
        )
        self.procs.append(proc)
        assert proc.stdout is not None
        line = proc.stdout.readline()
        assert line.strip().isdigit(), f"{args} did not start"
        return int(line)

    def client(self, url: str, how: str, host: str = "node-a", clock: str = "sim:ntp") -> str:
        out = subprocess.run(
            [sys.executable, NODE, "client", url, how],
            env=self.env(host, clock),
            capture_output=True,
            text=True,
            timeout=60,
        )
        assert out.returncode == 0, out.stderr
        return out.stdout.strip()

    def spans(self, expected: int) -> list[dict[str, Any]]:
        # Servers end their span just after the response is written: wait for the export
        # (generously: the machine may be loaded).
        deadline = time.monotonic() + 30
        while True:
            spans = read_spans(self.export) if self.export.exists() else []
            if len(spans) >= expected or time.monotonic() > deadline:
                return spans
            time.sleep(0.05)

    def close(self) -> None:
        for proc in self.procs:
            proc.terminate()
        for proc in self.procs:
            proc.wait(10)
