"""Reading OTLP JSON lines (spec/analysis.md §5): the real exporter's shape, both id
encodings, and clear errors (line number and why) for everything else."""

from __future__ import annotations

import base64
import json
from pathlib import Path

import pytest

from tempotrace_sdk.analysis import TopologyError, TraceFileError, analyze_file, iter_spans, load_topology

from .tracegen import write_trace

TRACE = "0af7651916cd43dd8448eb211c80319c"
SPAN = "b7ad6b7169203331"


def _line(span: dict) -> str:  # type: ignore[type-arg]
    return json.dumps({"resourceSpans": [{"resource": {"attributes": []}, "scopeSpans": [{"spans": [span]}]}]})


def _span(**over: object) -> dict:  # type: ignore[type-arg]
    span = {"traceId": TRACE, "spanId": SPAN, "name": "x", "kind": 1, "startTimeUnixNano": "5", "endTimeUnixNano": "9",
            "attributes": [{"key": "tempotrace.ptp_ns", "value": {"intValue": "1000"}},
                           {"key": "tempotrace.uncertainty_ns", "value": {"intValue": "220"}},
                           {"key": "tempotrace.clk_quality", "value": {"stringValue": "OK"}},
                           {"key": "tempotrace.host", "value": {"stringValue": "h1"}}]}
    span.update(over)
    return span


def test_real_exporter_output_is_read(tmp_path: Path) -> None:
    path = tmp_path / "t.jsonl"
    write_trace(str(path), {"c": "sim:ptp", "w1": "sim:ptp", "w2": "sim:ptp"}, steps=1)
    spans = list(iter_spans(str(path)))
    assert spans and all(len(s.trace_id) == 32 and len(s.span_id) == 16 for s in spans)
    servers = [s for s in spans if s.remote is not None]
    assert servers and all(s.kind == 2 and s.recv_lts is not None and s.sketch for s in servers)
    clients = [s for s in spans if s.sends]
    assert clients and all(s.kind == 3 for s in clients)
    assert {s.host for s in spans} == {"c", "w1", "w2"}
    assert all(s.start.quality == "OK" and s.start.uncertainty_ns == 220 and s.end is not None for s in spans)


def test_base64_ids_are_accepted(tmp_path: Path) -> None:
    path = tmp_path / "b64.jsonl"
    b64 = {"traceId": base64.b64encode(bytes.fromhex(TRACE)).decode(),
           "spanId": base64.b64encode(bytes.fromhex(SPAN)).decode()}
    path.write_text(_line(_span(**b64)) + "\n")
    (span,) = iter_spans(str(path))
    assert (span.trace_id, span.span_id) == (TRACE, SPAN)
    assert span.start.ptp_ns == 1000 and span.host == "h1"


BAD = [
    ("not JSON", "{oops\n", 1, "not JSON"),
    ("foreign JSON object", '{"hello": 1}\n', 1, "no 'resourceSpans' key"),
    ("metrics file", '{"resourceMetrics": []}\n', 1, "metrics/logs"),
    ("bad line after good ones", _line(_span()) + "\n\n" + "[1,2]\n", 3, "not an OTLP trace line"),
    ("bad span id", _line(_span(spanId="zz")) + "\n", 1, "spanId"),
    ("uncertainty out of range", _line(_span(attributes=[
        {"key": "tempotrace.ptp_ns", "value": {"intValue": "1"}},
        {"key": "tempotrace.uncertainty_ns", "value": {"intValue": "70000"}}])) + "\n", 1, "tempotrace.uncertainty_ns"),
    ("unknown quality", _line(_span(attributes=[
        {"key": "tempotrace.ptp_ns", "value": {"intValue": "1"}},
        {"key": "tempotrace.clk_quality", "value": {"stringValue": "GREAT"}}])) + "\n", 1, "tempotrace.clk_quality"),
    ("empty file", "", 0, "no OTLP trace lines"),
    ("only blank lines", "\n  \n\t\n", 0, "no OTLP trace lines"),
]


@pytest.mark.parametrize(("name", "text", "line", "why"), BAD, ids=[b[0] for b in BAD])
def test_bad_input_names_the_line_and_the_reason(tmp_path: Path, name: str, text: str, line: int, why: str) -> None:
    path = tmp_path / "bad.jsonl"
    path.write_text(text)
    with pytest.raises(TraceFileError) as info:
        analyze_file(str(path), strict=True)
    assert info.value.line == line, name
    assert why in info.value.reason
    assert (f"{path}:{line}" if line else str(path)) in str(info.value)


def test_binary_file_is_refused(tmp_path: Path) -> None:
    path = tmp_path / "bin.jsonl"
    path.write_bytes(b"\x89PNG\r\n\x1a\n\xff\xfe\x00")
    with pytest.raises(TraceFileError, match="not UTF-8"):
        analyze_file(str(path), strict=True)


def test_missing_file_is_a_trace_file_error(tmp_path: Path) -> None:
    with pytest.raises(TraceFileError, match="cannot open"):
        analyze_file(str(tmp_path / "nope.jsonl"))


def test_topology_file_is_validated(tmp_path: Path) -> None:
    good = tmp_path / "topo.json"
    good.write_text(json.dumps({"racks": {"a": "r1", "b": "r2", "c": "r1"},
                                "rack_pairs": [{"racks": ["r1", "r2"], "extra_ns": 120}],
                                "default_cross_rack_ns": 40}))
    topo = load_topology(str(good))
    assert topo.extra_ns("a", "b") == 120
    assert topo.extra_ns("a", "c") == 0
    assert topo.extra_ns("a", "zz") == 120  # unknown host: the worst case, never less
    for doc, field in (({"racks": {"a": 1}}, "racks"), ({"rack_pairs": [{"racks": ["r1"], "extra_ns": 1}]},
                       "rack_pairs[0].racks"), ({"rack_pairs": [{"racks": ["r1", "r2"], "extra_ns": -1}]},
                       "rack_pairs[0].extra_ns"), ({"rackz": {}}, "rackz")):
        bad = tmp_path / "bad.json"
        bad.write_text(json.dumps(doc))
        with pytest.raises(TopologyError) as info:
            load_topology(str(bad))
        assert info.value.field == field
