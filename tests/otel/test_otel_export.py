"""configure() and the file exporter: env-only setup, shared files, per-process files."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
from _otel_helpers import read_spans, subprocess_env

from tempotrace_sdk import semconv as S
from tempotrace_sdk.otel import AppendStream

WRITER = """
import os, sys
from tempotrace_sdk.otel import configure, span
handle = configure(service_name="w" + sys.argv[1])
for i in range(int(sys.argv[2])):
    with span(f"w{sys.argv[1]}-{i}", attributes={"pad": "x" * 3000}):
        pass
handle.shutdown()
print(handle.export_path)
"""


def test_processes_share_one_file_without_interleaving(tmp_path: Path) -> None:
    """Four writers, batches far larger than a pipe buffer: every line stays whole JSON."""
    path = tmp_path / "shared.jsonl"
    env = subprocess_env(TEMPOTRACE_EXPORT_PATH=str(path), TEMPOTRACE_CLOCK="sim:ptp")
    procs = [
        subprocess.Popen([sys.executable, "-c", WRITER, str(n), "60"], env=env, stdout=subprocess.PIPE, text=True)
        for n in range(4)
    ]
    outs = [p.communicate(timeout=60)[0].strip() for p in procs]
    assert all(p.returncode == 0 for p in procs)
    assert outs == [str(path)] * 4
    for line in path.read_text().splitlines():
        json.loads(line)  # a torn or interleaved line would not parse
    spans = read_spans(path)
    assert len(spans) == 240
    assert {s["service"] for s in spans} == {"w0", "w1", "w2", "w3"}
    assert all(S.END_PTP_NS in s["attrs"] for s in spans)


def test_default_configuration_writes_the_documented_file(tmp_path: Path) -> None:
    env = subprocess_env(TEMPOTRACE_CLOCK="cpu")
    out = subprocess.run(
        [sys.executable, "-c", WRITER, "0", "2"], env=env, cwd=tmp_path, capture_output=True, text=True, timeout=60
    )
    assert out.returncode == 0, out.stderr
    assert out.stdout.strip() == str(tmp_path / "tempotrace-spans.jsonl")
    spans = read_spans(tmp_path / "tempotrace-spans.jsonl")
    assert [s["attrs"][S.TS_SOURCE] for s in spans] == ["CPU", "CPU"]
    assert all(s["attrs"][S.CLOCK] == "cpu" for s in spans)


def test_environment_sets_tenant_host_policy_and_fallback(tmp_path: Path) -> None:
    policy = Path(__file__).resolve().parents[2] / "examples" / "policies" / "cluster.toml"
    code = (
        "from opentelemetry.propagate import get_global_textmap\n"
        "from tempotrace_sdk.otel import configure, span\n"
        "h = configure()\n"
        "print(sorted(get_global_textmap().fields))\n"
        "with span('x'): pass\n"
        "h.shutdown()\n"
    )
    env = subprocess_env(
        TEMPOTRACE_EXPORT_DIR=str(tmp_path / "dir"),
        TEMPOTRACE_TENANT="2",
        TEMPOTRACE_HOST="rack7-node3",
        TEMPOTRACE_POLICY=str(policy),
        TEMPOTRACE_CLOCK="sim:ptp",
        TEMPOTRACE_TRACESTATE_FALLBACK="1",
    )
    out = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True, timeout=60)
    assert out.returncode == 0, out.stderr
    assert "tt-ext" in out.stdout and "tracestate" in out.stdout and "baggage" in out.stdout
    (file,) = (tmp_path / "dir").iterdir()
    assert file.name.startswith("spans-") and file.suffix == ".jsonl"
    (span,) = read_spans(file)
    assert span["attrs"][S.TENANT_ID] == 2
    assert span["attrs"][S.HOST] == "rack7-node3"
    assert span["attrs"][S.POLICY_TIER] == "tier-2"
    assert S.POLICY_VERDICT not in span["attrs"]  # a pass is not written: sim:ptp is GTE, 220 ns, inside 2,100 ns
    # configure() made the provider: what every span shares is on the Resource, not on the span (§1.2)
    assert not {S.HOST, S.TENANT_ID, S.CLOCK, S.POLICY_TIER} & set(span["raw"])


@pytest.mark.parametrize(
    ("variable", "value", "message"),
    [
        ("TEMPOTRACE_TENANT", "16", "TEMPOTRACE_TENANT must be 0..15"),
        ("TEMPOTRACE_CLOCK", "sundial", "sundial"),
        ("TEMPOTRACE_POLICY", "/nonexistent/p.toml", "cannot read policy file"),
    ],
)
def test_configuration_mistakes_are_loud(variable: str, value: str, message: str) -> None:
    code = "from tempotrace_sdk.otel import configure\nconfigure()\n"
    out = subprocess.run(
        [sys.executable, "-c", code],
        env=subprocess_env(**{variable: value}),
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert out.returncode != 0
    assert message in out.stderr


def test_per_process_directory_follows_fork(tmp_path: Path) -> None:
    stream = AppendStream(lambda pid: str(tmp_path / f"spans-{pid}.jsonl"))
    stream.write("parent\n")
    stream.flush()
    pid = os.fork()
    if pid == 0:
        try:
            stream.write("child\n")
            stream.flush()
        finally:
            os._exit(0)
    os.waitpid(pid, 0)
    stream.close()
    assert (tmp_path / f"spans-{os.getpid()}.jsonl").read_text() == "parent\n"
    assert (tmp_path / f"spans-{pid}.jsonl").read_text() == "child\n"


def test_configure_applies_the_fallback_option_to_env_built_propagators() -> None:
    code = (
        "from opentelemetry.propagate import get_global_textmap\n"
        "from tempotrace_sdk.otel import configure\n"
        "configure(tracestate_fallback=True, exporter=__import__('opentelemetry.sdk.trace.export',"
        " fromlist=['x']).ConsoleSpanExporter())\n"
        "print(sorted(get_global_textmap().fields))\n"
    )
    env = subprocess_env(OTEL_PROPAGATORS="tracecontext,tempotrace", TEMPOTRACE_CLOCK="sim:ptp")
    out = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True, timeout=60)
    assert out.returncode == 0, out.stderr
    assert out.stdout.strip() == "['traceparent', 'tracestate', 'tt-ext']"


def test_collector_variables_select_otlp_or_say_what_to_install(monkeypatch: pytest.MonkeyPatch) -> None:
    import importlib

    from tempotrace_sdk.otel.export import select_exporter

    for name in ("TEMPOTRACE_EXPORT_PATH", "TEMPOTRACE_EXPORT_DIR", "OTEL_TRACES_EXPORTER"):
        monkeypatch.delenv(name, raising=False)
    monkeypatch.setenv("OTEL_EXPORTER_OTLP_ENDPOINT", "http://collector.invalid:4318")
    try:
        importlib.import_module("opentelemetry.exporter.otlp.proto.http.trace_exporter")
        installed = True
    except ImportError:
        installed = False
    if not installed:
        with pytest.raises(ImportError, match="pip install opentelemetry-exporter-otlp-proto-http"):
            select_exporter(None, None)
    else:
        exporters, path = select_exporter(None, None)
        assert path is None and type(exporters[0]).__name__ == "OTLPSpanExporter"
    monkeypatch.setenv("OTEL_TRACES_EXPORTER", "none")
    assert select_exporter(None, None) == ([], None)
    monkeypatch.setenv("OTEL_TRACES_EXPORTER", "zipkin")
    with pytest.raises(ValueError, match="unknown exporter 'zipkin'"):
        select_exporter(None, None)


FORKER = """
import os, sys
from tempotrace_sdk.otel import configure, span
handle = configure(service_name="forker")
with span("parent-step"):
    pid = os.fork()
    if pid == 0:
        with span("child-step"):
            pass
        handle.force_flush()
        os._exit(0)
    os.waitpid(pid, 0)
handle.shutdown()
print(pid)
"""


def test_configure_then_fork_gives_each_process_its_own_file(tmp_path: Path) -> None:
    """The demo's pattern: configure once, fork workers, each flushes before os._exit."""
    env = subprocess_env(TEMPOTRACE_EXPORT_DIR=str(tmp_path), TEMPOTRACE_CLOCK="sim:ptp")
    out = subprocess.run([sys.executable, "-c", FORKER], env=env, capture_output=True, text=True, timeout=60)
    assert out.returncode == 0, out.stderr
    child_pid = int(out.stdout)
    files = {p.name for p in tmp_path.iterdir()}
    assert f"spans-{child_pid}.jsonl" in files and len(files) == 2
    (child,) = read_spans(tmp_path / f"spans-{child_pid}.jsonl")
    (parent,) = [s for p in tmp_path.iterdir() if p.name != f"spans-{child_pid}.jsonl" for s in read_spans(p)]
    assert child["name"] == "child-step" and parent["name"] == "parent-step"
    assert child["parent"] == parent["span_id"]
    assert child["attrs"][S.LTS] > parent["attrs"][S.LTS]
