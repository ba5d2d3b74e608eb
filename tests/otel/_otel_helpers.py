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

from tempotrace_sdk.clocks.base import Timestamp
from tempotrace_sdk.otel import TempoTracePropagator, TempoTraceSpanProcessor, TempoTraceState
from tempotrace_sdk.wire import ClockQuality, TsSource

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
        return {s.name: s for s in self.exporter.get_finished_spans()}


def read_spans(*paths: Path) -> list[dict[str, Any]]:
    """Flatten OTLP JSON lines into dicts: name, trace/span/parent ids (hex), attributes."""
    out = []
    for path in paths:
        for line in Path(path).read_text().splitlines():
            doc = json.loads(line)
            for rs in doc["resourceSpans"]:
                service = {a["key"]: a["value"] for a in rs["resource"]["attributes"]}.get("service.name", {})
                for ss in rs["scopeSpans"]:
                    for sp in ss["spans"]:
                        attrs = {a["key"]: _value(a["value"]) for a in sp.get("attributes", [])}
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
                            }
                        )
    return out


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
