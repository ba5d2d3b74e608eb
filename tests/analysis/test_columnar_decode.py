"""The columnar decode (analysis/columnar; spec/analysis.md §5.5): the C pivot answers as the Python pivot on
every attribute array drawn (it may refuse more, never answer otherwise), takes the exporter's own lines
whole, and the columns it decodes hold what the span table (``tempotrace convert``'s rows) holds."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

pytest.importorskip("pyarrow")

from tempotrace_sdk.analysis import parquet_layout as L
from tempotrace_sdk.analysis.columnar import pivot as P
from tempotrace_sdk.analysis.columnar.decode import ATTRIBUTE_COLUMNS, SpanColumns
from tempotrace_sdk.analysis.otlp import BadLine
from tempotrace_sdk.analysis.parquet_rows import RowBlock
from tempotrace_sdk.analysis.schema import HEX
from tempotrace_sdk.analysis.values import SPAN_RULES

from .enginegen import drawn_trace
from .torchgen import TorchJob
from .tracegen import write_trace

native = pytest.mark.skipif(not P.NATIVE, reason="the C pivot is not built (not Linux, no compiler)")

COLUMNS = [("n", 0), ("s", 1), ("b", 2), ("a", 3)]
KEYS = ["n", "s", "b", "a", "other", "tempotrace.future"]

#: AnyValues as JSON text: the plain shapes and what a writer other than ours may send
VALUES = st.one_of(
    st.integers(-(2**64), 2**64).map(lambda i: f'{{"intValue":"{i}"}}'),
    st.integers(-(2**64), 2**64).map(lambda i: f'{{"intValue":{i}}}'),
    st.sampled_from(['{"intValue":"007"}', '{"intValue":"-0"}', '{"intValue":"+5"}', '{"intValue":1.5}',
                     '{"intValue":1e3}', '{"intValue":""}', '{ "intValue" : "5" }',
                     '{"intValue":"2","stringValue":"x"}', '{}', '{"doubleValue":2.5}', '{"bytesValue":"AAE="}',
                     '{"kvlistValue":{"values":[]}}', '{"boolValue":true}', '{"boolValue":false}',
                     '{"stringValue":"a\\"b"}', '{"stringValue":"\\u00e9"}',
                     '{"stringValue":"é"}', '{"stringValue":""}', '{"arrayValue":{"values":[]}}',
                     '{"arrayValue":{"values":[{"intValue":"1"},{"intValue":2}]}}',
                     '{"arrayValue":{"values":[{"intValue":"1"},{"stringValue":"x"}]}}',
                     '{"arrayValue":{"values":[{"arrayValue":{"values":[]}}]}}']),
    st.text(max_size=6).map(lambda t: json.dumps({"stringValue": t})),
)


#: entries holding bytes that are not UTF-8 (a lone byte, a cut sequence, an encoded surrogate)
BAD_UTF8 = [b'{"key":"o\xff","value":{}}', b'{"key":"s","value":{"stringValue":"\xc3"}}',
            b'{"key":"other","value":{"stringValue":"\xed\xa0\x80"}}', b'{"key":"n\xff","value":{"intValue":"1"}}',
            b'{"key":"other","value":{"doubleValue":"\xff"}}']


@st.composite
def attribute_array(draw: st.DrawFn) -> bytes:
    entries = [f'{{"key":{json.dumps(draw(st.sampled_from(KEYS)))},"value":{draw(VALUES)}}}'
               for _ in range(draw(st.integers(0, 6)))]
    if draw(st.integers(0, 9)) == 0:  # the fields the other way round, or spaced
        entries.append('{"value":{"intValue":"1"},"key":"n"}' if draw(st.booleans()) else
                       ' { "key" : "s" , "value" : { "stringValue" : "x" } } ')
    data = [e.encode() for e in entries]
    if draw(st.integers(0, 4)) == 0:  # bytes that are not UTF-8, in a key or a string (the skeleton lets them by)
        data.insert(draw(st.integers(0, len(data))), draw(st.sampled_from(BAD_UTF8)))
    return b"[" + b",".join(data) + b"]"


@native
@settings(max_examples=300, deadline=None)
@given(arrays=st.lists(attribute_array(), min_size=1, max_size=8))
def test_the_c_pivot_answers_as_the_python_pivot(arrays: list[bytes]) -> None:
    c, py = P.make_pivot(COLUMNS), P.PythonPivot(COLUMNS)
    kinds = [k for _, k in COLUMNS]
    want, want_refused = P.pivot_arrays(py, py, kinds, arrays)
    outs, c_refused = c.scan(arrays)
    assert set(want_refused) <= set(c_refused)  # C refuses what Python refuses, and perhaps more
    taken = [i for i in range(len(arrays)) if i not in c_refused]
    for k, (out, expected) in enumerate(zip(outs, want, strict=True)):
        got = P.from_buffers(kinds[k], len(arrays), out).to_pylist()
        assert [got[i] for i in taken] == [expected[i].as_py() for i in taken], (COLUMNS[k], arrays)
        assert all(got[i] is None for i in c_refused)
    merged, refused = P.pivot_arrays(c, py, kinds, arrays)  # C's answer, its refusals answered by Python
    assert refused == want_refused and [a.to_pylist() for a in merged] == [a.to_pylist() for a in want]


def _lines(path: Path) -> list[bytes]:
    return [ln.rstrip(b"\n") for ln in path.read_bytes().splitlines() if ln.strip()]


@native
def test_the_exporters_own_lines_are_taken_whole_in_c(tmp_path: Path) -> None:
    """Real SDK spans through the OTLP JSON file exporter, and torch op spans as the SDK writes them."""
    http = tmp_path / "http.jsonl"
    write_trace(str(http), {"c": "sim:ptp", "w1": "sim:ntp", "w2": "sim:liar"}, steps=2)
    torch = Path(TorchJob(ranks=3, steps=2, fail=(1, 0)).write(str(tmp_path / "torch.jsonl")))
    for path in (http, torch):
        decoded = SpanColumns()
        for i, data in enumerate(_lines(path)):
            decoded.add_line(data, i + 1)
        attributes = decoded.fields().attributes
        _, refused = decoded._pivot.scan(attributes)
        assert len(attributes) > 20 and refused == []
        assert decoded.left_lines == []


def _as_table_cell(key: str, value: Any) -> Any:
    """A decoded cell as the span table's typed column holds it (hex digits as their bytes)."""
    if value is not None and SPAN_RULES[key].kind == HEX:
        try:
            data = bytes.fromhex(value)
        except ValueError:
            return ("not hex", value)
        return data if len(value) == 2 * len(data) else ("not hex", value)
    return value


_TYPED = {c.attribute: c.name for c in L.SPAN_ATTRIBUTE_COLUMNS}


@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large])
@given(drawn=drawn_trace())
def test_decoded_columns_hold_what_the_span_table_holds(drawn: Any) -> None:
    """For every span of the lines the analysis reads, the ids, times and each ``tempotrace.*`` attribute's
    value are the span table's (RowBlock, what ``convert`` writes), where the table holds it typed."""
    block, decoded = RowBlock(), SpanColumns()
    for i, text in enumerate(drawn.lines):
        data = text.encode()
        try:
            block.add_line(data)
        except BadLine:
            continue
        decoded.add_line(data, i + 1)
    assert not decoded.left_lines
    table, fields = decoded.table().to_pylist(), decoded.fields()
    assert len(table) == block.rows
    for i, (row, span) in enumerate(zip(table, block.spans, strict=True)):
        if L.OTLP_JSON in span:  # a span the table keeps as written: the reference reader's
            continue
        assert bytes.fromhex(fields.trace_id[i]) == span[L.TRACE_ID] and \
            bytes.fromhex(fields.span_id[i]) == span[L.SPAN_ID]
        assert fields.trace_id[i] == fields.trace_id[i].lower()
        assert (row["start"], row["end"]) == (span[L.START], span[L.END])
        assert not row["refused"]
        for key, _ in ATTRIBUTE_COLUMNS:
            column = _TYPED.get(key)
            if column is not None:
                assert _as_table_cell(key, row["attribute." + key]) == span.get(column), key


# -- the rule prefilter (columnar/rules.py) ---------------------------------------------------------------------
def _near(rule: Any) -> Any:
    """Values about a rule's edges: inside, just outside, another kind."""
    kind = rule.kind
    if kind == "int":
        lo, hi = rule.lo, rule.hi
        return st.one_of(st.integers(max(lo - 2, -(2**63)), lo + 2), st.integers(hi - 2, min(hi + 2, 2**63 - 1)),
                         st.integers(lo, min(hi, lo + 1000)))
    if kind == "string":
        if rule.choices is not None:
            return st.sampled_from([*sorted(rule.choices), "x", "", "OK ", "ok"])
        if rule.pattern is not None:
            return st.sampled_from(["0-3", "0,1", "0-7:2", "3", "1-", "a", "0-3#x", "\u0663", "0-3\n", " 0-3"])
        return st.one_of(st.text(max_size=4), st.just("x" * (rule.max_chars + 1)), st.just("x" * rule.max_chars))
    if kind == "hex":
        half = rule.digits // 2
        return st.sampled_from(["ab" * half, "AB" * half, "zz" * half, "ab" * (half - 1), "ab" * half + "a",
                                " a" * half])
    if kind == "int[]":
        return st.lists(st.integers(rule.lo - 1, rule.lo + 3), max_size=3)
    return st.booleans()


@st.composite
def rule_span_line(draw: st.DrawFn) -> str:
    from .otlpgen import line, span

    def attrs(rules: dict[str, Any]) -> dict[str, Any]:
        keys = draw(st.lists(st.sampled_from(sorted(rules)), max_size=5, unique=True))
        return {k: draw(_near(rules[k]) if draw(st.integers(0, 5)) else _near(rules[draw(st.sampled_from(
            sorted(rules)))])) for k in keys}

    from tempotrace_sdk.analysis.values import RESOURCE_RULES
    spans = [span(1, i + 1, attrs=attrs({k: r for k, r in SPAN_RULES.items() if k != "tempotrace.stamps"}))
             for i in range(draw(st.integers(1, 4)))]
    for sp in spans:  # OTLP fields the reference reads, or refuses
        if draw(st.integers(0, 3)) == 0:
            field, value = draw(st.sampled_from([
                ("traceId", "AAAAAAAAAAAAAAAAAAAAAA=="), ("traceId", "ab" * 15), ("traceId", "AB" * 16),
                ("traceId", "zz" * 16), ("spanId", "AAAAAAAAAAA="), ("spanId", " a" * 8), ("parentSpanId", "ab" * 7),
                ("parentSpanId", ""), ("kind", "SPAN_KIND_SERVER"), ("kind", 9), ("kind", -1), ("kind", 2**31),
                ("startTimeUnixNano", "-1"), ("endTimeUnixNano", str(2**64)), ("startTimeUnixNano", str(2**64 - 1))]))
            sp[field] = value
    return line(spans, attrs(RESOURCE_RULES))


@settings(max_examples=300, deadline=None)
@given(lines=st.lists(rule_span_line(), min_size=1, max_size=3))
def test_a_row_the_prefilter_passes_keeps_every_rule(lines: list[str]) -> None:
    """Its span's attributes and its Resource's read by the rules themselves (values.py) raise nothing."""
    import msgspec

    from tempotrace_sdk.analysis.columnar.rules import may_break
    from tempotrace_sdk.analysis.otlp import KeyValue
    from tempotrace_sdk.analysis.values import RESOURCE, SPAN, AttributeRuleError, norm_id, span_kind, unix_nanos

    decoded = SpanColumns()
    for i, text in enumerate(lines):
        decoded.add_line(text.encode(), i + 1)
    fields = decoded.fields()
    marked = may_break(decoded.table()) | fields.marked
    kvs = msgspec.json.Decoder(list[KeyValue], strict=False)
    for row, (attributes, resource) in enumerate(zip(fields.attributes, decoded.resource, strict=True)):
        if marked[row]:
            continue
        try:
            SPAN.read_otlp(kvs.decode(attributes))
            RESOURCE.read_otlp(kvs.decode(decoded.resources[resource]))
            sp = decoded.spans[row]  # as written; the fields as the reference reads them
            assert norm_id(sp.traceId, 16, "traceId") == fields.trace_id[row]
            assert norm_id(sp.spanId, 8, "spanId") == fields.span_id[row]
            if sp.parentSpanId:
                assert norm_id(sp.parentSpanId, 8, "parentSpanId") == fields.parent[row]
            else:
                assert fields.parent[row] == ""
            assert span_kind(fields.kind[row]) == fields.kind[row]
            assert unix_nanos(fields.start[row], "startTimeUnixNano") == fields.start_times[row].as_py()
            assert unix_nanos(fields.end[row], "endTimeUnixNano") == fields.end_times[row].as_py()
        except (AttributeRuleError, msgspec.DecodeError) as err:
            pytest.fail(f"row {row} passed the prefilter but breaks a rule: {err}")


# -- trace parts (columnar/parts.py) ----------------------------------------------------------------------------
@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large])
@given(drawn=drawn_trace(), window=st.sampled_from([1, 2, 5, 7, 40]))
def test_parts_are_the_streaming_analysiss_parts(drawn: Any, window: int, tmp_path_factory: Any) -> None:
    """The parts the Analyzer analyses (each call of _analyse: its spans' trace and positions) are those
    part_starts gives for the same spans' traces and positions."""
    import numpy as np

    from tempotrace_sdk.analysis import analyze
    from tempotrace_sdk.analysis.analyzer import Analyzer
    from tempotrace_sdk.analysis.columnar.parts import part_starts

    seen: list[tuple[str, list[int]]] = []
    analyse = Analyzer._analyse

    def recording(self: Analyzer, spans: list[Any]) -> None:
        seen.append((spans[0].trace_id, [s.pos for s in spans]))
        analyse(self, spans)

    path = drawn.write(str(tmp_path_factory.mktemp("parts") / "drawn.jsonl"))
    Analyzer._analyse = recording  # type: ignore[method-assign]
    try:
        analyze(path, window_spans=window)
    finally:
        Analyzer._analyse = analyse  # type: ignore[method-assign]
    traces = {tid: i for i, tid in enumerate(sorted({tid for tid, _ in seen}))}
    rows = [(traces[tid], p) for tid, positions in seen for p in positions]
    trace = np.array([t for t, _ in rows], dtype=np.int64)
    pos = np.array([p for _, p in rows], dtype=np.int64)
    starts = part_starts(trace, pos, window)
    got = sorted(sorted(int(p) for p, s, t in zip(pos, starts, trace, strict=True) if (t, s) == key)
                 for key in {(int(t), int(s)) for t, s in zip(trace, starts, strict=True)})
    assert got == sorted(sorted(positions) for _, positions in seen)


# -- the stamps column (columnar/stamps.py) ---------------------------------------------------------------------
def _stamps_cases() -> list[tuple[str, int, int, int | None, str | None]]:
    from .test_parquet_stamps import CASES

    names = {0: "OK", 1: "DEGRADED", 2: "UNKNOWN", -1: "NOT A QUALITY"}
    return [(text, start, end, unc, None if qual is None else names[qual]) for _, text, start, end, unc, qual in CASES
            if len(text) < 10_000 and (unc is None or -(2**63) <= unc < 2**63)]  # (beyond int64: the pivot's)


@native
def test_a_column_of_stamps_texts_reads_as_each_text_alone() -> None:
    """Every stamps vector (valid and refused, with every plain-attribute case), and a row without a text, in one
    column: each row's slots, sketch and sends are what stampsread.NativeStamps gives for it alone."""
    import numpy as np
    import pyarrow as pa

    from tempotrace_sdk.analysis.columnar.stamps import read_column
    from tempotrace_sdk.analysis.stampsread import NativeStamps

    cases = _stamps_cases()
    cases.insert(3, (None, 5, 6, None, None))  # type: ignore[arg-type]
    quality_number = {"OK": 0, "DEGRADED": 1, "UNKNOWN": 2}
    block = read_column(pa.array([c[0] for c in cases], pa.string()), pa.array([c[1] for c in cases], pa.uint64()),
                        pa.array([c[2] for c in cases], pa.uint64()), pa.array([c[3] for c in cases], pa.int64()),
                        pa.array([c[4] for c in cases], pa.string()))
    assert block is not None
    alone = NativeStamps()
    decoded = 0
    for i, (text, start, end, unc, qual) in enumerate(cases):
        if text is None:
            assert block.slots[i, 0] == -1
            continue
        want = alone.slots(text, start, end, unc, None if qual is None else quality_number.get(qual, -1))
        if want is None:
            assert block.slots[i, 0] > 0, text
            continue
        decoded += 1
        slots, sketch, sends = want
        assert list(block.slots[i]) == slots, text
        assert (bytes(block.sketch[i]) if slots[20] else None) == sketch
        lo, hi = block.send_offsets[i], block.send_offsets[i + 1]
        assert tuple(np.asarray(block.sends[lo:hi]).reshape(-1)) == sends
    assert decoded > 40 and len(cases) - decoded > 40  # valid and refused texts both


@native
def test_a_column_of_many_sends_is_read_whole() -> None:
    import pyarrow as pa

    from tempotrace_sdk.analysis.columnar.stamps import read_column

    text = "s5,0 e300 " + " ".join(f"x{i + 1},{10 * i}" for i in range(200))
    block = read_column(pa.array([text, "s1,0", text]), pa.array([10**18] * 3, pa.uint64()),
                        pa.array([10**18 + 10_000] * 3, pa.uint64()), pa.array([220] * 3, pa.int64()),
                        pa.array(["OK"] * 3))
    assert block is not None and list(block.send_offsets) == [0, 200, 200, 400]
    from tempotrace_sdk.analysis.stampsread import NativeStamps

    want = NativeStamps().slots(text, 10**18, 10**18 + 10_000, 220, 0)
    assert want is not None
    assert tuple(block.sends[:200].reshape(-1)) == want[2] == tuple(block.sends[200:].reshape(-1))


# -- identity columns (columnar/records.py) ---------------------------------------------------------------------
@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large])
@given(drawn=drawn_trace(), extra=st.lists(rule_span_line(), max_size=2))
def test_a_spans_host_rank_clock_and_job_are_its_records(drawn: Any, extra: list[str]) -> None:
    """For every row the prefilter passes, the identity columns equal the reference record's fields (its reader,
    reader.iter_spans, on the same lines: a record's position is its row)."""
    import tempfile

    from tempotrace_sdk.analysis.columnar.records import identity
    from tempotrace_sdk.analysis.columnar.rules import may_break
    from tempotrace_sdk.analysis.reader import iter_spans

    lines = [*drawn.lines, *extra]
    decoded = SpanColumns()
    with tempfile.TemporaryDirectory() as folder:
        path = Path(folder) / "drawn.jsonl"
        path.write_text("\n".join(lines) + "\n")
        records = {r.pos: r for r in iter_spans(str(path), strict=False)}
        for i, text in enumerate(lines):
            decoded.add_line(text.encode(), i + 1)
    table = decoded.table()
    marked = may_break(table) | decoded.fields().marked
    cols = {k: v.to_pylist() for k, v in identity(table).items()}
    compared = 0
    for row in range(table.num_rows):
        record = records.get(row)
        if marked[row] or record is None:
            continue
        compared += 1
        job = None if cols["job_id"][row] is None else (cols["job_id"][row], cols["restart"][row])
        assert (cols["host"][row], cols["rank"][row], cols["clock"][row], cols["clock_source"][row], job) == \
            (record.host, record.rank, record.clock, record.clock_source, record.job), row
    assert compared or not records  # (a prefilter that marked every row would pass the rest)


def _torch_line(draw: st.DrawFn) -> str:
    """A line of op spans with torch values about their rules' edges (group keys against sizes, ranks)."""
    from .otlpgen import line, span
    from .torchgen import op_span, p2p_span

    spans = []
    for i in range(draw(st.integers(1, 4))):
        group = draw(st.sampled_from(["0-3", "0,1", "0-7:2", "5", "0-3#x", "3-1", "0-1048576"]))
        kw: dict[str, Any] = {"sid": 0x9000 + i, "seq": draw(st.one_of(st.none(), st.integers(0, 3)))}
        if draw(st.booleans()):
            kw.update(root=draw(st.integers(0, 3)), recv_lts=draw(st.integers(0, 9)),
                      missing=draw(st.lists(st.integers(0, 3), max_size=2)),
                      recv_sketch=draw(st.sampled_from(["AB" * 32, "0f" * 32])))
        sp = op_span(draw(st.integers(0, 3)), 0, 1000, group="0-3", **kw)
        if draw(st.booleans()):
            sp = p2p_span(draw(st.sampled_from(["send", "recv"])), 0, 1, 0, 1000, seq=draw(st.integers(0, 2)),
                          tag=draw(st.integers(-2, 2)), sid=0xA000 + i, group="0-3",
                          record=draw(st.one_of(st.none(), st.just({"ptp": 5, "lts": 3, "span": 0x1F}))))
        if draw(st.booleans()):  # a sender's record without its bound and quality: their defaults
            sp["attributes"] = [kv for kv in sp["attributes"] if kv["key"] not in (
                "tempotrace.torch.remote.uncertainty_ns", "tempotrace.torch.remote.clk_quality")]
        for kv in sp["attributes"]:  # the group key and its size, drawn apart: some disagree
            if kv["key"] == "tempotrace.torch.group":
                kv["value"] = {"stringValue": group}
            elif kv["key"] == "tempotrace.torch.group_size":
                kv["value"] = {"intValue": str(draw(st.sampled_from([1, 2, 4, 5])))}
        spans.append(sp)
    if draw(st.booleans()):  # rare attributes, no op: a step span
        spans.append(span(0xB0, 0xB1, attrs={"tempotrace.torch.step": 2, **draw(st.sampled_from(
            [{}, {"tempotrace.torch.step_occurrence": 1}]))}))
    if draw(st.booleans()):  # a dump record, some counts left out
        dump = {"tempotrace.torch.dump.reason": draw(st.sampled_from(["hang", "signal"])),
                "tempotrace.torch.dump.ops": 7, "tempotrace.torch.dump.pending": 2,
                "tempotrace.torch.dump.overwritten": 1, "tempotrace.torch.dump.requested_by": 3}
        keep = draw(st.lists(st.sampled_from(sorted(dump)[1:]), unique=True))
        spans.append(span(0xC0, 0xC1, name="torch.dump", attrs={k: v for k, v in dump.items()
                                                                 if k in keep or k.endswith("reason")}))
    return line(spans)


@settings(max_examples=80, deadline=None, suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large])
@given(data=st.data())
def test_a_spans_torch_op_is_its_records(data: st.DataObject) -> None:
    """torch_ops gives the reference record's TorchOp (None: no op) on every row the prefilter passes and
    torch_refusals does not mark; a row it marks is one the reference refuses."""
    import tempfile

    from tempotrace_sdk.analysis import TraceFileError
    from tempotrace_sdk.analysis.columnar.records import steps_and_dumps, torch_ops, torch_refusals
    from tempotrace_sdk.analysis.columnar.rules import may_break
    from tempotrace_sdk.analysis.events import DumpInfo
    from tempotrace_sdk.analysis.reader import iter_spans

    lines = [data.draw(st.composite(_torch_line)()) for _ in range(data.draw(st.integers(1, 3)))]
    decoded = SpanColumns()
    with tempfile.TemporaryDirectory() as folder:
        path = Path(folder) / "ops.jsonl"
        path.write_text("\n".join(lines) + "\n")
        records: dict[int, Any] = {}
        try:
            for r in iter_spans(str(path), strict=False):
                records[r.pos] = r
        except TraceFileError:  # every span refused: "no spans"
            pass
        for i, text in enumerate(lines):
            decoded.add_line(text.encode(), i + 1)
    table = decoded.table()
    marked, refused = may_break(table) | decoded.fields().marked, torch_refusals(table)
    cols = {k: v.to_pylist() for k, v in torch_ops(table).items()}
    more = {k: v.to_pylist() for k, v in steps_and_dumps(table).items()}
    for row in range(table.num_rows):
        record = records.get(row)
        if marked[row]:
            continue
        if refused[row]:
            assert record is None, row  # the reference refuses it too
            continue
        assert record is not None, row
        dump = None if more["dump.reason"][row] is None else DumpInfo(
            more["dump.reason"][row], more["dump.ops"][row], more["dump.pending"][row], more["dump.overwritten"][row],
            more["dump.requested_by"][row])
        assert (more["step"][row], more["step_occurrence"][row], dump) == (record.step, record.step_occurrence,
                                                                          record.dump), row
        op = record.torch
        if op is None:
            assert cols["op"][row] is None
            continue
        remote = None if cols["remote.ptp_ns"][row] is None and cols["remote.lts"][row] is None else (
            cols["remote.ptp_ns"][row], cols["remote.uncertainty_ns"][row], cols["remote.clk_quality"][row],
            cols["remote.lts"][row])
        got = (cols["op"][row], cols["group"][row], cols["group_rank"][row], cols["seq"][row], cols["root"][row],
               cols["completion"][row], cols["src"][row], cols["dst"][row], cols["tag"][row], cols["p2p_seq"][row],
               cols["recv_lts"][row], tuple(cols["recv_missing"][row] or ()),
               None if cols["recv_sketch"][row] is None else int(cols["recv_sketch"][row], 16),
               cols["remote_span"][row], cols["ambiguous"][row], remote)
        want = (op.op, op.group, op.group_rank, op.seq, op.root, op.completion, op.src, op.dst, op.tag, op.p2p_seq,
                op.recv_lts, op.recv_missing, op.recv_sketch, op.remote_span, op.ambiguous,
                None if op.remote is None else (op.remote.ptp_ns, op.remote.uncertainty_ns, op.remote.quality,
                                                op.remote.lts))
        assert got == want, row
