"""A span table gives the report its OTLP JSON gives (spec/parquet.md §5): ``tempotrace convert`` keeps every
value the analysis reads, the bad lines and drop records where they fell, so ``analyze`` on the Parquet
equals ``analyze`` on the JSON field for field (``elapsed_s`` and the input's name aside), in one process
and split over ``--jobs``."""

from __future__ import annotations

import base64
import io
import json
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from tempotrace_sdk.analysis import TraceFileError, analyze
from tempotrace_sdk.demo import DemoConfig, run_demo
from tempotrace_sdk.stamptext import encode as encode_stamps

from .otlpgen import TAI_UTC_NS, kv, line, loss_line, span
from .parquetgen import converted, report_of
from .torchgen import MS, TorchJob
from .tracegen import write_trace

pytest.importorskip("pyarrow")

T0 = 1_800_000_000_000_000_000


def _same(json_inputs: list[str], parquet: str, **options: Any) -> dict[str, Any]:
    want = report_of(json_inputs, **options)
    assert report_of(parquet, **options) == want
    return want


@pytest.fixture(scope="module")
def http_demo(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The HTTP demo's own export: 5 processes, real sockets, a lying clock."""
    out = tmp_path_factory.mktemp("demo")
    result = run_demo(DemoConfig(http=True, ranks=3, iterations=2, out=out, liar_offset_ns=30e6), io.StringIO())
    return Path(result.paths["trace"])


@pytest.mark.parametrize("jobs", [1, 2])
def test_the_http_demos_export(http_demo: Path, tmp_path: Path, jobs: int) -> None:
    parquet = converted([str(http_demo)], str(tmp_path / "demo.parquet"))
    want = _same([str(http_demo)], parquet, jobs=jobs)
    assert want["spans"] > 100 and want["lying_hosts"] == ["node1"] and want["hops"]["matched"] > 30


@pytest.mark.slow
def test_the_torchrun_demos_export(tmp_path: Path) -> None:
    """The torchrun job's own export (gloo ranks, collectives, carried records, check_clocks)."""
    pytest.importorskip("torch")
    result = run_demo(DemoConfig(ranks=2, iterations=2, out=tmp_path / "demo"), io.StringIO())
    trace = str(result.paths["trace"])
    want = _same([trace], converted([trace], str(tmp_path / "torch.parquet")), jobs=2)
    assert want["summary"]["collectives"] > 0 and want["summary"]["steps"] == 2


@pytest.fixture(scope="module")
def two_files(tmp_path_factory: pytest.TempPathFactory) -> list[str]:
    """tests/analysis/test_analysis_engines.py's inputs: two files read side by side, a bad line, late duplicates."""
    folder = tmp_path_factory.mktemp("two")
    a, b = folder / "a.jsonl", folder / "b.jsonl"
    write_trace(str(a), {"coord": "sim:ptp", "w1": "sim:ptp", "w2": "sim:liar", "w3": "sim:ptp"}, steps=3)
    write_trace(str(b), {"c2": "sim:ptp", "x1": "sim:ntp", "x2": "sim:unsynced"}, steps=2)
    lines = b.read_text().splitlines()
    b.write_text("\n".join([*lines, "{cut sho", *lines[:3]]) + "\n")
    return [str(a), str(b)]


@pytest.mark.parametrize("jobs", [1, 2, 3])
def test_files_read_side_by_side_with_a_small_window(two_files: list[str], tmp_path: Path, jobs: int) -> None:
    """Windows count positions: the table keeps the interleaved order, so the same trace parts form."""
    parquet = converted(two_files, str(tmp_path / "two.parquet"))
    want = _same(two_files, parquet, window_spans=40, jobs=jobs)
    assert want["trace_parts"] > want["traces"] and want["duplicate_spans"] > 0 and want["bad"]["lines"] == 1


def test_row_groups_split_between_bad_lines(two_files: list[str], tmp_path: Path) -> None:
    """Row groups of 7 rows: notes fall inside and between them, and are counted where they fell."""
    parquet = converted(two_files, str(tmp_path / "small.parquet"), row_group_rows=7)
    _same(two_files, parquet, window_spans=40)
    _same(two_files, parquet, window_spans=40, jobs=2)


def test_parquet_and_json_inputs_mixed(two_files: list[str], tmp_path: Path) -> None:
    a, b = two_files
    b_parquet = converted([b], str(tmp_path / "b.parquet"))
    assert report_of([a, b_parquet]) == report_of([a, b])


def test_a_torch_job_with_a_failure_a_missing_rank_and_a_liar(tmp_path: Path) -> None:
    job = TorchJob(ranks=4, steps=5, collectives=2, liar=2, liar_ns=-20 * MS, fail=(3, 1), missing=(1, 0, 3))
    trace = job.write(str(tmp_path / "job.jsonl"))
    want = _same([trace], converted([trace], str(tmp_path / "job.parquet")), jobs=2)
    assert want["summary"]["failed_ops"] and want["summary"]["collectives_incomplete"] == 1


def test_a_directory_with_drop_records_bad_lines_and_a_report_in_it(two_files: list[str], tmp_path: Path) -> None:
    folder = tmp_path / "export"
    folder.mkdir()
    spans = Path(two_files[0]).read_text().splitlines()
    (folder / "spans-1.jsonl").write_text("\n".join([spans[0], loss_line("h/1/a", 3), "\x00\x01 torn", *spans[1:],
                                                     loss_line("h/1/a", 12)]) + "\n")
    (folder / "spans-2.jsonl").write_text(loss_line("h/2/b", 5) + "\n" + Path(two_files[1]).read_text())
    (folder / "report.json").write_text(json.dumps({"schema": "tempotrace.analysis/5"}) + "\n")
    want = _same([str(folder)], converted([str(folder)], str(tmp_path / "export.parquet")))
    assert want["export_loss"] == {"dropped_spans": 17, "writers": 2, "writers_with_loss": 2}
    assert want["bad"]["lines"] == 2 and len(want["bad"]["not_trace_files"]) == 1


def test_only_drop_records_is_no_spans_either_way(tmp_path: Path) -> None:
    trace = tmp_path / "loss.jsonl"
    trace.write_text(loss_line("h/1/a", 7) + "\n")
    parquet = converted([str(trace)], str(tmp_path / "loss.parquet"))
    for path in (str(trace), parquet):
        with pytest.raises(TraceFileError, match=r"no spans \(the exporters said they dropped 7"):
            analyze(path)


def _stamps(lts: int = 5) -> str:
    return encode_stamps(lts, T0 + TAI_UTC_NS, 220, 0, 2, T0, (lts + 3, T0 + TAI_UTC_NS + 900, 220, 0), T0 + 900,
                         sends=[(lts + 1, T0 + TAI_UTC_NS + 100, 300, 1)])


def _hostile_lines() -> list[str]:
    """Spans the analysis refuses, keeps as written, or reads from values no typed column holds as written."""
    ok = {"tempotrace.stamps": _stamps(), "tempotrace.uncertainty_ns": 220, "tempotrace.clk_quality": "OK"}
    spans: list[dict[str, Any]] = [
        span(1, 1, attrs=ok),
        span(1, 2, 1, attrs={**ok, "tempotrace.rank": "3"}),  # a rank of the wrong kind: refused
        span(1, 3, 1, attrs={**ok, "tempotrace.rank": -2}),  # out of range: refused
        span(1, 4, 1, attrs={"tempotrace.stamps": "s1,0 e-2 junk"}),  # a text that does not decode: refused
        span(1, 5, 1, attrs={**ok, "tempotrace.uncertainty_ns": 70_000}),  # plain bound out of range
        span(1, 6, 1, attrs={**ok, "http.route": "/a", "tempotrace.future_thing": 1.5, "tempotrace.rank": 1}),
        span(1, 7, 1, attrs={"tempotrace.svc_sketch": "AB" * 32, "tempotrace.ptp_ns": T0, "tempotrace.lts": 9}),
        span(1, 8, 1, attrs={"tempotrace.svc_sketch": "zz" * 32}),  # not hex: refused
        span(1, 9, 1, start=2**63 + 5, end=2**63 + 9),  # beyond int64, within fixed64: kept as written
        span(1, 10, 1, status={"code": "STATUS_CODE_ERROR", "message": "RuntimeError: boom"}),
        span(1, 11, 1, status={"code": 2}, events=[{"name": "exception", "attributes": [
            kv("exception.type", "ValueError"), kv("exception.message", "bad")]}]),
        span(1, 12, 1, status={"code": "NOT_A_CODE"}),
        span(1, 13, 1, kind="SPAN_KIND_SERVER"),
        span(1, 14, 1, kind=9),
        span(2, 15, attrs={"tempotrace.send.lts": [1, 2], "tempotrace.send.ptp_ns": [T0, T0 + 5]}),  # lengths differ
        span(2, 16, attrs={"tempotrace.torch.op": "all_reduce", "tempotrace.torch.group": "0-3",
                           "tempotrace.torch.group_size": 3}),  # a group key naming 4 ranks: refused
    ]
    spans[5]["attributes"].append({"key": "tempotrace.rank", "value": {"intValue": "2", "stringValue": "x"}})
    spans[0]["attributes"].append(kv("tempotrace.clk_quality", "DEGRADED"))  # a repeated key: the last wins
    b64 = span(3, 17, 16)
    b64["traceId"] = base64.b64encode(bytes.fromhex(b64["traceId"])).decode()
    b64["spanId"] = base64.b64encode(bytes.fromhex(b64["spanId"])).decode()
    malformed = [{"traceId": 5, "spanId": "00"}, {"traceId": "nothex", "spanId": "0000000000000001"},
                 {**span(4, 18), "spanId": "short"}, {**span(4, 19), "flags": "not a number"},
                 {**span(4, 20), "attributes": [{"key": "k", "value": {"intValue": "x"}}]}]
    return [
        line(spans, {"tempotrace.host": "h1", "service.name": "svc", "tempotrace.job_id": "j"}),
        line([b64, *malformed], {"tempotrace.host": "h2"}),
        line([span(5, 21), span(5, 22, 21)], {"tempotrace.rank": "not a rank"}),  # the Resource is refused
        line([span(6, 23, attrs=ok)], {"tempotrace.host": "h3", "tempotrace.export.dropped_spans": 4,
                                       "tempotrace.export.writer_id": "h3/9/c"}),
        "not json at all",
        '{"resourceMetrics": []}',
        "",
        "   ",
    ]


@pytest.mark.parametrize("jobs", [1, 2])
def test_hostile_spans_are_kept_refused_and_counted_alike(tmp_path: Path, jobs: int) -> None:
    trace = tmp_path / "hostile.jsonl"
    trace.write_text("\n".join(_hostile_lines()) + "\n")
    want = _same([str(trace)], converted([str(trace)], str(tmp_path / "hostile.parquet")), jobs=jobs)
    assert want["bad"]["lines"] == 2 and want["bad"]["spans"] >= 12 and want["export_loss"]["dropped_spans"] == 4


@pytest.mark.parametrize("jobs", [1, 2])
def test_bytes_not_utf8_inside_a_span(tmp_path: Path, jobs: int) -> None:
    """A string of bytes that are not UTF-8 that the line's decode passes over (inside a span): where the analysis
    reads it (a key, a string value) the line is bad, as a binary line is, not an exception out of analyze or
    convert; where it never reads it (an ignored value kind, the trace state) the span is kept, both ways."""
    good = line([span(1, 1, attrs={"tempotrace.rank": 1})]).encode()
    read = line([span(1, 2, 1, attrs={"k": "x"}), span(1, 3, 1)]).encode().replace(b'"k"', b'"k\xff"')
    value = line([span(1, 4, 1, attrs={"note": "y"})]).encode().replace(b'"y"', b'"\xc3"')
    ignored = line([span(1, 5, 1, attrs={"d": "z"})]).encode().replace(b'{"stringValue":"z"}',
                                                                      b'{"doubleValue":"\xff"}')
    state = line([{**span(1, 6, 1), "traceState": "t"}]).encode().replace(b'"t"', b'"\xed\xa0\x80"')
    trace = tmp_path / "bytes.jsonl"
    trace.write_bytes(b"\n".join([good, read, value, ignored, state]) + b"\n")
    want = _same([str(trace)], converted([str(trace)], str(tmp_path / "bytes.parquet")), jobs=jobs)
    assert want["bad"]["lines"] == 2 and want["spans"] == 3
    assert all(s["reason"].startswith("not UTF-8 text") for s in want["bad"]["first"])


def test_strict_stops_at_the_same_place(tmp_path: Path) -> None:
    trace = tmp_path / "hostile.jsonl"
    trace.write_text("\n".join(_hostile_lines()) + "\n")
    parquet = converted([str(trace)], str(tmp_path / "hostile.parquet"))
    errors = []
    for path in (str(trace), parquet):
        with pytest.raises(TraceFileError) as err:
            analyze(path, strict=True)
        errors.append((err.value.path, err.value.line, err.value.reason))
    assert errors[0] == errors[1] and errors[0][1] == 1


def test_a_line_longer_than_the_cap(tmp_path: Path) -> None:
    trace = tmp_path / "long.jsonl"
    trace.write_text(line([span(1, 1)]) + "\n" + line([span(2, i) for i in range(1, 200)]) + "\n")
    parquet = converted([str(trace)], str(tmp_path / "long.parquet"), max_line=4096)
    want = _same([str(trace)], parquet, max_line=4096)
    assert want["bad"]["lines"] == 1


# -- generated traces ------------------------------------------------------------------------------------------
_INT_NAMES = ("tempotrace.rank", "tempotrace.lts", "tempotrace.end.lts", "tempotrace.torch.step",
              "tempotrace.uncertainty_ns", "tempotrace.torch.seq", "tempotrace.restart")
_STR_NAMES = ("tempotrace.host", "tempotrace.clk_quality", "tempotrace.policy.verdict", "tempotrace.job_id",
              "tempotrace.torch.completion", "tempotrace.clock")
values = st.one_of(st.integers(-3, 70_000), st.integers(2**62, 2**64), st.sampled_from(["OK", "UNKNOWN", "x", "pass",
                                                                                         "degrade", "return"]),
                   st.booleans(), st.lists(st.integers(0, 9), max_size=3), st.floats(allow_nan=False))


@st.composite
def generated_span(draw: st.DrawFn, trace: int, sid: int, parents: list[int]) -> dict[str, Any]:
    attrs: dict[str, Any] = {}
    for name in draw(st.lists(st.sampled_from(_INT_NAMES + _STR_NAMES), max_size=4, unique=True)):
        attrs[name] = draw(values)
    if draw(st.booleans()):
        lts = draw(st.integers(0, 1000))
        texts = [_stamps(lts), f"s{lts},1", f"s{lts},0 e2,5 r1,-40,220,0,1,0,1", "s-1,0", "e1"]
        attrs["tempotrace.stamps"] = draw(st.sampled_from(texts))
    parent = draw(st.sampled_from([0, *parents]))
    start = T0 + draw(st.integers(0, 10**9))
    out = span(trace, sid, parent, start=start, end=start + draw(st.integers(0, 10**6)), attrs=attrs,
               kind=draw(st.integers(0, 5)))
    if draw(st.integers(0, 9)) == 0:
        out["status"] = {"code": 2, "message": draw(st.text(max_size=5))}
    return out


@st.composite
def generated_trace(draw: st.DrawFn) -> list[str]:
    lines = []
    sid = 0
    for t in range(draw(st.integers(1, 4))):
        spans: list[dict[str, Any]] = []
        for _ in range(draw(st.integers(1, 6))):
            sid += 1
            spans.append(draw(generated_span(t + 1, sid, [s for s in range(1, sid)])))
        resource = draw(st.sampled_from([{}, {"tempotrace.host": "r"}, {"tempotrace.rank": 2, "tempotrace.job_id": "j"},
                                         {"tempotrace.rank": "2"}]))
        lines.append(line(spans, resource))
        if draw(st.integers(0, 4)) == 0:
            lines.append(draw(st.sampled_from(["{bad", loss_line("w/1/x", draw(st.integers(0, 9)))])))
    return lines


@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(lines=generated_trace())
def test_generated_traces(lines: list[str], tmp_path: Path) -> None:
    trace = tmp_path / "gen.jsonl"
    trace.write_text("\n".join(lines) + "\n")
    parquet = str(tmp_path / "gen.parquet")
    try:
        want: Any = report_of(str(trace), window_spans=5)
    except TraceFileError as err:
        want = str(err).replace(str(trace), "IN")  # the samples name the JSON line, from either input
    converted([str(trace)], parquet)
    try:
        got: Any = report_of(parquet, window_spans=5)
    except TraceFileError as err:
        got = str(err).replace(parquet, "IN").replace(str(trace), "IN")
    assert got == want
