"""The columnar line decoder (analysis/columnar/lines.py; spec/analysis.md §5.6): a block of lines gives each
line's LineResult exactly as ``otlp.decode_line`` gives it alone (records equal field for field, the same
refusals, loss records and positions, the same BadLine), on the engine-agreement traces, the demos' kind of
lines, lines mutated value by value, and hostile lines; with the C pivot and without it, whole or one
partition's traces. And ``--engine columnar`` gives the reference's report."""

from __future__ import annotations

import json
from collections.abc import Sequence
from pathlib import Path
from typing import Any
from unittest import mock

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

pytest.importorskip("pyarrow")

from tempotrace_sdk.analysis.columnar import decode, rows
from tempotrace_sdk.analysis.columnar import pivot as P
from tempotrace_sdk.analysis.columnar.lines import decode_block
from tempotrace_sdk.analysis.otlp import BadLine, LineResult, decode_line

from .enginegen import drawn_trace
from .otlpgen import kv, line, loss_line, span, stamp
from .torchgen import TorchJob, p2p_span
from .tracegen import write_trace

STAMPS = "tempotrace.stamps"


def _reference(lines: list[tuple[int, bytes]], pos: int, shard: tuple[int, int] | None) -> list[Any]:
    out: list[Any] = []
    for number, data in lines:
        try:
            result = decode_line(data, number, pos, shard)
        except BadLine as err:
            out.append(("bad line", err.reason))
            continue
        out.append(result)
        pos += result.spans
    return out


def _columnar(lines: list[tuple[int, bytes]], pos: int, shard: tuple[int, int] | None, native: bool) -> list[Any]:
    return [("bad line", r.reason) if isinstance(r, BadLine) else r for r in decode_block(lines, pos, shard, native)]


def _job_lines(job: TorchJob, per_line: int) -> list[str]:
    import tempfile

    with tempfile.TemporaryDirectory() as folder:
        path = job.write(str(Path(folder) / "job.jsonl"), per_line=per_line)
        return Path(path).read_text().splitlines()


def assert_same(texts: Sequence[str | bytes], shard: tuple[int, int] | None = None, pos: int = 5) -> None:
    lines = [(i + 1, t.encode() if isinstance(t, str) else t) for i, t in enumerate(texts)]
    want = _reference(lines, pos, shard)
    for native, c_fields in ((True, True), (True, False), (False, False)):
        # (c_fields False: the stamps decoded in C, their readings and the OTLP fields made in Python)
        with mock.patch.object(rows, "_columns", rows._columns if c_fields else None), \
                mock.patch.object(decode, "_columns", decode._columns if c_fields else None):
            got = _columnar(lines, pos, shard, native)
        for i, (a, b) in enumerate(zip(want, got, strict=True)):
            assert a == b, f"line {i + 1} (native={native}, C fields {c_fields}): the reference's {a!r}\n" \
                f"!= the columnar {b!r}"


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture,
                                                                HealthCheck.too_slow, HealthCheck.data_too_large])
@given(drawn=drawn_trace(), shard=st.sampled_from([None, (0, 2), (1, 3)]))
def test_a_block_of_drawn_lines_is_each_lines_records(drawn: Any, shard: tuple[int, int] | None) -> None:
    assert_same(drawn.lines, shard)


def _mutated(draw: Any, text: str) -> str:
    """A line of ours with one attribute value swapped for a drawn one near the rules' edges."""
    doc = json.loads(text)
    spans = [sp for rs in doc["resourceSpans"] for ss in rs["scopeSpans"] for sp in ss["spans"]]
    sp = draw(st.sampled_from(spans))
    if not sp["attributes"]:
        return text
    at = draw(st.integers(0, len(sp["attributes"]) - 1))
    value = draw(st.one_of(
        st.integers(-3, 3).map(lambda i: {"intValue": str(i)}),
        st.sampled_from([{"intValue": str(2**63)}, {"intValue": "65536"}, {"stringValue": ""},
                         {"stringValue": "DEGRADED"}, {"stringValue": "degrade"}, {"stringValue": "0-3"},
                         {"stringValue": "x" * 1100}, {"boolValue": True}, {"arrayValue": {"values": []}},
                         {"stringValue": "AB" * 32}, {"stringValue": "0" * 16}, {}])))
    sp["attributes"][at]["value"] = value
    return json.dumps(doc, separators=(",", ":"))


@settings(max_examples=80, deadline=None, suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large])
@given(data=st.data())
def test_a_line_with_a_value_swapped_is_the_references(data: st.DataObject) -> None:
    """Every attribute of the torch job's spans in turn may take a value that breaks or keeps its rule: the
    block must route what breaks one to the reference, and read what keeps them as the reference does."""
    job = TorchJob(ranks=3, steps=1, collectives=2, job="j", liar=data.draw(st.one_of(st.none(), st.just(1))))
    texts = _job_lines(job, 4)
    picked = data.draw(st.lists(st.integers(0, len(texts) - 1), min_size=1, max_size=3))
    for i in picked:
        texts[i] = _mutated(data.draw, texts[i])
    assert_same(texts)


#: the SDK's texts (the HTTP demo's export): a client span's with one send, a server span's with the header
_TEXT = "s3,0 e7 x1,100500"
_RECV = "s6,0 e1 r4,-12295485,220,0,0,0,1 kAggAAAAAAABIAEAAAQAAAQAAAgAEBAQEBQAAAAAAABA"


def _one(attrs: dict[str, Any] | None = None, resource: dict[str, Any] | None = None, **extra: Any) -> str:
    return line([span(1, 0xA1, 0xA0, attrs=attrs, **extra),
                 span(1, 0xA2, 0xA1, kind=2, attrs={STAMPS: _RECV, "tempotrace.uncertainty_ns": 220,
                                                    "tempotrace.clk_quality": "OK"})], resource)


HOSTILE: list[tuple[str, str | bytes]] = [
    ("stamps text", _one({STAMPS: _TEXT})),
    ("a refused stamps text", _one({STAMPS: "s3,0 e7 x1"})),
    ("a text beside a plain bound out of its range", _one({STAMPS: _TEXT, "tempotrace.uncertainty_ns": 70000})),
    ("a text beside a plain quality", _one({STAMPS: _TEXT, "tempotrace.clk_quality": "DEGRADED"})),
    ("the previous attribute set", _one({**stamp("", 1000, lts=1), **stamp("end.", 2000, lts=2),
                                         **stamp("remote.", 900, lts=0), "tempotrace.recv.lts": 1,
                                         "tempotrace.svc_sketch": "ab" * 32,
                                         "tempotrace.remote.svc_sketch": "CD" * 32})),
    ("previous set: a bound but no reading", _one({"tempotrace.uncertainty_ns": 5})),
    ("previous set: sends", _one({"tempotrace.send.lts": [1, 2], "tempotrace.send.ptp_ns": [5, 6],
                                  "tempotrace.send.uncertainty_ns": [1, 1]})),
    ("previous set: sends of two lengths", _one({"tempotrace.send.lts": [1, 2], "tempotrace.send.ptp_ns": [5]})),
    ("a degrade verdict", _one({STAMPS: _TEXT, "tempotrace.policy.verdict": "degrade"})),
    ("an empty host: the Resource's", _one({"tempotrace.host": ""}, {"host.name": "r1", "tempotrace.rank": 2})),
    ("an empty clock name", _one({"tempotrace.clock": "", STAMPS: _TEXT}, {"tempotrace.clock": "cpu"})),
    ("NUL in a host", _one({"tempotrace.host": "a\x00b", "tempotrace.rank": 1})),
    ("a Resource's clock domain", _one({STAMPS: _TEXT}, {
        "tempotrace.clock": "cpu", "tempotrace.clock.domain": "kernel:x:tai", "tempotrace.clock.epoch_ns": 5,
        "tempotrace.clock.epoch_bound_ns": 10, "tempotrace.clock.read_ns": 20})),
    ("another clock than the Resource's", _one({STAMPS: _TEXT, "tempotrace.clock": "phc"}, {
        "tempotrace.clock": "cpu", "tempotrace.clock.domain": "kernel:x:tai", "tempotrace.clock.epoch_ns": 5,
        "tempotrace.clock.epoch_bound_ns": 10, "tempotrace.clock.read_ns": 20})),
    ("a span's own epoch", _one({STAMPS: _TEXT, "tempotrace.clock.epoch_ns": 9}, {
        "tempotrace.clock.domain": "kernel:x:tai", "tempotrace.clock.epoch_ns": 5,
        "tempotrace.clock.epoch_bound_ns": 10, "tempotrace.clock.read_ns": 20})),
    ("a stepped span", _one({STAMPS: _TEXT, "tempotrace.clock.stepped": True}, {
        "tempotrace.clock.domain": "kernel:x:tai", "tempotrace.clock.epoch_ns": 5,
        "tempotrace.clock.epoch_bound_ns": 10, "tempotrace.clock.read_ns": 20})),
    ("a job on the span, a restart on the Resource", _one({"tempotrace.job_id": "j"}, {"tempotrace.restart": 3})),
    ("a loss record", loss_line("w1", 7)),
    ("a loss record beside spans", json.dumps({"resourceSpans": [
        json.loads(loss_line("w", 2))["resourceSpans"][0], json.loads(_one())["resourceSpans"][0]]})),
    ("a loss record on a Resource with spans", _one(resource={"tempotrace.export.dropped_spans": 3,
                                                               "tempotrace.export.writer_id": "w"})),
    ("a Resource without spans", json.dumps({"resourceSpans": [
        {"resource": {"attributes": [kv("tempotrace.rank", -1)]}, "scopeSpans": []},
        json.loads(_one())["resourceSpans"][0]]})),
    ("a Resource breaking a rule", _one(resource={"tempotrace.rank": -1})),
    ("a Resource's attributes not a list", _one().replace('"resource":{"attributes":[]}',
                                                          '"resource":{"attributes":5}')),
    ("an ERROR status", _one(status={"code": 2, "message": "RuntimeError: x"})),
    ("an ERROR status by name, the exception event", _one(status={"code": "STATUS_CODE_ERROR"}, events=[
        {"name": "exception", "attributes": [kv("exception.type", "E"), kv("exception.message", "m")]}])),
    ("an OK status by name", _one(status={"code": "STATUS_CODE_OK"})),
    ("upper-case ids", _one().replace('"spanId":"00000000000000a1"', '"spanId":"00000000000000A1"')),
    ("base64 ids", _one().replace('"spanId":"00000000000000a1"', '"spanId":"AAAAAAAAAKE="')),
    ("a bad trace id", _one().replace('"traceId":"' + "0" * 31 + "1", '"traceId":"' + "z" * 32)),
    ("a kind by name", _one(kind="SPAN_KIND_SERVER")),
    ("a kind out of range", _one(kind=7)),
    # (these two crashed the columnar decode before its OTLP fields were read in C: int64 overflowed)
    ("a kind past int64", _one(kind=2**63)),
    ("a status code past int64", _one(status={"code": 2**70})),
    ("an empty trace id, first in its line", _one().replace('"traceId":"' + "0" * 31 + "1", '"traceId":"', 1)),
    ("a time past 2^63 with a text", _one({STAMPS: _TEXT}, start=2**63 + 5, end=2**63 + 9)),
    ("a time past 2^64", _one(end=2**64 + 1)),
    ("a key twice", _one({STAMPS: _TEXT}).replace('{"key":"tempotrace.host"', '{"key":"tempotrace.rank",'
                                                  '"value":{"intValue":"1"}},{"key":"tempotrace.host"', 1)),
    ("bytes not UTF-8 in an attribute", _one().encode().replace(b'"stringValue":"h"', b'"stringValue":"h\xff"', 1)),
    ("bytes not UTF-8 in the Resource", _one(resource={"service.name": "s"}).encode().replace(
        b'"stringValue":"s"', b'"stringValue":"s\xc3"', 1)),
    ("a torn line", _one()[:70]),
    ("not traces", '{"resourceMetrics":[]}'),
    ("a blank-looking line", "   "),
    ("a line without spans", '{"resourceSpans":[]}'),
]


@pytest.mark.parametrize(("name", "text"), HOSTILE, ids=[h[0] for h in HOSTILE])
def test_a_hostile_line_is_the_references(name: str, text: str | bytes) -> None:
    good = _one({STAMPS: _TEXT})
    assert_same([good, text, good])  # the lines beside it keep their positions and records
    assert_same([text], shard=(1, 2))


def _spied(monkeypatch: pytest.MonkeyPatch) -> list[int]:
    """The line numbers the block hands to the reference from now on."""
    from tempotrace_sdk.analysis.columnar import lines as block

    called: list[int] = []

    def spy(data: Any, number: int, *args: Any) -> LineResult:
        called.append(number)
        return decode_line(data, number, *args)

    monkeypatch.setattr(block, "decode_line", spy)
    return called


def test_a_refused_span_makes_its_line_the_references_and_no_other(monkeypatch: pytest.MonkeyPatch) -> None:
    """The block takes the clean lines from its columns and leaves the one with a refused span whole to the
    reference; the records are the same either way (what a user sees), which the tests above check. Here:
    the clean lines really were made from columns (else the tests above compare the reference with itself)."""
    good, bad = _one({STAMPS: _TEXT}), _one({"tempotrace.rank": -1})
    called = _spied(monkeypatch)
    out = decode_block([(1, good.encode()), (2, bad.encode()), (3, good.encode())], 0)
    assert called == [2]
    assert [len(r.records) for r in out if isinstance(r, LineResult)] == [2, 1, 2]
    refused = out[1]
    assert isinstance(refused, LineResult) and refused.bad and "tempotrace.rank" in refused.bad[0][1]


@pytest.mark.skipif(not P.NATIVE, reason="the C pivot is not built")
def test_the_exporters_lines_are_made_from_columns(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """The real SDK exporter's lines (stamps texts, hops, a Resource a line) and torch jobs' lines never need
    the reference."""
    path = tmp_path / "sdk.jsonl"
    write_trace(str(path), {"coord": "sim:ptp", "w1": "sim:ntp", "w2": "sim:liar"}, steps=2)
    texts = path.read_text().splitlines() + _job_lines(TorchJob(ranks=4, steps=2, collectives=3, job="j"), 8)
    assert any(STAMPS in t for t in texts)
    called = _spied(monkeypatch)
    decode_block([(i, t.encode()) for i, t in enumerate(texts, 1)], 0)
    assert called == []
    assert_same(texts)


def test_point_to_point_ops_are_made_from_columns_as_the_reference_makes_them(monkeypatch: pytest.MonkeyPatch) -> None:
    """Sends and receives: a receive carrying its sender's record (a bound other than the default, a counter),
    one whose record has no reading, one marked ambiguous, one with neither; every TorchOp field as the
    reference reads it, and from columns."""
    kw: dict[str, Any] = {"group": "0-1", "u": 300}
    spans = [p2p_span("send", 0, 1, 0, 10, seq=0, lts=1, end_lts=2, **kw),
             p2p_span("recv", 1, 0, 0, 20, seq=0, lts=1, end_lts=2, record={"ptp": 5, "u": 777, "lts": 9,
                                                                            "span": 0x10_0001}, **kw),
             p2p_span("recv", 1, 0, 30, 40, seq=1, lts=3, end_lts=4, torch_p2p_ambiguous=True, **kw),
             p2p_span("recv", 1, 0, 50, 60, seq=2, lts=5, end_lts=6, **kw)]
    lts_only = p2p_span("recv", 1, 0, 70, 80, seq=3, record={"ptp": 0, "lts": 11, "span": 0x10_0004}, **kw)
    lts_only["attributes"] = [a for a in lts_only["attributes"] if a["key"] != "tempotrace.torch.remote.ptp_ns"]
    texts = [line([*spans, lts_only])]
    called = _spied(monkeypatch)
    out = decode_block([(1, texts[0].encode())], 0)
    assert called == []
    ops = [r.torch for r in out[0].records]  # type: ignore[union-attr]
    assert ops[1] is not None and ops[1].remote is not None and ops[1].remote.uncertainty_ns == 777
    assert ops[2] is not None and ops[2].ambiguous and ops[4] is not None and ops[4].remote is not None
    assert_same(texts)


def test_the_columnar_reader_counts_lines_as_the_reference(tmp_path: Path) -> None:
    """Lines too long, blank, not JSON, loss records and refused spans among clean ones, read by
    ``--engine columnar``: the report's bad-line samples, loss and counts are the reference's; strict, the
    same first error."""
    from tempotrace_sdk.analysis import TraceFileError, analyze

    from .parquetgen import comparable

    good = _one({STAMPS: _TEXT})
    texts = [good, "x" * 5000, "", "   ", "{not json", loss_line("w", 4), _one({"tempotrace.rank": -1}), good,
             _one(kind="SPAN_KIND_CLIENT")]
    path = tmp_path / "mixed.jsonl"
    path.write_text("\n".join(texts) + "\n")
    want = analyze(str(path), max_line=4096).to_dict()
    assert (want["bad"]["lines"], want["bad"]["spans"], want["export_loss"]["dropped_spans"]) == (2, 1, 4), want
    assert comparable(analyze(str(path), max_line=4096, engine="columnar").to_dict()) == comparable(want)
    errors = []
    for engine in ("reference", "columnar"):
        with pytest.raises(TraceFileError) as err:
            analyze(str(path), max_line=4096, strict=True, engine=engine)
        errors.append(str(err.value))
    assert errors[0] == errors[1]


def test_the_columnar_engine_without_pyarrow_says_what_to_install(tmp_path: Path) -> None:
    """pyarrow is the analysis extra's: without it --engine columnar stops with the install line (exit 2)
    before reading, and the reference engine runs as ever."""
    import subprocess
    import sys

    path = tmp_path / "t.jsonl"
    path.write_text(_one({STAMPS: _TEXT}) + "\n")
    blocked = ("import sys; sys.modules['pyarrow'] = None; from tempotrace_sdk.cli.main import main; "
               "sys.exit(main(sys.argv[1:]))")
    for engine, code in (("columnar", 2), ("reference", 0)):
        out = subprocess.run([sys.executable, "-c", blocked, "analyze", "--quiet", "--engine", engine, str(path)],
                             capture_output=True, text=True, timeout=120, check=False)
        assert out.returncode == code, out.stderr
        if code:
            assert "--engine columnar needs pyarrow" in out.stderr and "tempotrace-sdk[analysis]" in out.stderr
            assert "Traceback" not in out.stderr


def test_the_default_engine_is_columnar_where_it_is_installed(tmp_path: Path,
                                                              monkeypatch: pytest.MonkeyPatch) -> None:
    """engine="auto" (the default, and the CLI's) runs the columnar decode when pyarrow, numpy and the native
    module import, else the reference: one report either way."""
    import subprocess
    import sys

    from tempotrace_sdk.analysis import api

    pytest.importorskip("tempotrace_sdk._columns", reason="the native columns module is not built")
    path = tmp_path / "t.jsonl"
    path.write_text(_one({STAMPS: _TEXT}) + "\n")
    seen: list[bool] = []
    real_run = api.run

    def spy(sources: Any, topology: Any, options: Any, **kw: Any) -> Any:
        seen.append(options.columnar)
        return real_run(sources, topology, options, **kw)

    monkeypatch.setattr(api, "run", spy)
    assert api.columnar_installed()
    by_default = api.analyze(str(path)).to_dict()
    monkeypatch.setattr(api, "columnar_installed", lambda: False)
    without = api.analyze(str(path)).to_dict()
    assert seen == [True, False]
    from .parquetgen import comparable

    assert comparable(by_default) == comparable(without)
    blocked = ("import sys; sys.modules['pyarrow'] = None; from tempotrace_sdk.cli.main import main; "
               "sys.exit(main(sys.argv[1:]))")
    out = subprocess.run([sys.executable, "-c", blocked, "analyze", "--quiet", "--json", str(path)],
                         capture_output=True, text=True, timeout=120, check=False)
    assert out.returncode == 0, out.stderr  # no pyarrow: the reference, silently
