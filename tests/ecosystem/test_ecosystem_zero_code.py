"""Zero-code use: ``opentelemetry-instrument`` alone installs TempoTrace (README "Zero-code", spec/configuration.md).

A real Flask service and a real ``requests`` client, separate processes, each
started as ``OTEL_PROPAGATORS=tracecontext,baggage,tempotrace opentelemetry-instrument
python FILE`` with no TempoTrace code in them. They write the default JSON-lines
file in their working directory; ``tempotrace analyze`` must match the one hop once.
"""

from __future__ import annotations

import json
import subprocess
import sys
import threading
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any, ClassVar

import pytest
from _eco_helpers import HERE, INSTRUMENT, clean_env, interrupt, read_line, read_spans

from tempotrace_sdk import semconv as S
from tempotrace_sdk.stamptext import expand

pytestmark = [
    pytest.mark.slow,
    pytest.mark.skipif(not INSTRUMENT.exists(), reason="opentelemetry-instrument not installed (test extra)"),
]

PROPAGATORS = "tracecontext,baggage,tempotrace"


def instrumented(script: str, *args: str, service: str, **env: str) -> dict[str, Any]:
    """``OTEL_PROPAGATORS=... opentelemetry-instrument python SCRIPT ARGS``: Popen/run keywords, no tracing code."""
    return {
        "args": [str(INSTRUMENT), sys.executable, str(HERE / script), *args],
        "env": clean_env(
            OTEL_PROPAGATORS=PROPAGATORS, OTEL_SERVICE_NAME=service, TEMPOTRACE_HOST=f"{service}-1", **env
        ),
        "text": True,
    }


class Service:
    """The Flask app under ``opentelemetry-instrument``; ``stop()`` sends Ctrl-C and returns its stderr."""

    def __init__(self, cwd: Path, **env: str) -> None:
        launch = instrumented("zero_code_app.py", service="web", **env)
        self.proc = subprocess.Popen(**launch, cwd=cwd, stdout=subprocess.PIPE, stderr=subprocess.PIPE)
        self.url = f"http://127.0.0.1:{read_line(self.proc, 60)}/hello"

    def stop(self) -> str:
        return interrupt(self.proc)


@pytest.fixture
def workdir(tmp_path: Path) -> Path:
    return tmp_path


def run_client(cwd: Path, url: str, **env: str) -> dict[str, Any]:
    out = subprocess.run(**instrumented("zero_code_client.py", url, service="cli", **env), cwd=cwd,
                         capture_output=True, timeout=60)  # fmt: skip
    assert out.returncode == 0, out.stderr
    received: dict[str, Any] = json.loads(out.stdout)
    return received


def analyze(path: Path) -> dict[str, Any]:
    out = subprocess.run(
        [sys.executable, "-m", "tempotrace_sdk", "analyze", str(path), "--json", "--quiet"],
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert out.returncode == 0, out.stderr
    report: dict[str, Any] = json.loads(out.stdout)
    return report


@pytest.fixture
def service(workdir: Path, request: pytest.FixtureRequest) -> Iterator[Service]:
    svc = Service(workdir, **getattr(request, "param", {}))
    yield svc
    svc.stop()


@pytest.mark.parametrize(
    "service",
    [{}, {"APP_CALLS_CONFIGURE": "1"}],
    ids=["no-configure-call", "app-also-calls-configure"],
    indirect=True,
)
def test_instrument_alone_installs_clock_processor_propagator_and_exporter(workdir: Path, service: Service) -> None:
    """Both spans carry tempotrace attributes, traceparent and tt-ext went over the wire, the hop matches once.

    With ``configure()`` also called by the app, nothing is doubled: one span per
    request, one hop (configure replaces the pipeline the configurator installed).
    """
    received = run_client(workdir, service.url, OTEL_RESOURCE_ATTRIBUTES="deployment.environment=zero-code-test")
    stderr = service.stop()
    assert received["traceparent"] and received["tt-ext"], received

    spans = read_spans(workdir / "tempotrace-spans.jsonl")  # the default file, in each process's cwd
    by_service = {s["resource"]["service.name"]: s for s in spans}
    assert sorted(s["resource"]["service.name"] for s in spans) == ["cli", "web"], (spans, stderr)
    client, server = by_service["cli"], by_service["web"]
    assert server["trace_id"] == client["trace_id"] and server["parent"] == client["span_id"]
    assert received["traceparent"].split("-")[2] == client["span_id"]
    for span, host in ((client, "cli-1"), (server, "web-1")):
        attrs = span["attrs"]
        assert attrs[S.TS_SOURCE] == "CPU" and S.PTP_NS in attrs and S.LTS in attrs
        # the configurator made the provider: host and clock are on its Resource, not on every span
        assert span["resource"][S.HOST] == host and span["resource"][S.CLOCK] and S.HOST not in span["raw"]
        assert span["resource"]["telemetry.auto.version"], "the configurator records the auto-instrumentation"
    assert client["resource"]["deployment.environment"] == "zero-code-test"  # OTEL_RESOURCE_ATTRIBUTES
    assert len(client["attrs"][S.SEND_LTS]) == 1  # one inject, one hop
    assert server["attrs"][S.REMOTE_LTS] == client["attrs"][S.SEND_LTS][0]
    assert server["attrs"][S.RECV_LTS] > server["attrs"][S.REMOTE_LTS]

    report = analyze(workdir / "tempotrace-spans.jsonl")
    assert report["hops"] == {"total": 1, "matched": 1}, report["hops"]


@pytest.mark.parametrize("service", [{"OTEL_SDK_DISABLED": "true"}], indirect=True)
def test_sdk_disabled_installs_nothing(workdir: Path, service: Service) -> None:
    """OTEL_SDK_DISABLED=true on the server: it still serves, writes no span file, adds no tempotrace span."""
    received = run_client(workdir, service.url)
    service.stop()
    assert received["traceparent"]  # the client is enabled and sent its context
    spans = read_spans(workdir / "tempotrace-spans.jsonl")
    assert [s["resource"]["service.name"] for s in spans] == ["cli"]


@pytest.mark.parametrize("service", [{"OTEL_TRACES_EXPORTER": "none"}], indirect=True)
def test_traces_exporter_none_exports_nothing(workdir: Path, service: Service) -> None:
    """OTEL_TRACES_EXPORTER=none on the server: no spans from it, the client's still written."""
    received = run_client(workdir, service.url)
    service.stop()
    assert received["tt-ext"]
    spans = read_spans(workdir / "tempotrace-spans.jsonl")
    assert [s["resource"]["service.name"] for s in spans] == ["cli"]


class _Collector(BaseHTTPRequestHandler):
    """A stand-in OTLP/HTTP collector: keeps every POST /v1/traces body."""

    bodies: ClassVar[list[bytes]] = []

    def do_POST(self) -> None:
        body = self.rfile.read(int(self.headers["Content-Length"]))
        if self.path == "/v1/traces":
            _Collector.bodies.append(body)
        self.send_response(200)
        self.send_header("Content-Type", "application/x-protobuf")
        self.send_header("Content-Length", "0")
        self.end_headers()

    def log_message(self, *args: object) -> None:
        pass


@pytest.fixture
def collector() -> Iterator[tuple[str, list[bytes]]]:
    _Collector.bodies = []
    server = ThreadingHTTPServer(("127.0.0.1", 0), _Collector)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    yield f"http://127.0.0.1:{server.server_address[1]}", _Collector.bodies
    server.shutdown()
    server.server_close()


def test_traces_exporter_otlp_sends_stamped_spans_to_a_collector(
    workdir: Path, collector: tuple[str, list[bytes]]
) -> None:
    """OTEL_TRACES_EXPORTER=otlp (the [otlp] extra): the collector receives the server span with tempotrace fields."""
    trace_service = pytest.importorskip(
        "opentelemetry.proto.collector.trace.v1.trace_service_pb2", reason="the [otlp] extra is not installed"
    )
    pytest.importorskip("opentelemetry.exporter.otlp.proto.http", reason="the [otlp] extra is not installed")
    endpoint, bodies = collector
    svc = Service(workdir, OTEL_TRACES_EXPORTER="otlp", OTEL_EXPORTER_OTLP_ENDPOINT=endpoint)
    try:
        received = run_client(workdir, svc.url)
    finally:
        stderr = svc.stop()
    assert received["tt-ext"]
    assert bodies, f"no OTLP export reached the collector:\n{stderr}"
    spans = []
    for body in bodies:
        request = trace_service.ExportTraceServiceRequest.FromString(body)
        spans += [sp for rs in request.resource_spans for ss in rs.scope_spans for sp in ss.spans]
    assert len(spans) == 1
    resource = {kv.key: kv.value for rs in request.resource_spans for kv in rs.resource.attributes}
    assert resource[S.HOST].string_value == "web-1"
    raw = {kv.key: kv.value for kv in spans[0].attributes}
    attrs = expand({S.STAMPS: raw[S.STAMPS].string_value}, spans[0].start_time_unix_nano, spans[0].end_time_unix_nano)
    assert attrs[S.REMOTE_LTS] > 0
    written = read_spans(workdir / "tempotrace-spans.jsonl")  # the client's default file; the server sent instead
    assert [s["resource"]["service.name"] for s in written] == ["cli"]
