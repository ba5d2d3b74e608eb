"""Real exports (spec/analysis.md §5.1): several files, directories, globs and stdin read as one trace;
a writer killed mid-line costs one counted line, not the analysis; the OpenTelemetry Collector's
file-exporter encoding reads the same as ours; an analysis physics could not help says why."""

from __future__ import annotations

import base64
import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from tempotrace_sdk.analysis import TraceFileError, analyze, analyze_file
from tempotrace_sdk.cli.main import main as cli

from .tracegen import write_trace

HOSTS = {"coord": "sim:ptp", "w1": "sim:ptp", "w2": "sim:liar", "w3": "sim:ptp", "w4": "sim:ntp"}


@pytest.fixture(scope="module")
def trace(tmp_path_factory: pytest.TempPathFactory) -> Path:
    path = tmp_path_factory.mktemp("in") / "all.jsonl"
    write_trace(str(path), HOSTS, steps=3)
    return path


@pytest.fixture(scope="module")
def per_process(trace: Path, tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The same trace as TEMPOTRACE_EXPORT_DIR leaves it: one file per process (here: per host)."""
    folder = tmp_path_factory.mktemp("export")
    files: dict[str, list[str]] = {}
    for text in trace.read_text().splitlines():
        attrs = json.loads(text)["resourceSpans"][0]["resource"]["attributes"]
        host = next(a["value"]["stringValue"] for a in attrs if a["key"] == "service.name")
        files.setdefault(host, []).append(text)
    for host, lines in files.items():
        (folder / f"spans-{host}.jsonl").write_text("\n".join(lines) + "\n")
    (folder / ".spans-tmp.jsonl").write_text("{half a line")  # hidden: an exporter's temporary file
    (folder / "notes.txt").write_text("not a trace\n")  # not *.jsonl / *.json
    return folder


def _same(a: dict[str, Any], b: dict[str, Any]) -> None:
    for key in ("summary", "edges", "hops", "faults", "wrong_by_pair", "traces", "unresolved_parents"):
        assert a[key] == b[key], key


def test_a_directory_of_per_process_files_is_one_trace(trace: Path, per_process: Path) -> None:
    one = analyze_file(str(trace)).to_dict()
    many = analyze_file(str(per_process)).to_dict()
    _same(one, many)
    assert many["inputs"] == len(HOSTS) and many["bad"]["lines"] == 0
    assert "w2" in {f["host"] for f in many["faults"]} and many["hops"]["matched"] == many["hops"]["total"]


def test_globs_and_several_files_read_the_same(trace: Path, per_process: Path) -> None:
    one = analyze_file(str(trace)).to_dict()
    _same(one, analyze_file(str(per_process / "spans-*.jsonl")).to_dict())
    files = sorted(str(p) for p in per_process.glob("spans-*.jsonl"))
    _same(one, analyze(files).to_dict())
    assert analyze([*files, files[0], str(per_process)]).inputs == len(files)  # each file read once


def test_stdin_reads_the_same(trace: Path) -> None:
    with trace.open("rb") as fh:
        out = subprocess.run([sys.executable, "-m", "tempotrace_sdk", "analyze", "-", "--json"], stdin=fh,
                             capture_output=True, timeout=120, check=False)
    assert out.returncode == 0, out.stderr
    _same(analyze_file(str(trace)).to_dict(), json.loads(out.stdout))


INPUT_ERRORS = [
    ("a missing file", lambda d: [str(d / "absent.jsonl")], "cannot open"),
    ("a pattern matching nothing", lambda d: [str(d / "*.nothing")], "no file matches"),
    ("a directory without trace files", lambda d: [str(d / "empty")], "a directory with no"),
    ("a character device", lambda d: ["/dev/null"], "not a regular file (a character device)"),
    ("stdin beside a file", lambda d: ["-", str(d / "t.jsonl")], "cannot be combined"),
]


@pytest.mark.parametrize(("name", "args", "why"), INPUT_ERRORS, ids=[e[0] for e in INPUT_ERRORS])
def test_input_errors_exit_2_with_the_reason(tmp_path: Path, capsys: pytest.CaptureFixture[str], name: str,
                                            args: Any, why: str) -> None:
    (tmp_path / "empty").mkdir()
    (tmp_path / "t.jsonl").write_text("{}\n")
    assert cli(["analyze", *args(tmp_path)]) == 2, name
    err = capsys.readouterr().err
    assert err.startswith("tempotrace analyze: ") and why in err


def test_a_line_cut_short_is_skipped_and_counted(trace: Path, tmp_path: Path,
                                                 capsys: pytest.CaptureFixture[str]) -> None:
    """§5.1: a writer killed mid-line leaves a truncated last line: by default it is skipped and counted
    with its path:line (report and warning); --strict keeps the old behaviour: exit 2 at that line."""
    lines = trace.read_text().splitlines()
    cut = tmp_path / "cut.jsonl"
    cut.write_text("\n".join(lines[:-1]) + "\n" + lines[-1][: len(lines[-1]) // 2])
    whole = analyze_file(str(trace)).to_dict()
    d = analyze_file(str(cut)).to_dict()
    last_spans = sum(len(ss["spans"]) for rs in json.loads(lines[-1])["resourceSpans"] for ss in rs["scopeSpans"])
    assert d["spans"] == whole["spans"] - last_spans
    assert d["bad"]["lines"] == 1 and d["summary"]["bad_lines"] == 1
    (first,) = d["bad"]["first"]
    assert first["path"] == str(cut) and first["line"] == len(lines) and "not JSON" in first["reason"]
    assert cli(["analyze", str(cut)]) == 0
    out = capsys.readouterr().out
    assert "WARNING: skipped 1 unreadable lines and 0 malformed spans" in out and f"(first: {cut}:{len(lines)}:" in out
    assert cli(["analyze", str(cut), "--strict"]) == 2
    assert f"{cut}:{len(lines)}: not JSON" in capsys.readouterr().err
    assert cli(["analyze", str(cut), "--json"]) == 0
    captured = capsys.readouterr()
    assert json.loads(captured.out)["bad"]["lines"] == 1 and "warning: skipped 1 unreadable lines" in captured.err


def _b64(hex_id: str) -> str:
    return base64.b64encode(bytes.fromhex(hex_id)).decode()


_KIND_NAMES = ["SPAN_KIND_UNSPECIFIED", "SPAN_KIND_INTERNAL", "SPAN_KIND_SERVER", "SPAN_KIND_CLIENT",
               "SPAN_KIND_PRODUCER", "SPAN_KIND_CONSUMER"]


def _as_collector(doc: dict[str, Any], ids: str) -> dict[str, Any]:
    """A line as a protobuf-JSON writer may put it: 64-bit integers as numbers, enum names, ids in
    base64 (``ids="base64"``) or hex, and the fields we do not read (schemaUrl, dropped counts, status,
    scope version and attributes, links, span events)."""

    def value(v: dict[str, Any]) -> dict[str, Any]:
        if "intValue" in v:
            return {"intValue": int(v["intValue"])}
        if "arrayValue" in v:
            return {"arrayValue": {"values": [value(x) for x in v["arrayValue"]["values"]]}}
        return v

    for rs in doc["resourceSpans"]:
        rs["schemaUrl"] = "https://opentelemetry.io/schemas/1.24.0"
        rs["resource"]["droppedAttributesCount"] = 0
        for ss in rs["scopeSpans"]:
            nested = {"kvlistValue": {"values": [{"key": "a", "value": {"boolValue": True}}]}}
            ss["scope"] = {"name": "collector", "version": "0.110.0", "attributes": [{"key": "k", "value": nested}]}
            for span in ss["spans"]:
                if ids == "base64":
                    for key in ("traceId", "spanId", "parentSpanId"):
                        if span.get(key):
                            span[key] = _b64(span[key])
                span["kind"] = _KIND_NAMES[span["kind"]]
                span["startTimeUnixNano"] = int(span["startTimeUnixNano"])
                span["endTimeUnixNano"] = int(span["endTimeUnixNano"])
                span["attributes"] = [{"key": a["key"], "value": value(a["value"])} for a in span["attributes"]]
                span["droppedAttributesCount"] = 0
                span["events"] = [{"timeUnixNano": "1", "name": "e", "attributes": [
                    {"key": "x", "value": {"doubleValue": 1.5}}]}]
                span["links"] = []
                span["status"] = {"code": "STATUS_CODE_UNSET"}
    return doc


@pytest.mark.parametrize("ids", ["hex", "base64"])
def test_the_collectors_file_exporter_encoding_reads_the_same(trace: Path, tmp_path: Path, ids: str) -> None:
    """§5: ids hex or base64, 64-bit integers as strings or numbers, enums as numbers or names."""
    converted = tmp_path / "collector.json"
    converted.write_text("\n".join(json.dumps(_as_collector(json.loads(x), ids))
                                   for x in trace.read_text().splitlines()) + "\n")
    _same(analyze_file(str(trace)).to_dict(), analyze_file(str(converted), strict=True).to_dict())


def test_when_physics_decides_nothing_the_summary_says_why(tmp_path: Path) -> None:
    """§6: a host without PTP (NTP-class bounds, saturated) is the normal case: no silent "physics 0"."""
    path = tmp_path / "ntp.jsonl"
    write_trace(str(path), {"a": "sim:ntp", "b": "sim:ntp", "c": "sim:ntp"}, steps=1)
    rep = analyze_file(str(path))
    d = rep.to_dict()
    assert d["edges"]["decided"]["physics"] == 0 and d["edges"]["total"] > 0
    assert d["edges"]["physics_silent"] == {"saturated_bound": d["edges"]["total"]}
    text = rep.to_text()
    assert "physics decided no edge" in text and "saturated" in text and "tempotrace clock" in text
    honest = tmp_path / "ptp.jsonl"
    write_trace(str(honest), {"a": "sim:ptp", "b": "sim:ptp"}, steps=1)
    assert "physics decided no edge" not in analyze_file(str(honest)).to_text()


def test_a_directory_file_that_is_not_a_trace_is_named_not_counted(trace: Path, tmp_path: Path) -> None:
    """§5.1: a report or a metrics export beside the trace files is skipped whole and named."""
    folder = tmp_path / "out"
    folder.mkdir()
    (folder / "trace.jsonl").write_text(trace.read_text())
    (folder / "report.json").write_text(json.dumps({"schema": "x"}, indent=2))
    (folder / "metrics.jsonl").write_text('{"resourceMetrics": []}\n')
    d = analyze_file(str(folder)).to_dict()
    assert d["bad"]["lines"] == 0 and d["inputs"] == 3
    assert sorted(os.path.basename(x.split(":")[0]) for x in d["bad"]["not_trace_files"]) == ["metrics.jsonl",
                                                                                              "report.json"]
    _same(analyze_file(str(trace)).to_dict(), d)


def test_the_library_is_strict_only_when_asked(tmp_path: Path) -> None:
    path = tmp_path / "t.jsonl"
    path.write_text('{"resourceSpans": []}\nnot json\n')
    with pytest.raises(TraceFileError, match="no spans"):
        analyze_file(str(path))
    with pytest.raises(TraceFileError, match=":2: not JSON"):
        analyze_file(str(path), strict=True)
